package ingest

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
)

// TestEncodeRecordMatchesProto: the hand-built record decodes to the same
// message proto would have encoded.
func TestEncodeRecordMatchesProto(t *testing.T) {
	t.Parallel()
	p := &stationv1.Packet{StationId: "S1", Seq: 42, SentAtMs: 1_800_000_000_000, RttUs: 900,
		Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{FirstSampleMs: 5, RateHz: 50, Ns: []int32{1, -2, 3}}}}
	raw, _ := proto.Marshal(p)
	want := &ingestv1.Record{Packet: p, RecvAtMs: 1_800_000_000_123, Site: "TYO-1", Transport: ingestv1.Transport_TRANSPORT_WS}
	var got ingestv1.Record
	if err := proto.Unmarshal(encodeRecord(raw, 1_800_000_000_123, "TYO-1", ingestv1.Transport_TRANSPORT_WS), &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("got %v, want %v", &got, want)
	}
}

package recordwire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

func records(t testing.TB) (msgs []*ingestv1.Record, wire [][]byte) {
	t.Helper()
	msgs = []*ingestv1.Record{
		{Packet: &stationv1.Packet{StationId: "S1", Seq: 7, SentAtMs: 1_800_000_000_000,
			Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: 1_800_000_000_000, Intensity: 2.5}}},
			RecvAtMs: 1_800_000_000_040, Site: "TNN-1", TraceContext: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{Packet: &stationv1.Packet{StationId: "S2", Seq: 1 << 40,
			Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{FirstSampleMs: 5, RateHz: 50, Ns: []int32{1, -2, 3}}}},
			RecvAtMs: 1_800_000_000_041, NetworkCode: "SH", StationCode: "00002"},
		{Packet: &stationv1.Packet{StationId: "S3", Seq: 0, Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}}},
	}
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		wire = append(wire, b)
	}
	return msgs, wire
}

// TestPeek reads the fields the journal's readers look at as a full
// decoding does.
func TestPeek(t *testing.T) {
	t.Parallel()
	msgs, wire := records(t)
	for i, b := range wire {
		m := msgs[i]
		station, seq, ok := Peek(b)
		if !ok || station != m.GetPacket().GetStationId() || seq != m.GetPacket().GetSeq() {
			// proto3 leaves a zero seq out: Peek cannot tell it from none.
			if m.GetPacket().GetSeq() != 0 {
				t.Errorf("record %d: Peek = %q %d %v", i, station, seq, ok)
			}
		}
		if got := RecvAt(b); got != m.GetRecvAtMs() {
			t.Errorf("record %d: RecvAt = %d, want %d", i, got, m.GetRecvAtMs())
		}
		if got := Intensity(b); got != (m.GetPacket().GetIntensity() != nil) {
			t.Errorf("record %d: Intensity = %v", i, got)
		}
	}
	for _, junk := range [][]byte{nil, {0xff}, {0x0a, 0x05, 1}, {0x10}} {
		if _, _, ok := Peek(junk); ok || RecvAt(junk) != 0 || Intensity(junk) {
			t.Errorf("junk %x read as a record", junk)
		}
	}
}

// TestAppendBatchDecodesAsBoth: a batch framed around the journal's bytes
// is the IngestRequest of rts.v1 and of waveform.v1 that proto would have
// encoded from the decoded records.
func TestAppendBatchDecodesAsBoth(t *testing.T) {
	t.Parallel()
	msgs, wire := records(t)
	for _, c := range []struct {
		id       uint64
		recs     int
		caughtUp bool
	}{{1, 3, false}, {1 << 50, 1, true}, {2, 0, true}, {0, 2, false}} {
		b := AppendBatch([]byte("prefix"), c.id, wire[:c.recs], c.caughtUp)
		if string(b[:6]) != "prefix" || len(b)-6 != BatchSize(c.id, wire[:c.recs], c.caughtUp) {
			t.Fatalf("%+v: %d bytes appended, BatchSize %d", c, len(b)-6, BatchSize(c.id, wire[:c.recs], c.caughtUp))
		}
		var rts rtsv1.IngestRequest
		if err := proto.Unmarshal(b[6:], &rts); err != nil {
			t.Fatal(err)
		}
		if want := (&rtsv1.IngestRequest{BatchId: c.id, Records: msgs[:c.recs], CaughtUp: c.caughtUp}); !proto.Equal(&rts, want) {
			t.Errorf("%+v: as rts.v1: %v, want %v", c, &rts, want)
		}
		if c.caughtUp {
			continue // rts.v1's field only
		}
		var wf waveformv1.IngestRequest
		if err := proto.Unmarshal(b[6:], &wf); err != nil {
			t.Fatal(err)
		}
		if want := (&waveformv1.IngestRequest{BatchId: c.id, Records: msgs[:c.recs]}); !proto.Equal(&wf, want) {
			t.Errorf("%+v: as waveform.v1: %v, want %v", c, &wf, want)
		}
	}
}

// FuzzPeek: whatever the bytes, the readers answer without a crash, and
// what Peek reads of a record that decodes is what decoding gives.
func FuzzPeek(f *testing.F) {
	_, wire := records(f)
	for _, b := range wire {
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		station, seq, ok := Peek(b)
		at := RecvAt(b)
		intensity := Intensity(b)
		var m ingestv1.Record
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		// A field given twice: the decoder keeps the last, the readers
		// the first; such a record is not one ingest writes.
		if ok && (station != m.GetPacket().GetStationId() || seq != m.GetPacket().GetSeq()) {
			if again, _ := proto.Marshal(&m); string(again) == string(b) {
				t.Fatalf("Peek = %q %d, decoded %q %d", station, seq, m.GetPacket().GetStationId(), m.GetPacket().GetSeq())
			}
		}
		if at != m.GetRecvAtMs() || intensity != (m.GetPacket().GetIntensity() != nil) {
			if again, _ := proto.Marshal(&m); string(again) == string(b) {
				t.Fatalf("RecvAt %d Intensity %v, decoded %d %v", at, intensity, m.GetRecvAtMs(), m.GetPacket().GetIntensity() != nil)
			}
		}
	})
}

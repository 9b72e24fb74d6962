package waveform

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

func sensor(station string, first int64) *ingestv1.Record {
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{
		FirstSampleMs: first, RateHz: 50, ScaleGal: 0.001, Ns: []int32{1, 2}, Ew: []int32{3, 4}, Ud: []int32{5, 6},
	}}}}
}

// TestIngestToLive: chunks ingested over the batch stream reach the Live
// subscribers of their station, once each even when a batch is resent.
func TestIngestToLive(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv := newServer(make(chan struct{}), prometheus.NewRegistry())
	waveformv1.RegisterWaveformServiceServer(gs, srv)
	go gs.Serve(ln)
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := waveformv1.NewWaveformServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	empty, _ := client.Live(ctx, &waveformv1.LiveRequest{})
	if _, err := empty.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Live without stations: %v", err)
	}

	live, err := client.Live(ctx, &waveformv1.LiveRequest{StationIds: []string{"A"}})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Ingest only once the server holds the subscription.
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := srv.live.Stats(); n != 1; n, _ = srv.live.Stats() {
		if time.Now().After(deadline) {
			t.Fatal("subscription never registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	batch := &waveformv1.IngestRequest{BatchId: 1, Records: []*ingestv1.Record{sensor("A", 1000), sensor("B", 1000), sensor("A", 1500)}}
	for range 2 { // the second time as a resend after a reconnect
		if err := ing.Send(batch); err != nil {
			t.Fatal(err)
		}
		if ack, err := ing.Recv(); err != nil || ack.GetAckedBatchId() != 1 {
			t.Fatalf("ack %v %v", ack, err)
		}
	}
	for _, want := range []int64{1000, 1500} {
		r, err := live.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetChunk(); c.GetStationId() != "A" || c.GetFirstSampleMs() != want || len(c.GetUd()) != 2 {
			t.Fatalf("chunk %v, want A at %d", c, want)
		}
	}
	// Nothing else may follow: not B's chunk, not the resent ones.
	ing.Send(&waveformv1.IngestRequest{BatchId: 2, Records: []*ingestv1.Record{sensor("A", 2000)}})
	ing.Recv()
	r, err := live.Recv()
	if err != nil || r.GetChunk().GetFirstSampleMs() != 2000 {
		t.Fatalf("after the resend: %v %v", r, err)
	}
}

func TestLateChunksStillGoOut(t *testing.T) {
	t.Parallel()
	s := newServer(make(chan struct{}), prometheus.NewRegistry())
	for _, tc := range []struct {
		first int64
		want  bool
	}{{1500, true}, {1000, true}, {1500, false}, {2000, true}, {1000, false}, {0, false}} {
		if got := s.isNew("A", tc.first); got != tc.want {
			t.Errorf("chunk at %d: new %v, want %v", tc.first, got, tc.want)
		}
	}
}

package ingest

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/svc-ingest/internal/forward"
)

// ingestReceiver is svc-rts's and svc-waveform's Ingest endpoint, keeping
// what it receives.
type ingestReceiver struct {
	rtsv1.UnimplementedRTSServiceServer
	waveformv1.UnimplementedWaveformServiceServer
	rts      chan *rtsv1.IngestRequest
	waveform chan *waveformv1.IngestRequest
}

func (r *ingestReceiver) Ingest(stream rtsv1.RTSService_IngestServer) error {
	if err := stream.Send(&rtsv1.IngestResponse{ReplaySinceMs: 5}); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		r.rts <- req
		if err := stream.Send(&rtsv1.IngestResponse{AckedBatchId: req.GetBatchId()}); err != nil {
			return err
		}
	}
}

type waveformReceiver struct{ *ingestReceiver }

func (r waveformReceiver) Ingest(stream waveformv1.WaveformService_IngestServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		r.waveform <- req
		if err := stream.Send(&waveformv1.IngestResponse{AckedBatchId: req.GetBatchId()}); err != nil {
			return err
		}
	}
}

// TestStreamsSendJournalBytes: the forwarder's streams send the journal's
// records as they are, and svc-rts and svc-waveform decode the batches
// that proto would have encoded from the records, the caught-up mark
// included; the answers on the same streams decode as ever.
func TestStreamsSendJournalBytes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &ingestReceiver{rts: make(chan *rtsv1.IngestRequest, 4), waveform: make(chan *waveformv1.IngestRequest, 4)}
	srv := grpc.NewServer()
	rtsv1.RegisterRTSServiceServer(srv, r)
	waveformv1.RegisterWaveformServiceServer(srv, waveformReceiver{r})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	recs := []*ingestv1.Record{
		{Packet: &stationv1.Packet{StationId: "S1", Seq: 3, Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{Intensity: 1.5}}},
			RecvAtMs: 1_800_000_000_000, Site: "TNN-1"},
		{Packet: &stationv1.Packet{StationId: "S2", Seq: 9, Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{RateHz: 50, Ns: []int32{4, -5}}}},
			RecvAtMs: 1_800_000_000_001, Site: "TNN-1", NetworkCode: "SH"},
	}
	var wire [][]byte
	for _, m := range recs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		wire = append(wire, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	s, err := rtsOpener(conn)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rp := s.(forward.Replayer)
	if since, err := rp.Hello(); err != nil || since != 5 {
		t.Fatalf("hello: %d %v", since, err)
	}
	if err := rp.Send(1, wire); err != nil {
		t.Fatal(err)
	}
	if err := rp.SendCaughtUp(2, wire[1:]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*rtsv1.IngestRequest{{BatchId: 1, Records: recs}, {BatchId: 2, Records: recs[1:], CaughtUp: true}} {
		if got := <-r.rts; !proto.Equal(got, want) {
			t.Errorf("svc-rts received %v, want %v", got, want)
		}
		if acked, err := rp.Recv(); err != nil || acked != want.GetBatchId() {
			t.Errorf("ack %d %v, want %d", acked, err, want.GetBatchId())
		}
	}

	w, err := waveformOpener(conn)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(7, wire); err != nil {
		t.Fatal(err)
	}
	if got, want := <-r.waveform, (&waveformv1.IngestRequest{BatchId: 7, Records: recs}); !proto.Equal(got, want) {
		t.Errorf("svc-waveform received %v, want %v", got, want)
	}
	if acked, err := w.Recv(); err != nil || acked != 7 {
		t.Errorf("ack %d %v, want 7", acked, err)
	}
}

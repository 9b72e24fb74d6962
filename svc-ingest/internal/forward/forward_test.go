package forward

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
)

// receiver is a real gRPC RTSService.Ingest endpoint that records what it
// receives; gate, when set, holds acks back until it is closed.
type receiver struct {
	rtsv1.UnimplementedRTSServiceServer
	mu      sync.Mutex
	seqs    []uint64
	batches int
	gate    chan struct{}
}

func (r *receiver) Ingest(stream rtsv1.RTSService_IngestServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		for _, rec := range req.GetRecords() {
			r.seqs = append(r.seqs, rec.GetPacket().GetSeq())
		}
		r.batches++
		gate := r.gate
		r.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-stream.Context().Done():
				return nil
			}
		}
		if err := stream.Send(&rtsv1.IngestResponse{AckedBatchId: req.GetBatchId()}); err != nil {
			return err
		}
	}
}

func (r *receiver) distinct() map[uint64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[uint64]int{}
	for _, s := range r.seqs {
		m[s]++
	}
	return m
}

type rtsStream struct {
	s grpc.BidiStreamingClient[rtsv1.IngestRequest, rtsv1.IngestResponse]
}

func (r rtsStream) Send(id uint64, recs []*ingestv1.Record) error {
	return r.s.Send(&rtsv1.IngestRequest{BatchId: id, Records: recs})
}
func (r rtsStream) Recv() (uint64, error) {
	resp, err := r.s.Recv()
	return resp.GetAckedBatchId(), err
}
func (r rtsStream) CloseSend() error { return r.s.CloseSend() }

func serve(t *testing.T, addr string, r *receiver) (*grpc.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rtsv1.RegisterRTSServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return srv, ln.Addr().String()
}

func opener(t *testing.T, addr string) Opener {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func(ctx context.Context) (Stream, error) {
		s, err := rtsv1.NewRTSServiceClient(conn).Ingest(ctx)
		return rtsStream{s}, err
	}
}

func record(seq uint64) *ingestv1.Record {
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: "S1", Seq: seq}}
}

func newForwarder(t *testing.T, open Opener, opts Options) *Forwarder {
	return New("rts", open, opts, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeliversEverythingInOrder(t *testing.T) {
	t.Parallel()
	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	f := newForwarder(t, opener(t, addr), Options{Queue: 100_000, MaxBatch: 64, Window: 4, DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	const n = 20_000
	for seq := uint64(1); seq <= n; seq++ {
		for !f.Offer(record(seq)) {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(t, "all records", func() bool { return len(r.distinct()) == n })
	cancel()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.seqs {
		if s != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, s)
		}
	}
	if r.batches >= n {
		t.Fatalf("no batching: %d batches for %d records", r.batches, n)
	}
}

func TestReceiverRestartLosesNothing(t *testing.T) {
	t.Parallel()
	r1 := &receiver{gate: make(chan struct{})} // never acks
	srv1, addr := serve(t, "127.0.0.1:0", r1)
	f := newForwarder(t, opener(t, addr), Options{Queue: 1000, MaxBatch: 10, Window: 3, DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	for seq := uint64(1); seq <= 100; seq++ {
		if !f.Offer(record(seq)) {
			t.Fatalf("queue refused record %d", seq)
		}
	}
	waitFor(t, "window full", func() bool { _, in := f.Pending(); return in == 3 })
	srv1.Stop()

	r2 := &receiver{}
	serve(t, addr, r2)
	waitFor(t, "all records at the new receiver", func() bool { return len(r2.distinct()) == 100 })
	waitFor(t, "everything acked", func() bool { q, in := f.Pending(); return q == 0 && in == 0 })
}

func TestBackpressure(t *testing.T) {
	t.Parallel()
	r := &receiver{gate: make(chan struct{})}
	_, addr := serve(t, "127.0.0.1:0", r)
	f := newForwarder(t, opener(t, addr), Options{Queue: 50, MaxBatch: 10, Window: 2, DrainTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	accepted := 0
	for seq := uint64(1); seq <= 200; seq++ {
		if f.Offer(record(seq)) {
			accepted++
		}
		if seq%10 == 0 {
			waitFor(t, "batching", func() bool { q, in := f.Pending(); return in == 2 || q == 0 })
		}
	}
	if accepted >= 200 || accepted < 50 {
		t.Fatalf("accepted %d of 200 with room for 70", accepted)
	}
	close(r.gate) // receiver catches up
	waitFor(t, "accepted records delivered", func() bool { return len(r.distinct()) == accepted })
}

func TestDrainOnShutdown(t *testing.T) {
	t.Parallel()
	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	f := newForwarder(t, opener(t, addr), Options{Queue: 10_000, MaxBatch: 100, Window: 4, DrainTimeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	for seq := uint64(1); seq <= 5000; seq++ {
		f.Offer(record(seq))
	}
	cancel() // shut down before Run even starts: everything must still go out
	f.Run(ctx)
	if got := len(r.distinct()); got != 5000 {
		t.Fatalf("delivered %d of 5000", got)
	}
}

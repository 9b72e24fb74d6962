package forward

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/recordwire"
)

// receiver is a real gRPC RTSService.Ingest endpoint that records what it
// receives; gate, when set, holds acks back until it is closed. One that
// speaks first asks for the records since replaySince, as svc-rts does, and
// notes how many records it had when the replay was marked caught up.
type receiver struct {
	rtsv1.UnimplementedRTSServiceServer
	mu          sync.Mutex
	seqs        []uint64
	batches     int
	gate        chan struct{}
	speaksFirst bool
	replaySince int64
	caughtUpAt  []int
	// all, when set, is closed once expect records have come.
	all    chan struct{}
	expect int
}

// Ingest records every batch as it arrives and acks it once the gate (if
// any) is open.
func (r *receiver) Ingest(stream rtsv1.RTSService_IngestServer) error {
	if r.speaksFirst {
		if err := stream.Send(&rtsv1.IngestResponse{ReplaySinceMs: r.replaySince}); err != nil {
			return err
		}
	}
	acks := make(chan uint64, 1024)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for id := range acks {
			r.mu.Lock()
			gate := r.gate
			r.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-done:
					return
				}
			}
			if stream.Send(&rtsv1.IngestResponse{AckedBatchId: id}) != nil {
				return
			}
		}
	}()
	defer close(acks)
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
		if req.GetCaughtUp() {
			r.caughtUpAt = append(r.caughtUpAt, len(r.seqs))
		}
		if r.all != nil && len(r.seqs) >= r.expect {
			close(r.all)
			r.all = nil
		}
		r.mu.Unlock()
		acks <- req.GetBatchId()
	}
}

func (r *receiver) batchCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches
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

func (r rtsStream) Send(id uint64, recs [][]byte) error {
	return r.s.Send(&rtsv1.IngestRequest{BatchId: id, Records: decode(recs)})
}

// decode decodes journal records (svc-ingest sends them as they are).
func decode(recs [][]byte) []*ingestv1.Record {
	out := make([]*ingestv1.Record, len(recs))
	for i, b := range recs {
		out[i] = &ingestv1.Record{}
		if err := proto.Unmarshal(b, out[i]); err != nil {
			panic(err)
		}
	}
	return out
}
func (r rtsStream) Recv() (uint64, error) {
	resp, err := r.s.Recv()
	return resp.GetAckedBatchId(), err
}
func (r rtsStream) CloseSend() error { return r.s.CloseSend() }

type replayStream struct{ rtsStream }

func (r replayStream) Hello() (int64, error) {
	resp, err := r.s.Recv()
	return resp.GetReplaySinceMs(), err
}
func (r replayStream) SendCaughtUp(id uint64, recs [][]byte) error {
	return r.s.Send(&rtsv1.IngestRequest{BatchId: id, Records: decode(recs), CaughtUp: true})
}

func serve(t testing.TB, addr string, r *receiver) (*grpc.Server, string) {
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

// record is the record of seq, received at seq seconds.
func record(seq uint64) *ingestv1.Record {
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: "S1", Seq: seq}, RecvAtMs: int64(seq) * 1000}
}

func appendRecords(t *testing.T, j *journal.Journal, from, to uint64) {
	t.Helper()
	var batch [][]byte
	for seq := from; seq <= to; seq++ {
		b, _ := proto.Marshal(record(seq))
		batch = append(batch, b)
		if len(batch) == 100 || seq == to {
			if _, err := j.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
}

func openJournal(t *testing.T, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func newForwarder(t *testing.T, j *journal.Journal, open Opener, opts Options) *Forwarder {
	return New("rts", open, j, opts, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestDeliversEverythingInOrder(t *testing.T) {
	t.Parallel()
	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	j := openJournal(t, t.TempDir())
	defer j.Close()
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 64, Window: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	const n = 20_000
	appendRecords(t, j, 1, n)
	poll.Until(t, 10*time.Second, "all records", func() bool { return len(r.distinct()) == n })
	poll.Until(t, 10*time.Second, "cursor at the end", func() bool { return f.Lag() == 0 })
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
	// Every record sent is timed from its receipt (the test's are long
	// ago: all in the top bucket).
	var m dto.Metric
	if err := f.delay.(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	if h := m.GetHistogram(); h.GetSampleCount() != n || h.GetSampleSum() < float64(time.Now().Unix()-n)*n/2 {
		t.Errorf("forward delay: %d records observed, sum %.0f s; want %d, each from its receipt", h.GetSampleCount(), h.GetSampleSum(), n)
	}
}

// TestReceiverRestartLosesNothing: a receiver that never acks is replaced;
// the new one gets everything, starting from the last acked batch.
func TestReceiverRestartLosesNothing(t *testing.T) {
	t.Parallel()
	r1 := &receiver{gate: make(chan struct{})} // never acks
	srv1, addr := serve(t, "127.0.0.1:0", r1)
	j := openJournal(t, t.TempDir())
	defer j.Close()
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 10, Window: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	appendRecords(t, j, 1, 100)
	poll.Until(t, 10*time.Second, "window full", func() bool { return r1.batchCount() == 3 })
	if f.Lag() != 100 {
		t.Fatalf("lag %d with nothing acked", f.Lag())
	}
	srv1.Stop()

	r2 := &receiver{}
	serve(t, addr, r2)
	poll.Until(t, 10*time.Second, "all records at the new receiver", func() bool { return len(r2.distinct()) == 100 })
	poll.Until(t, 10*time.Second, "everything acked", func() bool { return f.Lag() == 0 })
}

// TestSlowReceiverBuffersOnDisk: while the receiver does not ack, records
// keep being accepted into the journal and wait there; none is dropped.
func TestSlowReceiverBuffersOnDisk(t *testing.T) {
	t.Parallel()
	r := &receiver{gate: make(chan struct{})}
	_, addr := serve(t, "127.0.0.1:0", r)
	j := openJournal(t, t.TempDir())
	defer j.Close()
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 10, Window: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	appendRecords(t, j, 1, 5000)
	poll.Until(t, 10*time.Second, "window full", func() bool { return r.batchCount() == 2 })
	if got := len(r.distinct()); got != 20 {
		t.Fatalf("receiver got %d records beyond its window", got)
	}
	close(r.gate) // it catches up
	poll.Until(t, 10*time.Second, "all delivered", func() bool { return len(r.distinct()) == 5000 })
}

// TestForwarderRestartResumes: a new forwarder on the same journal (an
// ingest restart) continues from the saved cursor.
func TestForwarderRestartResumes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	j := openJournal(t, dir)
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 50, Window: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	appendRecords(t, j, 1, 1000)
	poll.Until(t, 10*time.Second, "first thousand", func() bool { return f.Lag() == 0 })
	cancel()
	<-done
	j.Close()

	j = openJournal(t, dir)
	defer j.Close()
	appendRecords(t, j, 1001, 2000)
	before := r.batchCount()
	f = newForwarder(t, j, opener(t, addr), Options{MaxBatch: 50, Window: 4})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	poll.Until(t, 10*time.Second, "the second thousand", func() bool { return len(r.distinct()) == 2000 })
	if sent := r.batchCount() - before; sent > 1000/50+2 {
		t.Fatalf("resent from the start: %d batches for 1000 new records", sent)
	}
}

func TestWantFilters(t *testing.T) {
	t.Parallel()
	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	j := openJournal(t, t.TempDir())
	defer j.Close()
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 7, Window: 4,
		Want: func(b []byte) bool { _, seq, _ := recordwire.Peek(b); return seq%2 == 0 }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	appendRecords(t, j, 1, 100)
	poll.Until(t, 10*time.Second, "even records", func() bool { return len(r.distinct()) == 50 })
	poll.Until(t, 10*time.Second, "cursor past the odd ones too", func() bool { return f.Lag() == 0 })
	for s := range r.distinct() {
		if s%2 != 0 {
			t.Fatalf("odd record %d forwarded", s)
		}
	}
}

// TestPassesOverLostRecords: records lost to damage on disk do not stop
// the forwarder, and are not sent as empty records: the receiver gets
// every other record and the cursor reaches the end.
func TestPassesOverLostRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	j, err := journal.Open(dir, journal.Options{SegmentBytes: 4096, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	appendRecords(t, j, 1, 2000)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 5 {
		t.Fatalf("%d segments", len(segs))
	}
	b, _ := os.ReadFile(segs[1])
	clear(b[1000:1100])
	if err := os.WriteFile(segs[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	j, err = journal.Open(dir, journal.Options{SegmentBytes: 4096, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	r := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", r)
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 64, Window: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	poll.Until(t, 10*time.Second, "cursor at the end", func() bool { return f.Lag() == 0 && j.Lost() > 0 })
	got := r.distinct()
	if _, ok := got[0]; ok {
		t.Fatal("a lost record was sent as an empty one")
	}
	if uint64(len(got)) != 2000-j.Lost() {
		t.Fatalf("received %d records, want the 2,000 but the %d lost", len(got), j.Lost())
	}
}

// TestReplayAskedFor: a receiver that speaks first and asks for the records
// received since a time gets them again, from the first one received at or
// after it, then the rest; the batch by which everything received before
// the stream began has been sent is marked; the saved cursor never moves
// back; and a new stream to a receiver that asks for nothing starts at the
// cursor.
func TestReplayAskedFor(t *testing.T) {
	t.Parallel()
	j := openJournal(t, t.TempDir())
	defer j.Close()
	plain := &receiver{}
	_, addr := serve(t, "127.0.0.1:0", plain)
	f := newForwarder(t, j, opener(t, addr), Options{MaxBatch: 8, Window: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	appendRecords(t, j, 1, 100)
	poll.Until(t, 10*time.Second, "the first hundred", func() bool { return f.Lag() == 0 })
	cancel()
	<-done

	// A restarted receiver asks for the records since 60 s (seq 60 on).
	r := &receiver{speaksFirst: true, replaySince: 60_000, gate: make(chan struct{})}
	_, addr = serve(t, "127.0.0.1:0", r)
	open := func(ctx context.Context) (Stream, error) {
		s, err := opener(t, addr)(ctx)
		return replayStream{s.(rtsStream)}, err
	}
	f = newForwarder(t, j, open, Options{MaxBatch: 8, Window: 4})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	poll.Until(t, 10*time.Second, "window full of replayed records", func() bool { return r.batchCount() == 4 })
	if c := j.Cursor("rts"); c != 100 {
		t.Fatalf("cursor %d while replaying, want it kept at 100", c)
	}
	// Records received while the replay is sent belong to it: caught up
	// is marked once they are sent too.
	appendRecords(t, j, 101, 105)
	close(r.gate)
	poll.Until(t, 10*time.Second, "the replay", func() bool { return len(r.distinct()) == 46 })
	appendRecords(t, j, 106, 110)
	poll.Until(t, 10*time.Second, "the new records", func() bool { return len(r.distinct()) == 51 })
	r.mu.Lock()
	for i, s := range r.seqs {
		if s != uint64(60+i) {
			r.mu.Unlock()
			t.Fatalf("record %d has seq %d, want %d", i, s, 60+i)
		}
	}
	if len(r.caughtUpAt) != 1 || r.caughtUpAt[0] != 46 {
		r.mu.Unlock()
		t.Fatalf("caught up marked after %v records, want once after the 46 received before it reached the journal's end", r.caughtUpAt)
	}
	r.mu.Unlock()
	poll.Until(t, 10*time.Second, "cursor at the end", func() bool { return f.Lag() == 0 })

	// Asked for nothing, the next stream starts at the cursor.
	r.mu.Lock()
	r.replaySince, r.seqs = 0, nil
	r.mu.Unlock()
	cancel()
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	f = newForwarder(t, j, open, Options{MaxBatch: 8, Window: 4})
	go f.Run(ctx)
	appendRecords(t, j, 111, 115)
	poll.Until(t, 10*time.Second, "the five new records", func() bool { return len(r.distinct()) == 5 })
	if d := r.distinct(); d[110] != 0 || d[111] != 1 {
		t.Fatalf("second stream received %v", d)
	}
}

// TestReplayBeforeTheJournal: asked for records older than any kept, the
// forwarder sends from the oldest; asked for a time after the newest, it
// sends nothing again and marks the first batch caught up.
func TestReplayBeforeTheJournal(t *testing.T) {
	t.Parallel()
	j := openJournal(t, t.TempDir())
	defer j.Close()
	appendRecords(t, j, 1, 20)
	j.SetCursor("rts", 20)
	f := newForwarder(t, j, nil, Options{})
	for _, c := range []struct {
		since int64
		want  uint64
	}{{1, 0}, {-5, 0}, {1000, 0}, {1001, 1}, {20_000, 19}, {20_001, 20}, {1 << 50, 20}} {
		if got, err := f.indexAt(c.since); err != nil || got != c.want {
			t.Errorf("indexAt(%d) = %d, %v; want %d", c.since, got, err, c.want)
		}
	}
}

// rawStream sends journal records as they are, as svc-ingest's streams do.
type rawStream struct{ rtsStream }

func (r rawStream) Send(id uint64, recs [][]byte) error { return SendBatch(r.s, id, recs, false) }

// BenchmarkForward streams 100,000 station sensor records (three axes of 25
// samples, half a second at 50 Hz) from a journal to a gRPC receiver that
// decodes them, as svc-waveform does, until the receiver has them all:
// sent as they lie in the journal, and, the baseline in the same run,
// decoded and encoded again by the forwarder, as before.
func BenchmarkForward(b *testing.B) {
	const records = 100_000
	var payloads [][]byte
	for seq := range uint64(records) {
		samples := make([]int32, 25)
		for i := range samples {
			samples[i] = int32(seq) * int32(i+1) % 4000
		}
		p, err := proto.Marshal(&ingestv1.Record{Packet: &stationv1.Packet{StationId: fmt.Sprintf("SH.%05d", seq%1000), Seq: seq, SentAtMs: 1_800_000_000_000,
			Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{FirstSampleMs: 1_800_000_000_000, RateHz: 50, ScaleGal: 0.01, Ns: samples, Ew: samples, Ud: samples}}},
			RecvAtMs: 1_800_000_000_010, Site: "TNN-1", NetworkCode: "SH", StationCode: fmt.Sprintf("%05d", seq%1000), LocationCode: "00"})
		if err != nil {
			b.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	for _, c := range []struct {
		name string
		wrap func(s grpc.BidiStreamingClient[rtsv1.IngestRequest, rtsv1.IngestResponse]) Stream
		opts []grpc.CallOption
	}{
		{"as-is", func(s grpc.BidiStreamingClient[rtsv1.IngestRequest, rtsv1.IngestResponse]) Stream {
			return rawStream{rtsStream{s}}
		}, []grpc.CallOption{PassThrough()}},
		{"decode-encode", func(s grpc.BidiStreamingClient[rtsv1.IngestRequest, rtsv1.IngestResponse]) Stream {
			return rtsStream{s}
		}, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				all := make(chan struct{})
				r := &receiver{all: all, expect: records}
				srv, addr := serve(b, "127.0.0.1:0", r)
				conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				j, err := journal.Open(b.TempDir(), journal.Options{})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < records; i += 1000 {
					if _, err := j.Append(context.Background(), payloads[i:i+1000]...); err != nil {
						b.Fatal(err)
					}
				}
				f := New("waveform", func(ctx context.Context) (Stream, error) {
					s, err := rtsv1.NewRTSServiceClient(conn).Ingest(ctx, c.opts...)
					return c.wrap(s), err
				}, j, Options{MaxBatch: 512, Window: 64}, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				b.StartTimer()
				go func() { defer close(done); f.Run(ctx) }()
				<-all
				b.StopTimer()
				cancel()
				<-done
				if n := len(r.distinct()); n != records {
					b.Fatalf("received %d records", n)
				}
				j.Close()
				conn.Close()
				srv.Stop()
			}
			b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

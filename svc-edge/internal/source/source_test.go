package source

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// core is a real RTSService endpoint whose Subscribe streams what the test
// feeds it.
type core struct {
	rtsv1.UnimplementedRTSServiceServer
	feed chan *rtsv1.Snapshot
	srv  *grpc.Server
	addr string

	mu      sync.Mutex
	archive map[int64]*rtsv1.Snapshot // what GetSnapshot finds
}

func (c *core) GetSnapshot(_ context.Context, r *rtsv1.GetSnapshotRequest) (*rtsv1.GetSnapshotResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.archive[r.GetTimeMs()]; ok {
		return &rtsv1.GetSnapshotResponse{Snapshot: s}, nil
	}
	return nil, status.Error(codes.NotFound, "no such tick")
}

func (c *core) Subscribe(_ *rtsv1.SubscribeRequest, stream rtsv1.RTSService_SubscribeServer) error {
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case s := <-c.feed:
			if err := stream.Send(&rtsv1.SubscribeResponse{Snapshot: s}); err != nil {
				return err
			}
		}
	}
}

func startCore(t *testing.T) *core {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &core{feed: make(chan *rtsv1.Snapshot), srv: grpc.NewServer(), addr: ln.Addr().String()}
	rtsv1.RegisterRTSServiceServer(c.srv, c)
	go c.srv.Serve(ln)
	t.Cleanup(c.srv.Stop)
	return c
}

type served struct {
	mu    sync.Mutex
	ticks []string
	ch    chan struct{}
}

func (s *served) add(snap *rtsv1.Snapshot) {
	s.mu.Lock()
	s.ticks = append(s.ticks, snap.GetSite()+"@"+time.UnixMilli(snap.GetTimeMs()).UTC().Format("05.000"))
	s.mu.Unlock()
	s.ch <- struct{}{}
}

func (s *served) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ticks...)
}

func snap(site string, ms int64) *rtsv1.Snapshot { return &rtsv1.Snapshot{Site: site, TimeMs: ms} }

func TestOneSourceDedupAndFailover(t *testing.T) {
	t.Parallel()
	a, b := startCore(t), startCore(t)
	var conns []*grpc.ClientConn
	for _, c := range []*core{a, b} {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	out := &served{ch: make(chan struct{}, 16)}
	sel := New("TPE-1", []string{a.addr, b.addr}, conns, out.add, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Unix(1000, 0)
	var clock sync.Mutex
	sel.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sel.Run(ctx)

	expect := func(want string) {
		t.Helper()
		select {
		case <-out.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing served; want %s; served %v", want, out.list())
		}
		if got := out.list(); got[len(got)-1] != want {
			t.Fatalf("served %v, want last %s", got, want)
		}
	}
	a.feed <- snap("A", 500)
	expect("A@00.500")
	// B's copy of the same tick, and an older one, are not served; B's
	// newer tick is not served either while A is fresh.
	b.feed <- snap("B", 500)
	b.feed <- snap("B", 0)
	b.feed <- snap("B", 1000)
	a.feed <- snap("A", 1000)
	expect("A@01.000")

	// A goes quiet; after 1.5 ticks B's next tick takes over.
	advance(800 * time.Millisecond)
	b.feed <- snap("B", 1500)
	expect("B@01.500")
	// A comes back with the same tick: not served again; B stays.
	a.feed <- snap("A", 1500)
	b.feed <- snap("B", 2000)
	expect("B@02.000")
	if got := out.list(); len(got) != 4 {
		t.Fatalf("served %v", got)
	}
	// A's last tick may still be on its way through the stream.
	deadline := time.Now().Add(5 * time.Second)
	for st := sel.Status(); !st[1].Serving || st[0].Serving || st[0].Snapshots != 3 || st[1].Snapshots != 5; st = sel.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := sel.Status(); st[0].Site != "A" || st[1].Site != "B" {
		t.Fatalf("sites %q %q, want the ones the snapshots name", st[0].Site, st[1].Site)
	}

	// B's server dies: A takes over at its next tick without waiting.
	b.srv.Stop()
	deadline = time.Now().Add(5 * time.Second)
	for sel.Status()[1].Connected {
		if time.Now().After(deadline) {
			t.Fatal("B still connected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.feed <- snap("A", 2500)
	expect("A@02.500")
}

// TestFillFromArchives: an edge that starts (or restarts after a crash)
// gets the span before its first live tick from the archives, so clients
// resuming with Last-Event-ID find their ticks; a gap in the live stream
// is filled the same way, from the other core for a tick the serving core
// lacks; ticks no core has stay missing, and nothing is served twice or
// out of order.
func TestFillFromArchives(t *testing.T) {
	t.Parallel()
	a, b := startCore(t), startCore(t)
	a.archive, b.archive = map[int64]*rtsv1.Snapshot{}, map[int64]*rtsv1.Snapshot{}
	for ms := int64(1000); ms <= 20000; ms += 500 {
		if ms != 13000 {
			a.archive[ms] = snap("A", ms)
		}
		if ms != 4000 {
			b.archive[ms] = snap("B", ms)
		}
	}
	delete(a.archive, 4000) // at neither core
	b.archive[13000] = snap("B", 13000)
	var conns []*grpc.ClientConn
	for _, c := range []*core{a, b} {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	out := &served{ch: make(chan struct{}, 64)}
	sel := New("TPE-1", []string{a.addr, b.addr}, conns, out.add, slog.New(slog.NewTextHandler(io.Discard, nil)))
	sel.Fill = 3 * time.Second
	var filled []int
	sel.OnFill = func(n int) { filled = append(filled, n) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sel.Run(ctx)

	wait := func(n int) []string {
		t.Helper()
		for range n {
			select {
			case <-out.ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("served %v, want %d more", out.list(), n)
			}
		}
		return out.list()
	}
	// The first live tick, 6000: the 3 s before it come first (4000 at
	// neither core).
	a.feed <- snap("A", 6000)
	want := []string{"A@03.000", "A@03.500", "A@04.500", "A@05.000", "A@05.500", "A@06.000"}
	if got := wait(len(want)); !slices.Equal(got, want) {
		t.Fatalf("first served %v, want %v", got, want)
	}
	// A gap longer than Fill: only its last 3 s are filled.
	a.feed <- snap("A", 12000)
	if got := wait(7); got[6] != "A@09.000" || got[len(got)-1] != "A@12.000" {
		t.Fatalf("after a long gap %v", got)
	}
	// A gap from 12000 to 14000: 12500–13500 filled, 13000 from B.
	a.feed <- snap("A", 14000)
	got := wait(4)
	if tail := got[len(got)-4:]; !slices.Equal(tail, []string{"A@12.500", "B@13.000", "A@13.500", "A@14.000"}) {
		t.Fatalf("after the gap %v", tail)
	}
	if !slices.Equal(filled, []int{5, 6, 3}) {
		t.Fatalf("fills %v", filled)
	}
}

package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/poll"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// core is a real RTSService endpoint whose Subscribe streams what the test
// feeds it.
type core struct {
	rtsv1.UnimplementedRTSServiceServer
	feed chan *rtsv1.Snapshot
	// traced streams whole responses, with their trace context.
	traced chan *rtsv1.SubscribeResponse
	srv    *grpc.Server
	addr   string

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
		case r := <-c.traced:
			if err := stream.Send(r); err != nil {
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
	c := &core{feed: make(chan *rtsv1.Snapshot), traced: make(chan *rtsv1.SubscribeResponse), srv: grpc.NewServer(), addr: ln.Addr().String()}
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

// pair is a selector over two test cores on a clock the test moves.
type pair struct {
	a, b  *core
	sel   *Selector
	out   *served
	clock sync.Mutex
	now   time.Time
	conns []*grpc.ClientConn
}

// startPair starts two cores and a selector over them; setup, if given,
// sees them before the selector runs.
func startPair(t *testing.T, setup func(*pair)) *pair {
	t.Helper()
	p := &pair{a: startCore(t), b: startCore(t), now: time.Unix(1000, 0), out: &served{ch: make(chan struct{}, 64)}}
	for _, c := range []*core{p.a, p.b} {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		p.conns = append(p.conns, conn)
	}
	p.sel = New("TPE-1", []string{p.a.addr, p.b.addr}, p.conns, p.out.add, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.sel.now = func() time.Time { p.clock.Lock(); defer p.clock.Unlock(); return p.now }
	if setup != nil {
		setup(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.sel.Run(ctx)
	return p
}

func (p *pair) advance(d time.Duration) { p.clock.Lock(); p.now = p.now.Add(d); p.clock.Unlock() }

// expect waits for the next served tick and checks it is want.
func (p *pair) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case <-p.out.ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing served; want %s; served %v", want, p.out.list())
	}
	if got := p.out.list(); got[len(got)-1] != want {
		t.Fatalf("served %v, want last %s", got, want)
	}
}

func TestOneSourceDedupAndFailover(t *testing.T) {
	t.Parallel()
	p := startPair(t, nil)
	a, b, sel := p.a, p.b, p.sel
	expect := func(want string) { t.Helper(); p.expect(t, want) }
	advance := p.advance
	out := p.out

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
	st := sel.Status()
	if !poll.Within(5*time.Second, func() bool {
		st = sel.Status()
		return st[1].Serving && !st[0].Serving && st[0].Snapshots == 3 && st[1].Snapshots == 5
	}) {
		t.Fatalf("status %+v", st)
	}
	if st := sel.Status(); st[0].Site != "A" || st[1].Site != "B" {
		t.Fatalf("sites %q %q, want the ones the snapshots name", st[0].Site, st[1].Site)
	}

	// B's server dies: A takes over at its next tick without waiting.
	b.srv.Stop()
	poll.Until(t, 5*time.Second, "B disconnected", func() bool { return !sel.Status()[1].Connected })
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
	var filled []int
	p := startPair(t, func(p *pair) {
		a, b := p.a, p.b
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
		p.sel.Fill = 3 * time.Second
		p.sel.OnFill = func(n int) { filled = append(filled, n) }
	})
	a, out := p.a, p.out

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

// seeing returns a tick of site that sees n stations.
func seeing(site string, ms int64, n int) *rtsv1.Snapshot {
	s := snap(site, ms)
	for k := range n {
		s.Stations = append(s.Stations, &rtsv1.StationState{StationId: string(rune('a' + k))})
	}
	return s
}

// TestBlindCoreWaits: a core that sees far fewer stations (its uplink is
// cut) does not replace a serving core that is only late; it does when the
// serving core stays silent, and a serving core that goes blind while the
// other sees the stations is replaced although it keeps delivering.
func TestBlindCoreWaits(t *testing.T) {
	t.Parallel()
	p := startPair(t, nil)
	a, b, sel := p.a, p.b, p.sel
	expect := func(want string) { t.Helper(); p.expect(t, want) }
	advance := p.advance
	// settle feeds core k a tick and waits until the selector has judged
	// it: a core's ticks are counted just before they are offered, in the
	// same goroutine, so the next count means this one was offered.
	settle := func(k int, s *rtsv1.Snapshot) {
		t.Helper()
		c := []*core{a, b}[k]
		n := sel.Status()[k].Snapshots
		c.feed <- s
		c.feed <- seeing(s.GetSite(), 0, 0) // older than anything: never served
		poll.Until(t, 5*time.Second, fmt.Sprintf("core %d's tick received", k), func() bool { return sel.Status()[k].Snapshots >= n+2 })
	}

	a.feed <- seeing("A", 500, 10)
	expect("A@00.500")
	settle(1, seeing("B", 500, 0))
	// A is late by more than 1.5 ticks: blind B's tick is not served …
	advance(800 * time.Millisecond)
	settle(1, seeing("B", 1000, 0))
	settle(1, seeing("B", 1500, 0))
	// … and A's late tick is.
	a.feed <- seeing("A", 1000, 10)
	expect("A@01.000")
	// A goes silent for longer than blindAfter: B takes over.
	advance(blindAfter + 100*time.Millisecond)
	b.feed <- seeing("B", 2000, 0)
	expect("B@02.000")
	if got := p.out.list(); len(got) != 3 {
		t.Fatalf("served %v", got)
	}

	// A comes back seeing the stations while B keeps delivering the values
	// it carries from before it went blind: after richerTicks ticks in a
	// row, A serves.
	ms := int64(2500)
	for range richerTicks {
		stale := seeing("B", ms, 10)
		for _, st := range stale.Stations {
			st.AgeMs = 1500
		}
		b.feed <- stale
		expect("B@" + time.UnixMilli(ms).UTC().Format("05.000"))
		a.feed <- seeing("A", ms, 10)
		ms += 500
	}
	a.feed <- seeing("A", ms, 10)
	expect("A@" + time.UnixMilli(ms).UTC().Format("05.000"))
	b.feed <- seeing("B", ms+500, 0)
	a.feed <- seeing("A", ms+500, 10)
	expect("A@" + time.UnixMilli(ms+500).UTC().Format("05.000"))
}

// TestHedgeLateTick: when the serving core is late with the next tick and
// the other core delivered it seeing as many stations, the other's copy is
// served after Hedge, the serving core's late copy is not served again,
// and it goes on serving; a core seeing fewer stations does not stand in.
func TestHedgeLateTick(t *testing.T) {
	t.Parallel()
	var hedged atomic.Int32
	p := startPair(t, func(p *pair) {
		p.sel.Hedge = 50 * time.Millisecond
		p.sel.OnHedge = func() { hedged.Add(1) }
	})
	a, b := p.a, p.b
	a.feed <- seeing("A", 500, 10)
	p.expect(t, "A@00.500")
	b.feed <- seeing("B", 1000, 10)
	p.expect(t, "B@01.000")
	a.feed <- seeing("A", 1000, 10) // late: not served again
	a.feed <- seeing("A", 1500, 10)
	p.expect(t, "A@01.500")
	// B sees fewer stations: its tick waits for A's, however late.
	b.feed <- seeing("B", 2000, 8)
	//nolint:forbidigo // longer than Hedge: B's tick must still not be served
	time.Sleep(200 * time.Millisecond)
	a.feed <- seeing("A", 2000, 10)
	p.expect(t, "A@02.000")
	if got := p.out.list(); len(got) != 4 || hedged.Load() != 1 {
		t.Fatalf("served %v, %d hedged", got, hedged.Load())
	}
}

// Package source feeds an edge with RTS snapshots from the cores. Each core
// is subscribed to at once; one of them is served at a time and the others
// stand by, so clients see one consistent stream. Snapshots are
// deduplicated by tick: the stream never repeats or goes back in time. When
// the serving core stops delivering, the next snapshot from another core
// takes over, so losing a core costs at most about one tick.
//
// Ticks the stream would skip are fetched from the cores' archives first
// (Selector.Fill): at the first snapshot, the span before it — an edge that
// has just started, or restarted after a crash, then holds the history its
// clients resume from with Last-Event-ID — and after a gap, the ticks of
// the gap, so a client never misses one that a core computed.
package source

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// staleAfter: a serving core silent this long is replaced by the first
// other core with a newer tick (1.5 ticks).
const staleAfter = 750 * time.Millisecond

// Core is one subscribed core.
type Core struct {
	Target string
	client rtsv1.RTSServiceClient

	mu        sync.Mutex
	connected bool
	snapshots uint64
	lastAt    time.Time
	site      string // as its snapshots name it
}

// Status is a core's subscription state.
type Status struct {
	Target    string
	Site      string // the core's site, once a snapshot named it
	Connected bool
	Serving   bool
	Snapshots uint64
}

// tickMs is the RTS tick.
const tickMs = 500

// fillTimeout bounds one fill: the stream waits for it.
const fillTimeout = 10 * time.Second

// Selector subscribes to every core and serves one.
type Selector struct {
	// Fill is how far back, at most, ticks missing before a snapshot are
	// fetched from the archives (0: never); set before Run.
	Fill time.Duration
	// OnFill, if set, learns how many ticks each fill served.
	OnFill func(n int)

	cores   []*Core
	serve   func(*rtsv1.Snapshot)
	name    string
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	current int // index of the serving core, -1 before the first snapshot
	last    int64
}

// New returns a selector over conns (one per core, in order of preference);
// serve receives each snapshot to publish, in tick order, from one
// goroutine at a time.
func New(name string, targets []string, conns []*grpc.ClientConn, serve func(*rtsv1.Snapshot), log *slog.Logger) *Selector {
	s := &Selector{serve: serve, name: name, log: log, now: time.Now, current: -1}
	for i, conn := range conns {
		s.cores = append(s.cores, &Core{Target: targets[i], client: rtsv1.NewRTSServiceClient(conn)})
	}
	return s
}

// Run keeps a subscription to every core until ctx ends.
func (s *Selector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := range s.cores {
		wg.Go(func() { s.follow(ctx, i) })
	}
	wg.Wait()
	return nil
}

func (s *Selector) follow(ctx context.Context, i int) {
	c := s.cores[i]
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := c.client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: s.name})
		if err == nil {
			c.setConnected(true)
			for {
				resp, err := stream.Recv()
				if err != nil {
					if ctx.Err() == nil {
						s.log.Warn("core subscription ended", slog.String("core", c.Target), slog.Any("error", err))
					}
					break
				}
				backoff = 100 * time.Millisecond
				c.received(s.now(), resp.GetSnapshot().GetSite())
				s.offer(ctx, i, resp.GetSnapshot())
			}
			c.setConnected(false)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *Selector) offer(ctx context.Context, i int, snap *rtsv1.Snapshot) {
	if snap == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap.GetTimeMs() <= s.last {
		return
	}
	if i != s.current {
		if s.current >= 0 && !s.cores[s.current].stale(s.now()) {
			return
		}
		s.log.Info("serving core", slog.String("core", s.cores[i].Target), slog.Int64("tick", snap.GetTimeMs()))
		s.current = i
	}
	s.fill(ctx, i, snap.GetTimeMs())
	s.last = snap.GetTimeMs()
	s.serve(snap)
}

// fill serves the ticks missing before tick t — since the last served, or
// the Fill span at the first — from the archive of core i, or of another
// core for a tick it lacks. s.mu is held: the stream waits, so every tick
// goes out in order.
func (s *Selector) fill(ctx context.Context, i int, t int64) {
	if s.Fill <= 0 {
		return
	}
	from := t - s.Fill.Milliseconds()/tickMs*tickMs
	if s.last > 0 {
		from = max(from, s.last+tickMs)
	}
	if from >= t {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, fillTimeout)
	defer cancel()
	want := make([]int64, 0, (t-from)/tickMs)
	for tick := from; tick < t; tick += tickMs {
		want = append(want, tick)
	}
	got := make([]*rtsv1.Snapshot, len(want))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(8, len(want)) {
		wg.Go(func() {
			for k := range next {
				got[k] = s.archived(ctx, i, want[k])
			}
		})
	}
	for k := range want {
		next <- k
	}
	close(next)
	wg.Wait()
	n := 0
	for _, snap := range got {
		if snap != nil && snap.GetTimeMs() > s.last && snap.GetTimeMs() < t {
			s.last = snap.GetTimeMs()
			s.serve(snap)
			n++
		}
	}
	if n > 0 {
		s.log.Info("ticks filled from the archives", slog.Int("ticks", n), slog.Int64("from", from), slog.Int64("before", t))
	}
	if s.OnFill != nil {
		s.OnFill(n)
	}
}

// archived fetches tick t from core i's archive, or from another core's;
// nil if no core has it.
func (s *Selector) archived(ctx context.Context, i int, t int64) *rtsv1.Snapshot {
	order := append([]int{i}, slices.DeleteFunc(rangeN(len(s.cores)), func(k int) bool { return k == i })...)
	for _, k := range order {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := s.cores[k].client.GetSnapshot(cctx, &rtsv1.GetSnapshotRequest{TimeMs: t})
		cancel()
		if err == nil && resp.GetSnapshot().GetTimeMs() == t {
			return resp.GetSnapshot()
		}
		if err != nil && status.Code(err) != codes.NotFound && ctx.Err() == nil {
			s.log.Debug("archive read failed", slog.String("core", s.cores[k].Target), slog.Int64("tick", t), slog.Any("error", err))
		}
	}
	return nil
}

func rangeN(n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = k
	}
	return out
}

// Status reports every core.
func (s *Selector) Status() []Status {
	s.mu.Lock()
	current := s.current
	s.mu.Unlock()
	out := make([]Status, len(s.cores))
	for i, c := range s.cores {
		c.mu.Lock()
		out[i] = Status{Target: c.Target, Site: c.site, Connected: c.connected, Serving: i == current, Snapshots: c.snapshots}
		c.mu.Unlock()
	}
	return out
}

func (c *Core) setConnected(v bool) {
	c.mu.Lock()
	c.connected = v
	c.mu.Unlock()
}

func (c *Core) received(at time.Time, site string) {
	c.mu.Lock()
	c.snapshots++
	c.lastAt = at
	c.site = site
	c.mu.Unlock()
}

func (c *Core) stale(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.connected || now.Sub(c.lastAt) > staleAfter
}

// Package source feeds an edge with RTS snapshots from the cores. Each core
// is subscribed to at once; one of them is served at a time and the others
// stand by, so clients see one consistent stream. Snapshots are
// deduplicated by tick: the stream never repeats or goes back in time. When
// the serving core stops delivering, the next snapshot from another core
// takes over, so losing a core costs at most about one tick — unless that
// core sees far fewer stations (its uplink is cut, or it is partitioned
// from the stations): then the serving core is given longer to answer,
// since a late tick with the stations is worth more than a prompt one
// without them. A serving core that goes blind while another sees the
// stations is replaced even though it keeps delivering.
//
// A tick the serving core is late with, past Selector.Hedge, is taken from
// another core that delivered it and sees (nearly) as many stations,
// without switching: over a lossy path one lost segment of the serving
// core's stream waits for TCP's retransmission, 200 ms at least, which
// the other core's path need not share.
//
// Ticks the stream would skip are fetched from the cores' archives first
// (Selector.Fill): at the first snapshot, the span before it — an edge that
// has just started, or restarted after a crash, then holds the history its
// clients resume from with Last-Event-ID — and after a gap, the ticks of
// the gap, so a client never misses one that a core computed.
//
// A snapshot that comes with a trace context (its tick held a traced
// station packet) is handled under a span of that trace, so the packet's
// trace reaches the edge; the span records whether the edge served that
// core's copy of the tick.
package source

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/telemetry"
)

// staleAfter: a serving core silent this long is replaced by the first
// other core with a newer tick (1.5 ticks).
const staleAfter = 750 * time.Millisecond

// blindAfter: how long a serving core may be silent before a core that
// sees fewer than half as many stations replaces it. The ticks in between
// come from the archives when it does (Selector.Fill). With the next tick's
// 500 ms it stays under the 2 s a client following the client rules waits
// before it reconnects (SPEC §7): a blind tick then, rather than none.
const blindAfter = 1250 * time.Millisecond

// richerTicks: how many ticks in a row another core must see more than
// twice the stations of a serving core that still delivers before it
// replaces it, so the stream does not flap while an uplink recovers.
const richerTicks = 2

// freshAge: a station counts as seen by a core when its values are at most
// this old (its frame in time, or one tick late); a core cut off from the
// stations carries their last values for 3 s before it drops them, and
// those do not count.
const freshAge = 1000

// seen is how many stations snap sees.
func seen(snap *rtsv1.Snapshot) int {
	n := 0
	for _, st := range snap.GetStations() {
		if st.GetAgeMs() < freshAge {
			n++
		}
	}
	return n
}

// Core is one subscribed core.
type Core struct {
	Target string
	client rtsv1.RTSServiceClient

	mu        sync.Mutex
	connected bool
	snapshots uint64
	lastAt    time.Time
	site      string // as its snapshots name it
	stations  int    // seen in its latest snapshot

	// richer counts the ticks in a row in which this core saw more than
	// twice the serving core's stations; guarded by Selector.mu.
	richer int
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
	// Hedge is how long the next tick may wait for the serving core once
	// another core delivered it (0: it waits until staleAfter); set before
	// Run. OnHedge, if set, learns of each tick served so.
	Hedge   time.Duration
	OnHedge func()

	cores   []*Core
	serve   func(*rtsv1.Snapshot)
	name    string
	log     *slog.Logger
	now     func() time.Time
	tracer  trace.Tracer
	mu      sync.Mutex
	current int // index of the serving core, -1 before the first snapshot
	last    int64
}

// New returns a selector over conns (one per core, in order of preference);
// serve receives each snapshot to publish, in tick order, from one
// goroutine at a time.
func New(name string, targets []string, conns []*grpc.ClientConn, serve func(*rtsv1.Snapshot), log *slog.Logger) *Selector {
	s := &Selector{serve: serve, name: name, log: log, now: time.Now, current: -1, tracer: telemetry.Tracer("shindo.dev/svc-edge")}
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
						s.log.WarnContext(ctx, "core subscription ended", slog.String("core", c.Target), slog.Any("error", err))
					}
					break
				}
				backoff = 100 * time.Millisecond
				c.received(s.now(), resp.GetSnapshot())
				s.handle(ctx, i, resp)
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

// handle offers a core's snapshot, under a span of its tick's trace when
// it carries one.
func (s *Selector) handle(ctx context.Context, i int, resp *rtsv1.SubscribeResponse) {
	if len(resp.GetTraceContext()) == 0 {
		s.offer(ctx, i, resp.GetSnapshot())
		return
	}
	ctx, span := s.tracer.Start(telemetry.Extract(ctx, resp.GetTraceContext()), "edge snapshot",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("shindo.core", s.cores[i].Target), attribute.Int64("shindo.tick_ms", resp.GetSnapshot().GetTimeMs())))
	served := s.offer(ctx, i, resp.GetSnapshot())
	span.SetAttributes(attribute.Bool("shindo.served", served))
	span.End()
}

// offer serves snap from core i if it is the stream's next tick and the
// core the stream takes it from, and reports whether it did.
func (s *Selector) offer(ctx context.Context, i int, snap *rtsv1.Snapshot) bool {
	if snap == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := seen(snap)
	// Coverage is judged on every tick, served or not: the other core's
	// copy of a tick usually arrives after the serving core's.
	if s.current >= 0 && i != s.current && s.richer(i, n) {
		s.switchTo(ctx, i, snap)
	}
	if snap.GetTimeMs() <= s.last {
		return false
	}
	if i != s.current {
		if s.current >= 0 && !s.takeOver(n) {
			s.hedge(ctx, i, snap, n)
			return false
		}
		s.switchTo(ctx, i, snap)
	}
	s.fill(ctx, i, snap.GetTimeMs())
	s.last = snap.GetTimeMs()
	s.serve(snap)
	return true
}

// hedgeShare: a core standing in for a late serving core sees at least
// this share of the stations the serving core last saw.
const hedgeShare = 0.98

// hedge serves core i's copy of the next tick, seeing n stations, in
// place of the serving core's if that has not come Hedge later. s.mu is
// held.
func (s *Selector) hedge(ctx context.Context, i int, snap *rtsv1.Snapshot, n int) {
	if s.Hedge <= 0 || snap.GetTimeMs() != s.last+tickMs {
		return // a jump goes through a takeover and its fill
	}
	time.AfterFunc(s.Hedge, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil || snap.GetTimeMs() != s.last+tickMs {
			return // the serving core's copy came, or the stream moved on
		}
		cur := s.cores[s.current]
		cur.mu.Lock()
		has := cur.stations
		cur.mu.Unlock()
		if float64(n) < hedgeShare*float64(has) {
			return
		}
		s.log.DebugContext(ctx, "late tick taken from another core", slog.String("core", s.cores[i].Target), slog.Int64("tick", snap.GetTimeMs()))
		s.last = snap.GetTimeMs()
		s.serve(snap)
		if s.OnHedge != nil {
			s.OnHedge()
		}
	})
}

func (s *Selector) switchTo(ctx context.Context, i int, snap *rtsv1.Snapshot) {
	s.log.InfoContext(ctx, "serving core", slog.String("core", s.cores[i].Target), slog.Int64("tick", snap.GetTimeMs()),
		slog.Int("stations", seen(snap)))
	s.current = i
	for _, c := range s.cores {
		c.richer = 0
	}
}

// richer reports whether core i, whose tick sees n stations, has now seen
// more than twice the serving core's stations for richerTicks ticks in a
// row. s.mu is held.
func (s *Selector) richer(i, n int) bool {
	cur := s.cores[s.current]
	cur.mu.Lock()
	seen := cur.stations
	cur.mu.Unlock()
	c := s.cores[i]
	if 2*seen >= n {
		c.richer = 0
		return false
	}
	c.richer++
	return c.richer >= richerTicks
}

// takeOver reports whether another core's newer tick, seeing n stations,
// replaces the serving core, which has not delivered that tick: at once if
// the serving core is stale and the other sees at least half its stations,
// after blindAfter otherwise. s.mu is held.
func (s *Selector) takeOver(n int) bool {
	cur := s.cores[s.current]
	cur.mu.Lock()
	silent, has := s.now().Sub(cur.lastAt), cur.stations
	if !cur.connected {
		silent = max(silent, staleAfter+time.Millisecond)
	}
	cur.mu.Unlock()
	switch {
	case silent > blindAfter:
		return true
	case silent > staleAfter:
		return 2*n >= has
	}
	return false
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
		s.log.InfoContext(ctx, "ticks filled from the archives", slog.Int("ticks", n), slog.Int64("from", from), slog.Int64("before", t))
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
			s.log.DebugContext(ctx, "archive read failed", slog.String("core", s.cores[k].Target), slog.Int64("tick", t), slog.Any("error", err))
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

func (c *Core) received(at time.Time, snap *rtsv1.Snapshot) {
	c.mu.Lock()
	c.snapshots++
	c.lastAt = at
	c.site = snap.GetSite()
	c.stations = seen(snap)
	c.mu.Unlock()
}

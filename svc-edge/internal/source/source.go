// Package source feeds an edge with RTS snapshots from the cores. Each core
// is subscribed to at once; one of them is served at a time and the others
// stand by, so clients see one consistent stream. Snapshots are
// deduplicated by tick: the stream never repeats or goes back in time. When
// the serving core stops delivering, the next snapshot from another core
// takes over, so losing a core costs at most about one tick.
package source

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

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

// Selector subscribes to every core and serves one.
type Selector struct {
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
				s.offer(i, resp.GetSnapshot())
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

func (s *Selector) offer(i int, snap *rtsv1.Snapshot) {
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
	s.last = snap.GetTimeMs()
	s.serve(snap)
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

package watch

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// hub holds one kind's state message and its watchers. The state is what
// a new watcher gets first; every change published after goes to every
// watcher, so a watcher that subscribed misses nothing between the two.
// Published messages are never modified: all watchers send the same one.
type hub[M proto.Message] struct {
	kind      string
	max       int // watchers at once
	buffer    int // messages a watcher may fall behind
	heartbeat time.Duration
	empty     M // the heartbeat

	mu       sync.Mutex
	state    M
	loaded   bool
	watchers map[*watcher[M]]struct{}

	refused, dropped prometheus.Counter
	gauge            prometheus.GaugeFunc
}

// watcher is one open watch: its pending messages, and gone, closed when
// the hub dropped it for falling behind.
type watcher[M proto.Message] struct {
	ch   chan M
	gone chan struct{}
}

func newHub[M proto.Message](kind string, empty M, max, buffer int, heartbeat time.Duration) *hub[M] {
	h := &hub[M]{kind: kind, empty: empty, max: max, buffer: buffer, heartbeat: heartbeat, watchers: map[*watcher[M]]struct{}{}}
	labels := prometheus.Labels{"kind": kind}
	h.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_dataapi_watchers_refused_total",
		Help: "Watches refused: the limit of watchers reached, or nothing read from the database yet.", ConstLabels: labels})
	h.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_dataapi_watchers_dropped_total",
		Help: "Watchers ended for falling behind.", ConstLabels: labels})
	h.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shindo_dataapi_watchers",
		Help: "Open watches.", ConstLabels: labels}, func() float64 {
		h.mu.Lock()
		defer h.mu.Unlock()
		return float64(len(h.watchers))
	})
	return h
}

func (h *hub[M]) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.refused, h.dropped, h.gauge}
}

// subscribe opens a watch: the current state, then every change through
// the watcher's channel.
func (h *hub[M]) subscribe() (*watcher[M], M, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var zero M
	switch {
	case !h.loaded:
		h.refused.Inc()
		return nil, zero, status.Errorf(codes.Unavailable, "%s not read from the database yet; retry", h.kind)
	case len(h.watchers) >= h.max:
		h.refused.Inc()
		return nil, zero, status.Errorf(codes.ResourceExhausted, "%d watchers of %s already; retry later or at another core", h.max, h.kind)
	}
	w := &watcher[M]{ch: make(chan M, h.buffer), gone: make(chan struct{})}
	h.watchers[w] = struct{}{}
	return w, h.state, nil
}

func (h *hub[M]) unsubscribe(w *watcher[M]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
}

// publish replaces the state and, unless change is nil, sends it to every
// watcher. A watcher whose buffer is full is dropped rather than waited
// for, so one slow watcher holds neither the others nor more than its
// buffer of memory.
func (h *hub[M]) publish(state M, change M, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state, h.loaded = state, true
	if !changed {
		return
	}
	for w := range h.watchers {
		select {
		case w.ch <- change:
		default:
			delete(h.watchers, w)
			close(w.gone)
			h.dropped.Inc()
		}
	}
}

// serve sends a watch's messages, and a heartbeat every h.heartbeat,
// until the watcher is dropped or ctx ends (the client left).
func (h *hub[M]) serve(ctx context.Context, send func(M) error) error {
	w, first, err := h.subscribe()
	if err != nil {
		return err
	}
	defer h.unsubscribe(w)
	if err := send(first); err != nil {
		return err
	}
	beat := time.NewTicker(h.heartbeat)
	defer beat.Stop()
	for {
		select {
		case m := <-w.ch:
			if err := send(m); err != nil {
				return err
			}
		case <-beat.C:
			if err := send(h.empty); err != nil {
				return err
			}
		case <-w.gone:
			return status.Errorf(codes.ResourceExhausted, "watcher of %s fell more than %d changes behind; reconnect", h.kind, h.buffer)
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

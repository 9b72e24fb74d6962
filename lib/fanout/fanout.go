// Package fanout broadcasts values to many subscribers without letting any
// of them slow the publisher: each subscriber has a bounded buffer, and one
// whose buffer is full when a value arrives is dropped (its Dropped channel
// closes) instead of being waited for. RTS snapshots to edges, live
// waveform chunks and SSE events all go out this way.
package fanout

import "sync"

// Sub is one subscription.
type Sub[T any] struct {
	// C delivers the values, in publishing order.
	C <-chan T
	// Dropped closes when the subscriber fell behind and was removed.
	Dropped <-chan struct{}

	c       chan T
	dropped chan struct{}
	filter  func(T) bool
}

// Hub is a broadcast point. The zero value is not usable; call New.
type Hub[T any] struct {
	max int

	mu        sync.Mutex
	subs      map[*Sub[T]]struct{}
	latest    T
	hasLatest bool
	dropped   uint64
}

// New returns a hub accepting at most max subscribers (0: no limit).
func New[T any](max int) *Hub[T] {
	return &Hub[T]{max: max, subs: map[*Sub[T]]struct{}{}}
}

// Subscribe adds a subscriber with room for buffer values; filter, when not
// nil, selects the values it receives. It also returns the latest value
// published, if any, so the subscriber can start from it without missing
// the one after. ok is false when the hub is full.
func (h *Hub[T]) Subscribe(buffer int, filter func(T) bool) (s *Sub[T], latest T, hasLatest, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.max > 0 && len(h.subs) >= h.max {
		return nil, latest, false, false
	}
	s = &Sub[T]{c: make(chan T, buffer), dropped: make(chan struct{}), filter: filter}
	s.C, s.Dropped = s.c, s.dropped
	h.subs[s] = struct{}{}
	return s, h.latest, h.hasLatest, true
}

// Unsubscribe removes s; it is safe after s was dropped.
func (h *Hub[T]) Unsubscribe(s *Sub[T]) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Publish sends v to every subscriber that wants it and records it as the
// latest value.
func (h *Hub[T]) Publish(v T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest, h.hasLatest = v, true
	for s := range h.subs {
		if s.filter != nil && !s.filter(v) {
			continue
		}
		select {
		case s.c <- v:
		default:
			delete(h.subs, s)
			close(s.dropped)
			h.dropped++
		}
	}
}

// Latest returns the most recent value published.
func (h *Hub[T]) Latest() (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest, h.hasLatest
}

// Stats returns the number of subscribers and how many were dropped so far.
func (h *Hub[T]) Stats() (subscribers int, dropped uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.dropped
}

// Package live fans a core's incoming sample chunks out to the subscribers
// of WaveformService.Live, each watching a set of stations. A subscriber
// that falls behind is disconnected; it never slows the ingest stream.
package live

import (
	"sync"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

// Buffer is how many chunks a subscriber may fall behind: 16 s of one
// station.
const Buffer = 32

// Subscription receives chunks of its stations.
type Subscription struct {
	C        <-chan *waveformv1.Chunk
	Dropped  <-chan struct{}
	c        chan *waveformv1.Chunk
	dropped  chan struct{}
	stations map[string]bool
}

// Hub routes chunks to subscriptions.
type Hub struct {
	mu    sync.Mutex
	subs  map[*Subscription]struct{}
	drops int
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[*Subscription]struct{}{}} }

// Subscribe starts a subscription to stations.
func (h *Hub) Subscribe(stations []string) *Subscription {
	s := &Subscription{c: make(chan *waveformv1.Chunk, Buffer), dropped: make(chan struct{}), stations: map[string]bool{}}
	s.C, s.Dropped = s.c, s.dropped
	for _, id := range stations {
		s.stations[id] = true
	}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Unsubscribe ends s.
func (h *Hub) Unsubscribe(s *Subscription) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Publish delivers c to every subscription watching its station.
func (h *Hub) Publish(c *waveformv1.Chunk) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.stations[c.GetStationId()] {
			continue
		}
		select {
		case s.c <- c:
		default:
			delete(h.subs, s)
			close(s.dropped)
			h.drops++
		}
	}
}

// Count returns the number of subscriptions and how many were dropped.
func (h *Hub) Count() (subs, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.drops
}

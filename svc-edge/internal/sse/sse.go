// Package sse is svc-edge's Server-Sent Events hub: it broadcasts each
// event, encoded once, to every connected client of a stream, keeps idle
// connections alive with comments, and drops any client that falls behind
// so that no client can slow the others.
//
// Events carry IDs derived from the data ("<ms>-<topic index>": a tick's
// time for RTS), so the same event has the same ID at every edge, and a
// hub keeps the events of the last History: a client that reconnects with
// Last-Event-ID — at this edge or the other — gets exactly the events it
// missed, then the live ones.
package sse

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shindo.dev/lib/fanout"
)

// Event is one message of a stream, with its two wire forms prepared once
// for all clients: plain, and for `compress=1` clients gzip+base64 under
// event name "g".
type Event struct {
	topic      string
	id         string
	name       string
	at         time.Time
	data       []byte
	plain      []byte
	compressed func() []byte
}

// NewEvent frames data (one line of JSON) as an SSE event named name (""
// for the default "message" event), without an ID.
func NewEvent(name string, data []byte) *Event { return NewEventID("", "", name, data) }

// NewEventID is NewEvent for an event of topic with an ID (see ID).
func NewEventID(topic, id, name string, data []byte) *Event {
	e := &Event{topic: topic, id: id, name: name, at: time.Now(), data: data, plain: frame(id, name, data)}
	e.compressed = sync.OnceValue(func() []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		zw.Close()
		enc := make([]byte, base64.StdEncoding.EncodedLen(z.Len()))
		base64.StdEncoding.Encode(enc, z.Bytes())
		return frame(id, "g", enc)
	})
	return e
}

// ID builds an event ID from the time the event describes (Unix ms) and
// its topic's index, so IDs sort in stream order and agree across edges.
func ID(ms int64, topic int) string { return strconv.FormatInt(ms, 10) + "-" + strconv.Itoa(topic) }

// parseID reads an ID; false for anything else, which is refused.
func parseID(id string) (ms int64, topic int, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found || len(id) > 40 {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	t, err2 := strconv.Atoi(b)
	return ms, t, err1 == nil && err2 == nil && ms >= 0 && t >= 0 && t < 100
}

// after reports whether event ID a comes after b.
func after(a, b string) bool {
	am, at, _ := parseID(a)
	bm, bt, _ := parseID(b)
	return am > bm || am == bm && at > bt
}

// ValidID reports whether id can be a Last-Event-ID.
func ValidID(id string) bool { _, _, ok := parseID(id); return ok }

func frame(id, name string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(name)+len(id)+20)
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// Data returns the event's payload.
func (e *Event) Data() []byte { return e.data }

// Topic returns the event's topic.
func (e *Event) Topic() string { return e.topic }

// Bytes returns the wire form for a plain or compressed client.
func (e *Event) Bytes(compressed bool) []byte {
	if compressed {
		return e.compressed()
	}
	return e.plain
}

// Options tune a hub.
type Options struct {
	// Retry is sent as `retry:` at connect: how long clients wait before
	// reconnecting.
	Retry time.Duration
	// KeepAlive is the longest a connection stays silent; a comment line
	// is sent when nothing else was.
	KeepAlive time.Duration
	// Buffer is how many events a client may fall behind before it is
	// dropped.
	Buffer int
	// WriteTimeout bounds one write to a client.
	WriteTimeout time.Duration
	// MaxClients caps connections; more are refused with 503.
	MaxClients int
	// Stop ends every connection when closed (server shutdown).
	Stop <-chan struct{}
	// History is how long events are kept for clients that resume with
	// Last-Event-ID; MaxHistory bounds their number.
	History    time.Duration
	MaxHistory int
}

// Hub is one broadcast stream.
type Hub struct {
	opts Options
	fan  *fanout.Hub[*Event]

	mu     sync.Mutex // orders Publish against a client's replay+subscribe
	hist   []*Event
	latest map[string]*Event // newest event per topic
}

// NewHub returns a hub with no clients.
func NewHub(opts Options) *Hub {
	return &Hub{opts: opts, fan: fanout.New[*Event](opts.MaxClients), latest: map[string]*Event{}}
}

// Publish sends e to every client and keeps it as its topic's latest and
// in the history.
func (h *Hub) Publish(e *Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest[e.topic] = e
	if h.opts.History > 0 && e.id != "" {
		h.hist = append(h.hist, e)
		cut := 0
		for cut < len(h.hist) && (e.at.Sub(h.hist[cut].at) > h.opts.History || len(h.hist)-cut > h.opts.MaxHistory && h.opts.MaxHistory > 0) {
			cut++
		}
		if cut > 0 {
			h.hist = append(h.hist[:0:0], h.hist[cut:]...)
		}
	}
	h.fan.Publish(e)
}

// Latest returns the most recent event of topic ("" for events without
// one), or nil.
func (h *Hub) Latest(topic string) *Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest[topic]
}

// Stats returns the number of clients and how many were dropped so far.
func (h *Hub) Stats() (clients int, dropped uint64) { return h.fan.Stats() }

// ServeOptions describe one client's stream.
type ServeOptions struct {
	Compressed bool
	// Want selects the client's topics; nil means all.
	Want func(topic string) bool
	// LastID resumes after that event ("" for none).
	LastID string
	// Latest sends, with no LastID, the newest event of each wanted topic
	// at once.
	Latest bool
	// Hello events open the stream (after the retry hint).
	Hello []*Event
}

// subscribe registers a client and returns, besides its subscription,
// the events to replay, whether it missed more than the history holds, and
// its position: the ID after which its stream continues, which the hello
// and gap events carry so a reconnect straight after them resumes there.
func (h *Hub) subscribe(o ServeOptions) (sub *fanout.Sub[*Event], replay []*Event, gap bool, pos string, ok bool) {
	want := func(e *Event) bool { return o.Want == nil || o.Want(e.topic) }
	h.mu.Lock()
	defer h.mu.Unlock()
	sub, _, _, ok = h.fan.Subscribe(h.opts.Buffer, want)
	if !ok {
		return nil, nil, false, "", false
	}
	pos = o.LastID
	if pos == "" {
		pos = ID(0, 0)
		if n := len(h.hist); n > 0 {
			pos = h.hist[n-1].id
		}
	}
	switch {
	case o.LastID != "":
		// Older than everything kept, and not kept itself: events were
		// lost in between.
		gap = len(h.hist) > 0 && after(h.hist[0].id, o.LastID) && !h.hasID(o.LastID)
		for _, e := range h.hist {
			if after(e.id, o.LastID) && want(e) {
				replay = append(replay, e)
			}
		}
	case o.Latest:
		for topic, e := range h.latest {
			if o.Want == nil || o.Want(topic) {
				replay = append(replay, e)
			}
		}
		slices.SortFunc(replay, func(a, b *Event) int {
			if after(a.id, b.id) {
				return 1
			}
			return -1
		})
	}
	return sub, replay, gap, pos, true
}

// hasID reports whether id is still in the history; h.mu is held.
func (h *Hub) hasID(id string) bool {
	for _, e := range h.hist {
		if e.id == id {
			return true
		}
	}
	return false
}

// Serve streams the hub to one client: the retry hint, then the hello
// events, then what it missed since LastID (with an `event: gap` first if
// that is older than the history), or the latest events, then every event
// after them.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, o ServeOptions) {
	compressed := o.Compressed
	c, replay, gap, pos, ok := h.subscribe(o)
	if !ok {
		w.Header().Set("Retry-After", "3")
		http.Error(w, `{"error":"too many clients on this edge"}`, http.StatusServiceUnavailable)
		return
	}
	defer h.fan.Unsubscribe(c)
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("X-Accel-Buffering", "no") // reverse proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)

	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var head []byte
	head = append(head, "retry: "...)
	head = strconv.AppendInt(head, h.opts.Retry.Milliseconds(), 10)
	head = append(head, "\n\n"...)
	for _, e := range o.Hello {
		head = append(head, frame(pos, e.name, e.data)...)
	}
	if gap {
		// The client missed more than the history holds.
		data := strconv.AppendQuote([]byte(`{"after":`), o.LastID)
		head = append(head, frame(pos, "gap", append(data, '}'))...)
	}
	for _, e := range replay {
		head = append(head, e.Bytes(compressed)...)
	}
	if !write(head) {
		return
	}
	keepAlive := time.NewTicker(h.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.Dropped:
			return
		case <-h.opts.Stop:
			return
		case e := <-c.C:
			if !write(e.Bytes(compressed)) {
				return
			}
		case <-keepAlive.C:
			// Unconditional, so proxies and clients see traffic at least
			// every KeepAlive even if the data stream stalls.
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

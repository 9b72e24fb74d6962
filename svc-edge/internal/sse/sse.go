// Package sse is svc-edge's Server-Sent Events hub: it broadcasts each
// event, encoded once, to every connected client of a stream, keeps idle
// connections alive with comments, and drops any client that falls behind
// so that no client can slow the others.
package sse

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"net/http"
	"strconv"
	"sync"
	"time"

	"shindo.dev/lib/fanout"
)

// Event is one message of a stream, with its two wire forms prepared once
// for all clients: plain, and for `compress=1` clients gzip+base64 under
// event name "g".
type Event struct {
	data       []byte
	plain      []byte
	compressed func() []byte
}

// NewEvent frames data (one line of JSON) as an SSE event named name (""
// for the default "message" event).
func NewEvent(name string, data []byte) *Event {
	e := &Event{data: data, plain: frame(name, data)}
	e.compressed = sync.OnceValue(func() []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		zw.Close()
		enc := make([]byte, base64.StdEncoding.EncodedLen(z.Len()))
		base64.StdEncoding.Encode(enc, z.Bytes())
		return frame("g", enc)
	})
	return e
}

func frame(name string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(name)+16)
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
}

// Hub is one broadcast stream.
type Hub struct {
	opts Options
	fan  *fanout.Hub[*Event]
}

// NewHub returns a hub with no clients.
func NewHub(opts Options) *Hub {
	return &Hub{opts: opts, fan: fanout.New[*Event](opts.MaxClients)}
}

// Publish sends e to every client and keeps it as the latest event.
func (h *Hub) Publish(e *Event) { h.fan.Publish(e) }

// Latest returns the most recent event, or nil.
func (h *Hub) Latest() *Event {
	e, _ := h.fan.Latest()
	return e
}

// Stats returns the number of clients and how many were dropped so far.
func (h *Hub) Stats() (clients int, dropped uint64) { return h.fan.Stats() }

// Serve streams the hub to one client: the retry hint, then the hello
// events, then the latest event and every event after it.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, compressed bool, hello ...*Event) {
	c, latest, _, ok := h.fan.Subscribe(h.opts.Buffer, nil)
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
	for _, e := range hello {
		head = append(head, e.Bytes(false)...)
	}
	if latest != nil {
		head = append(head, latest.Bytes(compressed)...)
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

// Package sse is svc-edge's Server-Sent Events hub: it broadcasts each
// event, encoded once, to every connected client of a stream, keeps idle
// connections alive with comments, and drops any client that falls behind
// so that no client can slow the others.
//
// An idle client costs a few kilobytes, so an edge holds tens of
// thousands: its connection is taken over from net/http once the stream's
// head is written, and it has no goroutine writing for it — a small pool
// of workers, started on demand, writes each client's pending events in
// one chunk, and one parked reader per connection notices the client
// leaving at once. (A connection that cannot be taken over, such as
// HTTP/2, is served by its handler goroutine instead.)
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
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one message of a stream, with its two wire forms prepared once
// for all clients: plain, and for `compress=1` clients gzip+base64 under
// event name "g".
type Event struct {
	topic      string
	id         string
	name       string
	private    bool // one client's, framed with its position
	raw        bool // written as it is (a WebSocket frame), kept nowhere
	at         time.Time
	data       []byte
	plain      []byte
	compressed func() []byte
	ws         func() []byte // the WebSocket form, when the hub has one
}

// NewRaw is an event of topic whose bytes are written as they are, for
// the hub's WebSocket clients (a frame made by the caller): it has no ID
// and is kept neither as its topic's latest nor in the history.
func NewRaw(topic string, frame []byte) *Event {
	return &Event{topic: topic, raw: true, at: time.Now(), data: frame}
}

// At is when the event was made.
func (e *Event) At() time.Time { return e.at }

// NewEvent frames data (one line of JSON) as an SSE event named name (""
// for the default "message" event), without an ID.
func NewEvent(name string, data []byte) *Event { return NewEventID("", "", name, data) }

// NewEventID is NewEvent for an event of topic with an ID (see ID).
func NewEventID(topic, id, name string, data []byte) *Event {
	e := &Event{topic: topic, id: id, name: name, at: time.Now(), data: data, plain: frame(id, name, data)}
	e.compressed = sync.OnceValue(func() []byte {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		// Compressing into memory cannot fail.
		_, _ = zw.Write(data)
		_ = zw.Close()
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

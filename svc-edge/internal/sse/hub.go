package sse

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"shindo.dev/lib/peerwrite"
	"shindo.dev/lib/writev"
)

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
	// WriteTimeout bounds one write to a client; a client that cannot take
	// a write within it is dropped. A taken-over connection's deadline is
	// renewed only once half of it has passed (see writeChunk), so such a
	// write is given between half of WriteTimeout and all of it.
	WriteTimeout time.Duration
	// MaxClients caps connections; more are refused with 503.
	MaxClients int
	// Stop ends every connection when closed (server shutdown).
	Stop <-chan struct{}
	// History is how long events are kept for clients that resume with
	// Last-Event-ID; MaxHistory bounds their number.
	History    time.Duration
	MaxHistory int
	// WebSocket makes an event's WebSocket frame, built once per event for
	// all WebSocket clients (ServeConn); nil: the hub has none.
	WebSocket func(*Event) []byte
	// MaxQueued and MaxStall drop a client that does not read: one whose
	// socket holds more than MaxQueued bytes not yet taken by the client
	// for longer than MaxStall (0: no bound). Writes alone cannot tell:
	// the kernels' buffers take megabytes before a write would block.
	MaxQueued int
	MaxStall  time.Duration
}

// wsPing is the frame sent on a silent WebSocket connection (RFC 6455
// ping, no payload).
var wsPing = []byte{0x89, 0x00}

// maxWorkers bounds the goroutines writing to clients: enough that a few
// clients stuck until WriteTimeout do not hold up the rest.
const maxWorkers = 64

// keepAliveFrame is the comment sent on silent connections.
var keepAliveFrame = []byte(": keep-alive\n\n")

// Hub is one broadcast stream.
type Hub struct {
	opts Options

	mu      sync.Mutex
	hist    []*Event
	latest  map[string]*Event // newest event per topic
	clients map[*client]struct{}
	dropped uint64
	// repeats counts events not sent to a client that already had them.
	repeats uint64
	// refused counts clients turned away with the hub at MaxClients.
	refused uint64
	ready   []*client // hijacked clients with something to write
	workers int
	janitor bool // the keep-alive and stop watcher runs
}

// client is one connected stream. Fields after mu-guarded are guarded by
// Hub.mu.
type client struct {
	want       func(*Event) bool
	compressed bool
	ws         bool // a WebSocket client: frames, not chunks
	onClose    func()
	// conn is the taken-over connection, written by the hub's workers;
	// nil for a client its handler goroutine serves, woken through wake.
	// out is the socket (or TLS connection) underneath it, which writes
	// go to (lib/writev: one writev on a socket, one record under TLS).
	conn net.Conn
	out  net.Conn
	// deadline is out's write deadline; only the goroutine writing to
	// the client uses it.
	deadline peerwrite.Deadline
	wake     chan struct{}
	done     chan struct{} // closed when the client is removed

	// mu-guarded:
	pos string // ID of the newest event written: private events carry it
	// queued is the ID of the newest event the client has or will be
	// written: an event published again at or before it (a restarted
	// edge's first tick, the one its clients resumed after) is not sent
	// twice.
	queued    string
	pending   []*Event
	spare     []*Event  // the other buffer, while a worker writes one
	keepAlive bool      // a keep-alive comment is due
	closing   bool      // removed once its pending events are written
	stalled   time.Time // since when its socket has held more than MaxQueued
	scheduled bool      // in ready, being written, or still writing its head
	lastWrite time.Time
	removed   bool
	dropped   bool // removed for not keeping up: closed without a TLS alert
}

// NewHub returns a hub with no clients.
func NewHub(opts Options) *Hub {
	return &Hub{opts: opts, latest: map[string]*Event{}, clients: map[*client]struct{}{}}
}

// Publish sends e to every client and keeps it as its topic's latest and
// in the history.
func (h *Hub) Publish(e *Event) {
	var closed []*client
	if h.opts.WebSocket != nil && !e.raw {
		e.ws = sync.OnceValue(func() []byte { return h.opts.WebSocket(e) })
	}
	h.mu.Lock()
	if !e.raw {
		h.latest[e.topic] = e
	}
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
	for c := range h.clients {
		if c.want != nil && !c.want(e) || e.raw && !c.ws || c.closing {
			continue
		}
		if e.id != "" && !e.private {
			if c.queued != "" && !after(e.id, c.queued) {
				h.repeats++
				continue
			}
			c.queued = e.id
		}
		if len(c.pending) >= h.opts.Buffer {
			h.dropped++
			c.dropped = true
			closed = append(closed, h.removeLocked(c))
			continue
		}
		c.pending = append(c.pending, e)
		h.kickLocked(c)
	}
	h.mu.Unlock()
	finish(closed)
}

// Latest returns the most recent event of topic ("" for events without
// one), or nil.
func (h *Hub) Latest(topic string) *Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest[topic]
}

// Stats returns the number of clients and how many were dropped so far for
// falling behind.
func (h *Hub) Stats() (clients int, dropped uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients), h.dropped
}

// Repeats returns how many times an event was not sent to a client
// because it already had it: published again at or before where the
// client resumed, as by an edge restarted under its clients.
func (h *Hub) Repeats() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.repeats
}

// Refused returns how many clients were turned away because the hub held
// MaxClients.
func (h *Hub) Refused() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

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
	// OnClose runs once when the stream ends, or when the client is
	// refused: Serve may return while the stream goes on.
	OnClose func()
	// Private, when set, carries events for this client alone (made with
	// NewEvent: they take the client's position as their ID, as they are
	// not in the history); the stream ends when it closes.
	Private <-chan *Event
}

// kickLocked gets c's pending events written: by a worker for a taken-over
// connection, else by waking its handler.
func (h *Hub) kickLocked(c *client) {
	if c.conn == nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
		return
	}
	if c.scheduled {
		return
	}
	c.scheduled = true
	h.ready = append(h.ready, c)
	if h.workers < maxWorkers {
		h.workers++
		go h.work()
	}
}

// work writes ready clients until none is left.
func (h *Hub) work() {
	for {
		h.mu.Lock()
		if len(h.ready) == 0 {
			h.workers--
			h.mu.Unlock()
			return
		}
		c := h.ready[0]
		h.ready[0] = nil
		h.ready = h.ready[1:]
		if c.removed {
			h.mu.Unlock()
			continue
		}
		evs, ka, last := c.pending, c.keepAlive, c.closing
		c.pending, c.spare, c.keepAlive = c.spare[:0], nil, false
		h.mu.Unlock()

		err := h.writeChunk(c, evs, ka)

		var closed *client
		h.mu.Lock()
		clear(evs)
		c.spare = evs[:0]
		switch {
		case c.removed:
		case err != nil:
			h.dropped++ // it could not take a write within WriteTimeout
			c.dropped = true
			closed = h.removeLocked(c)
		case last && len(c.pending) == 0:
			closed = h.removeLocked(c)
		default:
			c.lastWrite = time.Now()
			if len(c.pending) > 0 || c.keepAlive {
				h.ready = append(h.ready, c)
			} else {
				c.scheduled = false
			}
		}
		h.mu.Unlock()
		if closed != nil {
			finish([]*client{closed})
		}
	}
}

// writeChunk writes events (or, with none, a keep-alive) to a taken-over
// connection as one HTTP chunk.
func (h *Hub) writeChunk(c *client, evs []*Event, keepAlive bool) error {
	bufs := make(net.Buffers, 0, len(evs)+2)
	n := 0
	for _, e := range evs {
		b := c.bytes(e)
		bufs = append(bufs, b)
		n += len(b)
	}
	if n == 0 {
		if !keepAlive {
			return nil
		}
		if c.ws {
			bufs = append(bufs, wsPing)
		} else {
			bufs = append(bufs, keepAliveFrame)
		}
		n = len(bufs[0])
	}
	// Renewed at half-time, not per write: a deadline per write was a
	// tenth of the writers' time with a write per client and tick.
	c.deadline.Timeout = h.opts.WriteTimeout
	c.deadline.Renew(c.out)
	if c.ws {
		return writev.Write(c.out, bufs...)
	}
	size := strconv.AppendInt(nil, int64(n), 16)
	bufs = slices.Insert(bufs, 0, append(size, '\r', '\n'))
	bufs = append(bufs, []byte("\r\n"))
	return writev.Write(c.out, bufs...)
}

// bytes is e's wire form for c; it tracks c's position. Only the one
// goroutine writing to c calls it.
func (c *client) bytes(e *Event) []byte {
	switch {
	case e.raw:
		return e.data
	case c.ws:
		return e.ws()
	case e.private:
		return frame(c.pos, e.name, e.data)
	}
	if e.id != "" {
		c.pos = e.id
	}
	return e.Bytes(c.compressed)
}

// removeLocked takes c off the hub; the caller runs finish on it after
// unlocking, which closes its connection.
func (h *Hub) removeLocked(c *client) *client {
	if c.removed {
		return nil
	}
	c.removed = true
	delete(h.clients, c)
	close(c.done)
	return c
}

func (h *Hub) remove(c *client) {
	h.mu.Lock()
	closed := h.removeLocked(c)
	h.mu.Unlock()
	finish([]*client{closed})
}

// finish closes the removed clients' connections and runs their OnClose,
// outside the hub's lock.
func finish(cs []*client) {
	for _, c := range cs {
		if c == nil {
			continue
		}
		switch {
		case c.conn == nil:
		case c.dropped:
			peerwrite.Drop(c.conn)
		default:
			_ = peerwrite.Close(c.conn)
		}
		if c.onClose != nil {
			c.onClose()
		}
	}
}

// watch runs while the hub has clients: it queues keep-alives for silent
// taken-over connections and ends every stream on Stop.
func (h *Hub) watch() {
	period := min(time.Second, h.opts.KeepAlive/2)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-h.opts.Stop:
			h.mu.Lock()
			var closed []*client
			for c := range h.clients {
				closed = append(closed, h.removeLocked(c))
			}
			h.janitor = false
			h.mu.Unlock()
			finish(closed)
			return
		case now := <-t.C:
			var slow []*client
			h.mu.Lock()
			if len(h.clients) == 0 {
				h.janitor = false
				h.mu.Unlock()
				return
			}
			for c := range h.clients {
				if c.conn != nil && !c.keepAlive && now.Sub(c.lastWrite) >= h.opts.KeepAlive {
					c.keepAlive = true
					h.kickLocked(c)
				}
				if h.opts.MaxQueued > 0 && c.conn != nil {
					switch q, ok := peerwrite.Unsent(c.out); {
					case !ok || q <= h.opts.MaxQueued:
						c.stalled = time.Time{}
					case c.stalled.IsZero():
						c.stalled = now
					case now.Sub(c.stalled) >= h.opts.MaxStall:
						h.dropped++
						c.dropped = true
						slow = append(slow, h.removeLocked(c))
					}
				}
			}
			h.mu.Unlock()
			finish(slow)
		}
	}
}

func (h *Hub) stopped() bool {
	select {
	case <-h.opts.Stop:
		return true
	default:
		return false
	}
}

// subscribe registers a client and returns the events to replay, whether
// it missed more than the history holds, and its position: the ID after
// which its stream continues, which the hello and gap events carry so a
// reconnect straight after them resumes there. The client is registered
// as scheduled, so nothing is written to it before its head.
func (h *Hub) subscribe(c *client, o ServeOptions) (replay []*Event, gap bool, pos string, ok bool) {
	want := func(e *Event) bool { return o.Want == nil || o.Want(e.topic) }
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.opts.MaxClients > 0 && len(h.clients) >= h.opts.MaxClients {
		h.refused++
		return nil, false, "", false
	}
	if h.stopped() {
		return nil, false, "", false
	}
	if o.Want != nil {
		c.want = want
	}
	c.scheduled = true
	c.lastWrite = time.Now()
	h.clients[c] = struct{}{}
	if !h.janitor {
		h.janitor = true
		go h.watch()
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
	c.pos = pos
	for _, e := range replay {
		if e.id != "" {
			c.pos = e.id
		}
	}
	c.queued = c.pos
	return replay, gap, pos, true
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
// after them. It returns once the stream is handed to the hub's workers
// (or, for a connection that cannot be taken over, when it ends); OnClose
// tells when it ended.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, o ServeOptions) {
	c := &client{compressed: o.Compressed, onClose: o.OnClose, done: make(chan struct{})}
	replay, gap, pos, ok := h.subscribe(c, o)
	if !ok {
		w.Header().Set("Retry-After", "3")
		http.Error(w, `{"error":"too many clients on this edge"}`, http.StatusServiceUnavailable)
		finish([]*client{c})
		return
	}
	head := h.head(c, o, replay, gap, pos)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // reverse proxies must not buffer the stream

	conn, err := takeOver(w, head, h.opts.WriteTimeout)
	if errors.Is(err, http.ErrNotSupported) {
		h.serveInHandler(w, r, c, o, head)
		return
	}
	if err != nil {
		h.remove(c)
		return
	}
	h.mu.Lock()
	if c.removed {
		// Dropped or stopped while its head was written.
		h.mu.Unlock()
		_ = peerwrite.Close(conn)
		return
	}
	c.conn, c.out = conn, peerwrite.Socket(conn)
	c.lastWrite = time.Now()
	c.scheduled = false
	if len(c.pending) > 0 {
		h.kickLocked(c)
	}
	h.mu.Unlock()
	h.follow(c, o.Private)
	go func() {
		// Parked until the client closes or sends: then the stream ends at
		// once, not at the next write. An SSE client sends nothing after
		// its request; one that does would otherwise cost a read per byte
		// for as long as it liked.
		var b [1]byte
		_, _ = conn.Read(b[:])
		h.remove(c)
	}()
}

// follow feeds a client's private events into its stream until the
// channel closes, which ends the stream.
func (h *Hub) follow(c *client, private <-chan *Event) {
	if private == nil {
		return
	}
	go func() {
		for e := range private {
			pe := *e
			pe.private = true
			h.mu.Lock()
			if c.removed {
				h.mu.Unlock()
				continue // drain until the sender closes
			}
			c.pending = append(c.pending, &pe)
			h.kickLocked(c)
			h.mu.Unlock()
		}
		h.remove(c)
	}()
}

// head is the start of a client's stream.
func (h *Hub) head(c *client, o ServeOptions, replay []*Event, gap bool, pos string) []byte {
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
		head = append(head, e.Bytes(c.compressed)...)
	}
	return head
}

// takeOver hijacks the connection and writes the response head and body
// start itself, chunked as net/http would. http.ErrNotSupported means the
// connection cannot be taken over.
func takeOver(w http.ResponseWriter, body []byte, timeout time.Duration) (net.Conn, error) {
	hdr := w.Header().Clone()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	// Bytes the client sent after its request (it should send none) are
	// ignored; the buffers are dropped with rw.
	_ = rw
	// bw keeps the first write error and returns it from Flush, below.
	bw := bufio.NewWriterSize(conn, 512+len(body))
	_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
	hdr.Set("Transfer-Encoding", "chunked")
	hdr.Set("Connection", "keep-alive")
	_ = hdr.Write(bw)
	fmt.Fprintf(bw, "\r\n%x\r\n", len(body))
	_, _ = bw.Write(body)
	_, _ = bw.WriteString("\r\n")
	conn.SetWriteDeadline(time.Now().Add(timeout))
	if err := bw.Flush(); err != nil {
		_ = peerwrite.Close(conn)
		return nil, err
	}
	return conn, nil
}

// serveInHandler serves a client whose connection cannot be taken over,
// from its handler goroutine, until the stream ends.
func (h *Hub) serveInHandler(w http.ResponseWriter, r *http.Request, c *client, o ServeOptions, head []byte) {
	h.mu.Lock()
	c.wake = make(chan struct{}, 1)
	c.scheduled = false
	h.mu.Unlock()
	defer h.remove(c)
	h.follow(c, o.Private)
	rc := http.NewResponseController(w)
	write := func(b []byte) bool {
		// A writer without deadlines is written to as net/http would;
		// any other error is the stream broken.
		if err := rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.WriteHeader(http.StatusOK)
	if !write(head) {
		return
	}
	keepAlive := time.NewTicker(h.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-c.wake:
			h.mu.Lock()
			evs := c.pending
			c.pending = nil
			h.mu.Unlock()
			var b []byte
			for _, e := range evs {
				b = append(b, c.bytes(e)...)
			}
			if !write(b) {
				return
			}
		case <-keepAlive.C:
			// Unconditional, so proxies and clients see traffic at least
			// every KeepAlive even if the data stream stalls.
			if !write(keepAliveFrame) {
				return
			}
		}
	}
}

// Conn is a WebSocket client the hub serves (ServeConn).
type Conn struct {
	h *Hub
	c *client
}

// ServeConn takes over an established WebSocket connection: it writes head
// (frames of the caller's) and the latest event of each topic the client
// wants, then every event it wants as it is published, each as the frame
// Options.WebSocket makes, shared by all. The caller keeps reading the
// connection (the client's frames) and calls Close when it ends; OnClose
// runs once when the stream ends for any reason. It reports false, having
// written nothing, when the hub is full or stopping.
func (h *Hub) ServeConn(conn net.Conn, head []byte, o ServeOptions) (*Conn, bool) {
	c := &client{ws: true, onClose: o.OnClose, done: make(chan struct{})}
	replay, _, _, ok := h.subscribe(c, ServeOptions{Want: o.Want, Latest: true})
	if !ok {
		finish([]*client{c})
		return nil, false
	}
	b := append([]byte(nil), head...)
	for _, e := range replay {
		b = append(b, e.ws()...)
	}
	conn.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	if _, err := conn.Write(b); err != nil {
		h.remove(c)
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.removed {
		return nil, false
	}
	c.conn, c.out = conn, peerwrite.Socket(conn)
	c.lastWrite = time.Now()
	c.scheduled = false
	if len(c.pending) > 0 {
		h.kickLocked(c)
	}
	return &Conn{h: h, c: c}, true
}

// Send queues a frame for this client alone, after what is pending for
// it; with last, the connection is closed once it is written and nothing
// more is queued.
func (wc *Conn) Send(frame []byte, last bool) {
	h, c := wc.h, wc.c
	h.mu.Lock()
	if c.removed || c.closing {
		h.mu.Unlock()
		return
	}
	c.pending = append(c.pending, NewRaw("", frame))
	c.closing = c.closing || last
	h.kickLocked(c)
	h.mu.Unlock()
}

// Close ends the client's stream at once.
func (wc *Conn) Close() { wc.h.remove(wc.c) }

// Done is closed when the client's stream has ended.
func (wc *Conn) Done() <-chan struct{} { return wc.c.done }

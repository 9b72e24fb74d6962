package sse

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/devkit/tlsrecord"
)

func testHub(t *testing.T, opts Options) (*Hub, *httptest.Server) {
	return startHub(t, opts, false)
}

// startHub serves a hub over HTTP, or over HTTPS (HTTP/1.1) with
// httptest's certificate.
func startHub(t *testing.T, opts Options, https bool) (*Hub, *httptest.Server) {
	if opts.Retry == 0 {
		opts.Retry = 3 * time.Second
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = time.Hour
	}
	if opts.Buffer == 0 {
		opts.Buffer = 4
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = time.Second
	}
	h := NewHub(opts)
	hello := NewEvent("info", []byte(`{"location":"TPE-1"}`))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := ServeOptions{Compressed: r.URL.Query().Get("compress") == "1", Hello: []*Event{hello},
			Latest: true, LastID: r.Header.Get("Last-Event-ID")}
		if topics, ok := r.URL.Query()["topic"]; ok {
			o.Want = func(topic string) bool { return slices.Contains(topics, topic) }
		}
		h.Serve(w, r, o)
	}))
	if https {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	// Registered before any client's cleanup, so it runs after them: a
	// server closes only once its streams have ended.
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return h, srv
}

// readBlocks returns SSE blocks (separated by blank lines) as they arrive.
func readBlocks(t *testing.T, body io.Reader) <-chan string {
	out := make(chan string, 64)
	go func() {
		defer close(out)
		r := bufio.NewReader(body)
		var block strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\n" {
				out <- block.String()
				block.Reset()
				continue
			}
			block.WriteString(line)
		}
	}()
	return out
}

func connect(t *testing.T, url string) (*http.Response, <-chan string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, readBlocks(t, resp.Body)
}

func waitClients(t *testing.T, h *Hub, n int) {
	t.Helper()
	c := 0
	if !poll.Within(5*time.Second, func() bool { c, _ = h.Stats(); return c == n }) {
		t.Fatalf("%d clients, want %d", c, n)
	}
}

func TestStreamFormat(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{})
	h.Publish(NewEvent("", []byte(`{"time":1}`)))
	resp, blocks := connect(t, srv.URL)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	want := []string{
		"retry: 3000\n",
		// The hello carries the position a reconnect resumes from: before
		// everything, as the hub holds no history yet.
		"id: 0-0\nevent: info\ndata: {\"location\":\"TPE-1\"}\n",
		"data: {\"time\":1}\n", // the latest event at once
	}
	for _, w := range want {
		if got := <-blocks; got != w {
			t.Fatalf("block %q, want %q", got, w)
		}
	}
	waitClients(t, h, 1)
	h.Publish(NewEvent("", []byte(`{"time":2}`)))
	if got := <-blocks; got != "data: {\"time\":2}\n" {
		t.Fatalf("block %q", got)
	}
}

func TestCompressed(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{})
	_, blocks := connect(t, srv.URL+"?compress=1")
	<-blocks
	<-blocks
	waitClients(t, h, 1)
	payload := `{"station":{"A":{"pga":1}},"time":5}`
	h.Publish(NewEvent("", []byte(payload)))
	b := <-blocks
	data, ok := strings.CutPrefix(b, "event: g\ndata: ")
	if !ok {
		t.Fatalf("block %q is not a g event", b)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(data, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if string(plain) != payload {
		t.Fatalf("decompressed %q", plain)
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{KeepAlive: 50 * time.Millisecond})
	_, blocks := connect(t, srv.URL)
	<-blocks
	<-blocks
	for range 3 {
		select {
		case b := <-blocks:
			if b != ": keep-alive\n" {
				t.Fatalf("block %q", b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no keep-alive")
		}
	}
	_ = h
}

// TestSlowClientDropped: a client that stops reading is disconnected while
// a reading client gets every event.
func TestSlowClientDropped(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{Buffer: 2, WriteTimeout: 200 * time.Millisecond})

	// The slow client: a raw connection that never reads after the request.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_, fastBlocks := connect(t, srv.URL)
	<-fastBlocks
	<-fastBlocks
	waitClients(t, h, 2)

	big := bytes.Repeat([]byte("x"), 64<<10)
	for i := range 200 {
		h.Publish(NewEvent("", big))
		select {
		case <-fastBlocks:
		case <-time.After(5 * time.Second):
			t.Fatalf("fast client stalled at event %d", i)
		}
	}
	waitClients(t, h, 1)
	if _, dropped := h.Stats(); dropped != 1 {
		t.Fatalf("dropped %d", dropped)
	}
}

func TestMaxClientsAndStop(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	h, srv := testHub(t, Options{MaxClients: 1, Stop: stop})
	_, blocks := connect(t, srv.URL)
	<-blocks
	waitClients(t, h, 1)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second client: %s", resp.Status)
	}
	if n := h.Refused(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	close(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case _, ok := <-blocks:
			if !ok {
				return // stream ended
			}
		case <-ctx.Done():
			t.Fatal("stream did not end on stop")
		}
	}
}

func TestResumeFromLastEventID(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{History: time.Minute, MaxHistory: 100})
	for ms := int64(500); ms <= 5000; ms += 500 {
		h.Publish(NewEventID("rts", ID(ms, 0), "", []byte(fmt.Sprintf(`{"time":%d}`, ms))))
	}
	open := func(lastID string) <-chan string {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		blocks := readBlocks(t, resp.Body)
		<-blocks // retry
		// The hello carries where the stream resumes: the client's own
		// position, or the newest event the hub holds.
		pos := lastID
		if pos == "" {
			pos = ID(5000, 0)
		}
		if got := <-blocks; !strings.HasPrefix(got, "id: "+pos+"\nevent: info\n") {
			t.Fatalf("hello %q, want position %s", got, pos)
		}
		return blocks
	}
	// Resume after 3500: exactly 4000, 4500, 5000, then live.
	blocks := open(ID(3500, 0))
	for _, ms := range []int64{4000, 4500, 5000} {
		want := fmt.Sprintf("id: %s\ndata: {\"time\":%d}\n", ID(ms, 0), ms)
		if got := <-blocks; got != want {
			t.Fatalf("replay %q, want %q", got, want)
		}
	}
	waitClients(t, h, 1)
	h.Publish(NewEventID("rts", ID(5500, 0), "", []byte(`{"time":5500}`)))
	if got := <-blocks; !strings.HasPrefix(got, "id: 5500-0\n") {
		t.Fatalf("live %q", got)
	}
	// A client older than the history is told so, then gets all of it.
	h2, srv2 := testHub(t, Options{History: time.Minute, MaxHistory: 3})
	for ms := int64(500); ms <= 5000; ms += 500 {
		h2.Publish(NewEventID("rts", ID(ms, 0), "", []byte(`{}`)))
	}
	srv = srv2
	blocks = open(ID(500, 0))
	if got := <-blocks; got != "id: 500-0\nevent: gap\ndata: {\"after\":\"500-0\"}\n" {
		t.Fatalf("no gap event: %q", got)
	}
	if got := <-blocks; !strings.HasPrefix(got, "id: 4000-0\n") {
		t.Fatalf("first after the gap %q", got)
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	if !after(ID(1000, 1), ID(1000, 0)) || after(ID(500, 9), ID(1000, 0)) || !ValidID("1-0") {
		t.Fatal("ordering")
	}
	for _, bad := range []string{"", "x", "1", "-1-0", "1--1", strings.Repeat("9", 50) + "-0", "1-0\n"} {
		if ValidID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzValidID: any string is judged without panicking; an accepted ID
// cannot break the stream and orders consistently against itself and its successor.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"1-0", "1800000000500-1", "", "-", "1-", "x-1", "9-x", "99999999999999999999-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidID(id) {
			return
		}
		if strings.ContainsAny(id, "\r\n") {
			t.Fatalf("%q would break the stream", id)
		}
		ms, topic, _ := parseID(id)
		if after(id, id) || !after(ID(ms, topic+1), id) {
			t.Fatalf("%q orders wrongly", id)
		}
	})
}

// TestOnCloseOnce: OnClose runs exactly once whether the client leaves, is
// refused, or the connection cannot be taken over (HTTP/2, served from the
// handler), and the stream works the same over HTTP/2.
func TestOnCloseOnce(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			t.Parallel()
			h := NewHub(Options{Retry: 3 * time.Second, KeepAlive: time.Hour, Buffer: 4, WriteTimeout: time.Second, MaxClients: 1})
			var closes atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.Serve(w, r, ServeOptions{OnClose: func() { closes.Add(1) }})
			}))
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			client := srv.Client()

			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if h2 != (resp.ProtoMajor == 2) {
				t.Fatalf("protocol %s", resp.Proto)
			}
			blocks := readBlocks(t, resp.Body)
			<-blocks // retry
			waitClients(t, h, 1)
			h.Publish(NewEvent("", []byte(`{"n":1}`)))
			if got := <-blocks; got != "data: {\"n\":1}\n" {
				t.Fatalf("event %q", got)
			}
			refused, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			refused.Body.Close()
			if refused.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("second client: %s", refused.Status)
			}
			resp.Body.Close()
			waitClients(t, h, 0)
			if !poll.Within(5*time.Second, func() bool { return closes.Load() == 2 }) {
				t.Fatalf("OnClose ran %d times for 2 clients", closes.Load())
			}
			//nolint:forbidigo // no condition to poll: a third OnClose would be one arriving late
			time.Sleep(20 * time.Millisecond)
			if n := closes.Load(); n != 2 {
				t.Fatalf("OnClose ran %d times for 2 clients", n)
			}
		})
	}
}

// TestPrivateEvents: a client's own events reach it alone, between the
// public ones, carrying its position as their ID; closing the channel ends
// its stream.
func TestPrivateEvents(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{Retry: 3 * time.Second, KeepAlive: time.Hour, Buffer: 8, WriteTimeout: time.Second, History: time.Minute, MaxHistory: 100})
	private := make(chan *Event)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := ServeOptions{}
		if r.URL.Query().Get("mine") == "1" {
			o.Private = private
		}
		h.Serve(w, r, o)
	}))
	defer srv.Close()
	h.Publish(NewEventID("rts", ID(500, 0), "", []byte(`{"t":500}`)))
	_, mine := connect(t, srv.URL+"?mine=1")
	_, other := connect(t, srv.URL)
	<-mine
	<-other
	waitClients(t, h, 2)

	private <- NewEvent("notify", []byte(`{"seq":1}`))
	if got := <-mine; got != "id: 500-0\nevent: notify\ndata: {\"seq\":1}\n" {
		t.Fatalf("private event %q", got)
	}
	h.Publish(NewEventID("rts", ID(1000, 0), "", []byte(`{"t":1000}`)))
	private <- NewEvent("notify", []byte(`{"seq":2}`))
	for _, want := range []string{"id: 1000-0\ndata: {\"t\":1000}\n", "id: 1000-0\nevent: notify\ndata: {\"seq\":2}\n"} {
		if got := <-mine; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if got := <-other; got != "id: 1000-0\ndata: {\"t\":1000}\n" {
		t.Fatalf("other client got %q", got)
	}
	select {
	case got := <-other:
		t.Fatalf("other client got %q", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(private)
	for range mine {
	} // the stream ends
	waitClients(t, h, 1)
}

// TestConnectionSurge: thousands of clients connecting in the same moment
// are all served — each gets its head and then the next event — with none
// refused or dropped.
func TestConnectionSurge(t *testing.T) {
	const n = 2000
	h := NewHub(Options{Retry: 3 * time.Second, KeepAlive: time.Hour, Buffer: 16, WriteTimeout: 5 * time.Second, MaxClients: n + 10, History: time.Minute, MaxHistory: 100})
	h.Publish(NewEventID("rts", ID(500, 0), "", []byte(`{"t":500}`)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, ServeOptions{Latest: true})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("connect: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	waitClients(t, h, n)
	h.Publish(NewEventID("rts", ID(1000, 0), "", []byte(`{"t":1000}`)))
	for i, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if strings.HasPrefix(line, "data: {\"t\":1000}") {
					return
				}
			}
		})
	}
	wg.Wait()
	if clients, dropped := h.Stats(); clients != n || dropped != 0 {
		t.Fatalf("%d clients, %d dropped after the surge", clients, dropped)
	}
}

// TestNonReaderDropped: a client that stops reading while events trickle
// in — too slowly for a write ever to block within the write timeout, as
// the kernels' buffers take them — is dropped once its socket has held
// more than MaxQueued unread bytes for MaxStall, and counted; a reading
// client is untouched.
func TestNonReaderDropped(t *testing.T) {
	t.Parallel()
	for _, https := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[https], func(t *testing.T) {
			t.Parallel()
			testNonReaderDropped(t, https)
		})
	}
}

// nonReader opens a stream from srv (over TLS with https) that is never
// read: its receive buffer is small, so its window closes soon and the
// bytes wait in the hub's socket. It is closed when the test ends.
func nonReader(t *testing.T, srv *httptest.Server, https bool) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if https {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tc := tls.Client(conn, &tls.Config{RootCAs: roots, ServerName: "example.com"})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		conn = tc
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
}

// beside opens a non-reader and then a reading client (with query) on
// h, and returns the reader's blocks once both are streaming.
func beside(t *testing.T, h *Hub, srv *httptest.Server, https bool, query string) <-chan string {
	t.Helper()
	nonReader(t, srv, https)
	resp, err := srv.Client().Get(srv.URL + query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	reader := readBlocks(t, resp.Body)
	<-reader // the head: two blocks
	<-reader
	waitClients(t, h, 2)
	return reader
}

func testNonReaderDropped(t *testing.T, https bool) {
	h, srv := startHub(t, Options{Buffer: 10_000, WriteTimeout: time.Minute, MaxQueued: 16 << 10, MaxStall: 300 * time.Millisecond}, https)
	reader := beside(t, h, srv, https, "")

	event := bytes.Repeat([]byte("y"), 4<<10)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if n, _ := h.Stats(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the non-reading client was never dropped")
		}
		h.Publish(NewEvent("", event))
		select {
		case <-reader:
		case <-time.After(5 * time.Second):
			t.Fatal("the reading client stalled")
		}
		//nolint:forbidigo // the publishing is the load: a trickle, not a flood
		time.Sleep(20 * time.Millisecond)
	}
	if _, dropped := h.Stats(); dropped != 1 {
		t.Fatalf("dropped %d", dropped)
	}
	h.Publish(NewEvent("", []byte("still here")))
	if got := <-reader; !strings.Contains(got, "still here") {
		t.Fatalf("reader got %q", got)
	}
}

// TestRepublishedEventNotResent: an edge restarted under its clients
// publishes the core's latest tick again — the one a client resumed
// after. The client does not get it twice; the next tick it does get.
func TestRepublishedEventNotResent(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{History: time.Minute, MaxHistory: 100})
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Last-Event-ID", ID(5000, 1))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	blocks := readBlocks(t, resp.Body)
	<-blocks // retry
	<-blocks // hello
	waitClients(t, h, 1)
	h.Publish(NewEventID("rts", ID(5000, 0), "", []byte(`{"time":5000}`)))
	h.Publish(NewEventID("eew", ID(5000, 1), "", []byte(`[]`)))
	h.Publish(NewEventID("report", ID(5000, 2), "", []byte(`[]`)))
	h.Publish(NewEventID("rts", ID(5500, 0), "", []byte(`{"time":5500}`)))
	if got := <-blocks; got != "id: 5000-2\ndata: []\n" {
		t.Fatalf("first event %q, want the report after the resume point", got)
	}
	if got := <-blocks; !strings.HasPrefix(got, "id: 5500-0\n") {
		t.Fatalf("next event %q, want tick 5500", got)
	}
	if n := h.Repeats(); n != 2 {
		t.Fatalf("%d repeats counted, want 2", n)
	}
}

// TestTLSTickIsOneRecord: over TLS an event reaches the client as one
// record — its chunk written in one go (writeAll) — not one record for the
// chunk's size line, one per event and one for its end, each sealed by the
// edge, opened by the client and sent with a system call of its own.
func TestTLSTickIsOneRecord(t *testing.T) {
	hub, srv := startHub(t, Options{}, true)
	raw, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	counted := &tlsrecord.Counter{Conn: raw}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	conn := tls.Client(counted, &tls.Config{RootCAs: roots, ServerName: "example.com"})
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := readBlocks(t, resp.Body)
	for b := range blocks {
		if strings.Contains(b, "TPE-1") { // the hello, written with the head
			break
		}
	}
	for i := range 5 {
		before := counted.Records()
		data := bytes.Repeat([]byte("x"), 2000+i)
		hub.Publish(NewEvent("rts", data))
		select {
		case b := <-blocks:
			if !strings.Contains(b, string(data)+"\n") {
				t.Fatalf("event %d: got %q", i, b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		if got := counted.Records() - before; got != 1 {
			t.Fatalf("event %d came in %d TLS records, want 1", i, got)
		}
	}
}

// TestWriteDeadline: a taken-over connection's write deadline is renewed
// only once half of WriteTimeout has passed, not on every write. A client
// that keeps reading for many times WriteTimeout is never dropped (the
// deadline moves on), and one whose write blocks is dropped within
// WriteTimeout (the deadline is never further away than that).
func TestWriteDeadline(t *testing.T) {
	t.Parallel()
	for _, https := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[https], func(t *testing.T) {
			t.Parallel()
			const timeout = 300 * time.Millisecond
			h, srv := startHub(t, Options{Buffer: 10_000, WriteTimeout: timeout}, https)

			// The blocked client's writes block once the kernels' buffers
			// are full. The reader takes the untitled topic only, not the
			// big event below: it must not need CPU for that, nor be
			// dropped itself.
			reader := beside(t, h, srv, https, "?topic=")

			// Small events for 6 × WriteTimeout: the reader takes each
			// one; the blocked client's socket fills slowly.
			start := time.Now()
			for i := 0; time.Since(start) < 6*timeout; i++ {
				h.Publish(NewEvent("", []byte(fmt.Sprintf(`{"n":%d}`, i))))
				select {
				case got := <-reader:
					if !strings.Contains(got, fmt.Sprintf(`{"n":%d}`, i)) {
						t.Fatalf("event %d: reader got %q", i, got)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("the reading client stalled at event %d", i)
				}
				//nolint:forbidigo // writes spread over several deadlines
				time.Sleep(10 * time.Millisecond)
			}
			if _, dropped := h.Stats(); dropped != 0 {
				t.Fatalf("%d dropped while reading: a deadline was not renewed", dropped)
			}

			// Now an event larger than the kernels' buffers take (some
			// megabytes on loopback): the write to the blocked client
			// blocks, and it must be dropped within WriteTimeout.
			big := bytes.Repeat([]byte("z"), 8<<20)
			blocked := time.Now()
			h.Publish(NewEventID("big", "", "", big))
			if !poll.Within(5*time.Second, func() bool { _, dropped := h.Stats(); return dropped == 1 }) {
				t.Fatal("the blocked client was never dropped")
			}
			// Within WriteTimeout, with room for building and copying the
			// event (slow under the race detector) and for the scheduler.
			if took := time.Since(blocked); took > timeout+700*time.Millisecond {
				t.Fatalf("dropped %v after the write; WriteTimeout is %v", took, timeout)
			}
			waitClients(t, h, 1)

			// Dropping it did not hold up the hub: crypto/tls's Close
			// would wait 5 s to write its closing alert to the full
			// socket, and must not do so under the hub's lock.
			h.Publish(NewEvent("", []byte("still here")))
			select {
			case got := <-reader:
				if !strings.Contains(got, "still here") {
					t.Fatalf("reader got %q", got)
				}
			case <-time.After(time.Second):
				t.Fatal("the hub stalled after dropping the blocked client")
			}
		})
	}
}

// TestClientThatSendsIsEnded: a taken-over stream ends as soon as its
// client sends anything after the request, which no SSE client does: a
// stream kept reading what it sent would cost the edge a read per byte.
func TestClientThatSendsIsEnded(t *testing.T) {
	t.Parallel()
	h, srv := testHub(t, Options{})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClients(t, h, 1)
	if _, err := conn.Write([]byte("junk after the request")); err != nil {
		t.Fatal(err)
	}
	waitClients(t, h, 0)
	// Closed: an end or, as it sent bytes the edge never read, a reset.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, conn); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the stream did not end")
	}
}

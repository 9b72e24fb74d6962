package route

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// fakeCore is a core's data API: /readyz, and /v1/ping answering with its
// name after delay; /v1/post answers status.
type fakeCore struct {
	name   string
	addr   string
	delay  atomic.Int64 // ns
	status atomic.Int64
	hits   atomic.Int64
	srv    *http.Server
}

func startFakeCore(t *testing.T, name, addr string) *fakeCore {
	t.Helper()
	c := &fakeCore{name: name}
	c.status.Store(http.StatusOK)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready\n") })
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "*") // as the cores answer reads
		//nolint:forbidigo // a slow core is the case under test
		time.Sleep(time.Duration(c.delay.Load()))
		io.WriteString(w, c.name)
	})
	mux.HandleFunc("POST /v1/post", func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		w.WriteHeader(int(c.status.Load()))
	})
	c.listen(t, addr, mux)
	return c
}

func (c *fakeCore) listen(t *testing.T, addr string, h http.Handler) {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	// The port may linger briefly after a restart.
	poll.UntilNil(t, time.Second, "listening on "+addr, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	c.addr = ln.Addr().String()
	c.srv = &http.Server{Handler: h}
	go c.srv.Serve(ln)
	t.Cleanup(func() { c.srv.Close() })
}

// restart brings a killed core back on its address.
func (c *fakeCore) restart(t *testing.T) {
	t.Helper()
	c.listen(t, c.addr, c.srv.Handler)
}

func testBalancer(t *testing.T, opts Options, cores ...*fakeCore) (*Balancer, string) {
	t.Helper()
	var bases []string
	for _, c := range cores {
		bases = append(bases, "http://"+c.addr)
	}
	// No keep-alive reuse across a core's restart confuses nothing here,
	// but a short idle timeout keeps dead connections from lingering.
	tr := &http.Transport{IdleConnTimeout: time.Second, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	b, err := New(bases, opts, tr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(b.Handler())
	t.Cleanup(front.Close)
	return b, front.URL
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestOffloadShare: a healthy preferred core gets everything; once its
// latency passes the threshold, the configured share goes to the other.
func TestOffloadShare(t *testing.T) {
	t.Parallel()
	a, b := startFakeCore(t, "A", ""), startFakeCore(t, "B", "")
	opts := Defaults()
	opts.OverloadLatency = 15 * time.Millisecond
	_, url := testBalancer(t, opts, a, b)

	for range 20 {
		if _, body := get(t, url+"/v1/ping"); body != "A" {
			t.Fatalf("healthy preferred core: served by %s", body)
		}
	}

	a.delay.Store(int64(25 * time.Millisecond))
	// Let the smoothed latency cross the threshold, then count.
	for range 10 {
		get(t, url+"/v1/ping")
	}
	const n = 100
	byB := 0
	for range n {
		code, body := get(t, url+"/v1/ping")
		if code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		if body == "B" {
			byB++
		}
	}
	if share := float64(byB) / n; share < 0.25 || share > 0.35 {
		t.Fatalf("offloaded share %.2f, want 0.30", share)
	}
}

// TestEjectAndReadmit: a dead core's requests are retried at the other,
// so clients see no error; it is ejected within seconds and gets nothing;
// back up, it is readmitted and preferred again.
func TestEjectAndReadmit(t *testing.T) {
	t.Parallel()
	a, b := startFakeCore(t, "A", ""), startFakeCore(t, "B", "")
	opts := Defaults()
	opts.ProbeInterval = 50 * time.Millisecond
	bal, url := testBalancer(t, opts, a, b)
	ctx := t.Context()
	go bal.Run(ctx)

	a.srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for bal.Status()[0].Admitted {
		if code, body := get(t, url+"/v1/ping"); code != http.StatusOK || body != "B" {
			t.Fatalf("while A dies: %d %q", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("dead core never ejected")
		}
	}
	tried := bal.Status()[0].Requests
	for range 20 {
		if _, body := get(t, url+"/v1/ping"); body != "B" {
			t.Fatalf("ejected core served %q", body)
		}
	}
	if again := bal.Status()[0].Requests; again != tried {
		t.Fatalf("ejected core was sent %d requests", again-tried)
	}

	a.restart(t)
	poll.Until(t, 5*time.Second, "recovered core readmitted", func() bool { return bal.Status()[0].Admitted })
	if _, body := get(t, url+"/v1/ping"); body != "A" {
		t.Fatalf("readmitted preferred core not used: %q", body)
	}
}

// TestNoRetryOfWrites: a POST that fails at a core is not repeated at the
// other (it may have taken effect); with no core reachable the client gets
// 502 with Retry-After.
func TestNoRetryOfWrites(t *testing.T) {
	t.Parallel()
	a, b := startFakeCore(t, "A", ""), startFakeCore(t, "B", "")
	_, url := testBalancer(t, Defaults(), a, b)
	a.status.Store(http.StatusServiceUnavailable)
	resp, err := http.Post(url+"/v1/post", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || b.hits.Load() != 0 {
		t.Fatalf("POST: %d, other core hit %d times", resp.StatusCode, b.hits.Load())
	}

	a.srv.Close()
	b.srv.Close()
	resp, err = http.Get(url + "/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("no core: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, bases := range [][]string{nil, {"core-a:8080"}, {"ftp://x"}, {"http://x:1/api"}} {
		if _, err := New(bases, Defaults(), http.DefaultTransport, log); err == nil {
			t.Errorf("%q accepted", bases)
		}
	}
	bad := Defaults()
	bad.Offload = 1.5
	if _, err := New([]string{"http://x:1"}, bad, http.DefaultTransport, log); err == nil {
		t.Error("offload 1.5 accepted")
	}
}

// TestCoresCORSHeadersDropped: the edge answers for cross-origin reads
// itself, so the cores' CORS headers do not pass through (two
// Access-Control-Allow-Origin headers make a browser refuse the answer).
func TestCoresCORSHeadersDropped(t *testing.T) {
	t.Parallel()
	a := startFakeCore(t, "A", "")
	_, url := testBalancer(t, Defaults(), a)
	resp, err := http.Get(url + "/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Values("Access-Control-Allow-Origin"); len(v) != 0 {
		t.Fatalf("the core's CORS header passed through: %q", v)
	}
}

// TestClientThatStopsReadingIsCut: a client that stops reading a large
// answer through the edge is cut within WriteStall, and the core's answer
// with it, where a write without a deadline held both for as long as the
// client's kernel answered with a closed window.
func TestClientThatStopsReadingIsCut(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	c := &fakeCore{name: "TNN-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready\n") })
	mux.HandleFunc("GET /v1/endless", func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		chunk := make([]byte, 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c.listen(t, "", mux)
	opts := Defaults()
	opts.WriteStall = 300 * time.Millisecond
	_, front := testBalancer(t, opts, c)

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(front, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/endless HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the core's answer went on with its client not reading")
	}
}

// TestCoreThatPausesBeforeItsEnd: the write bound is per write, not for
// the whole answer: a core that pauses longer than WriteStall before its
// answer's end still has the end reach the client.
func TestCoreThatPausesBeforeItsEnd(t *testing.T) {
	t.Parallel()
	c := &fakeCore{name: "TNN-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready\n") })
	mux.HandleFunc("GET /v1/pausing", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
		http.NewResponseController(w).Flush()
		//nolint:forbidigo // the pause is the case under test
		time.Sleep(600 * time.Millisecond)
	})
	c.listen(t, "", mux)
	opts := Defaults()
	opts.WriteStall = 200 * time.Millisecond
	_, front := testBalancer(t, opts, c)
	resp, err := http.Get(front + "/v1/pausing")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "hello" {
		t.Fatalf("%q, %v", body, err)
	}
}

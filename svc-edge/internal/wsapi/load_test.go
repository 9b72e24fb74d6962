package wsapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/loadtest"
	"shindo.dev/svc-edge/internal/sse"
)

// The load benchmark runs the edge's hub and WebSocket server in this
// process and its clients in a child process (this test binary again, see
// TestMain), so the edge's memory per client is measured alone and
// clients read over real TCP. It measures SSE clients of the same hub in
// the same run, as the baseline.

const loadEnv = "SHINDO_WS_LOAD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(loadEnv); spec != "" {
		os.Exit(runLoadClients(spec))
	}
	os.Exit(m.Run())
}

// runLoadClients is the child: "mode addr clients ticks" with mode ws or
// sse — connect, print "ready", read ticks, print the result as JSON.
func runLoadClients(spec string) int {
	var mode, addr string
	var n, ticks int
	if _, err := fmt.Sscan(spec, &mode, &addr, &n, &ticks); err != nil {
		fmt.Fprintln(os.Stderr, "bad load spec:", err)
		return 2
	}
	loadtest.RaiseFileLimit(uint64(n) + 400)
	conns := make([]*bufio.Reader, 0, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+i/5000), 1)}
		d := net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client %d: %v\n", i, err)
			break
		}
		r := bufio.NewReaderSize(conn, 512)
		if mode == "sse" {
			fmt.Fprintf(conn, "GET /sse HTTP/1.1\r\nHost: edge\r\nAccept: text/event-stream\r\n\r\n")
		} else {
			fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: edge\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		}
		wg.Go(func() {
			// Headers, then the hello (SSE) or the start and its answer.
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			if mode == "ws" {
				conn.Write(masked(opText, []byte(`{"type":"start","token":"k","topic":["websocket.trem.rts.v1"]}`)))
				if _, err := readServerFrame(r); err != nil {
					return
				}
			} else {
				for {
					line, err := r.ReadString('\n')
					if err != nil || strings.HasPrefix(line, "data: {\"location\"") {
						break
					}
				}
			}
			mu.Lock()
			conns = append(conns, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	// Not a log line: the parent waits for it on the child's stdout.
	fmt.Fprintln(os.Stdout, "ready")

	lat := make([][]float64, len(conns))
	for i, r := range conns {
		lat[i] = make([]float64, ticks)
		wg.Go(func() {
			for got := 0; got < ticks; {
				var msg []byte
				var err error
				if mode == "ws" {
					msg, err = readServerFrame(r)
				} else {
					msg, err = r.ReadSlice('\n')
				}
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				seq, t, ok := loadtest.ParseTick(msg)
				if !ok || seq >= ticks {
					continue
				}
				lat[i][seq] = float64(now-t) / 1e6
				got++
			}
		})
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(loadtest.Collect(lat, ticks))
	return 0
}

// readServerFrame reads one unmasked server frame's payload.
func readServerFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return nil, err
		}
		n = int(ext[0])<<8 | int(ext[1])
	case 127:
		return nil, fmt.Errorf("frame too large for the load client")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// allowAll is a data API where every key may subscribe to everything.
type allowAll struct{}

func (allowAll) Check(_ context.Context, _ string, keys []string) ([]KeyState, error) {
	out := make([]KeyState, len(keys))
	for i := range out {
		out[i] = KeyState{Known: true, Admin: true}
	}
	return out, nil
}

// BenchmarkClients holds N subscribed WebSocket clients on one edge's hub
// — and, as the baseline in the same run, N SSE clients — then publishes
// ticks to all of them: memory per idle client, and the latency from
// publish to each client's read, the last client of each tick included.
//
//	cd svc-edge && go test -run '^$' -bench Clients -benchtime 1x -timeout 20m ./internal/wsapi/
func BenchmarkClients(b *testing.B) {
	limit := loadtest.RaiseFileLimit(20_000)
	n := 10_000
	if uint64(n)+500 > limit {
		n = int(limit) - 500
		b.Logf("the open file limit %d caps the clients at %d", limit, n)
	}
	for _, mode := range []string{"sse", "ws"} {
		b.Run(fmt.Sprintf("%s/clients=%d", mode, n), func(b *testing.B) {
			for range b.N {
				benchClients(b, mode, n, 20)
			}
		})
	}
}

func benchClients(b *testing.B, mode string, n, ticks int) {
	stop := make(chan struct{})
	h := sse.NewHub(sse.Options{Retry: 3 * time.Second, KeepAlive: 15 * time.Second, Buffer: 16, WriteTimeout: 10 * time.Second,
		MaxClients: n + 10, Stop: stop, History: time.Minute, MaxHistory: 200, WebSocket: Frame})
	opts := Defaults()
	opts.Hub, opts.Keys, opts.Log = h, allowAll{}, slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Addr = func(*http.Request) string { return "" }
	opts.Acquire, opts.Release = func(string) bool { return true }, func(string) {}
	ws := New(opts)
	hello := sse.NewEvent("info", []byte(`{"location":"TPE-1"}`))
	mux := http.NewServeMux()
	mux.Handle("/ws", ws)
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, sse.ServeOptions{Hello: []*sse.Event{hello}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer func() { close(stop); srv.Close() }()

	before, rssBefore := loadtest.GoMemory(), loadtest.RSS(0)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d", loadEnv, mode, ln.Addr(), n, ticks))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("load clients: %q %v", line, err)
	}
	clients, _ := h.Stats()
	after, rssAfter := loadtest.GoMemory(), loadtest.RSS(0)

	loadtest.PublishTicks(ticks, func(k int, payload []byte) {
		h.Publish(sse.NewEventID("rts", sse.ID(int64(k)*500, 0), "", payload))
	})
	body, _ := io.ReadAll(r)
	cmd.Wait()
	var res loadtest.Ticks
	if err := json.Unmarshal(body, &res); err != nil {
		b.Fatalf("load result %q: %v", body, err)
	}
	if res.Connected != n || clients != n || res.Missing > 0 {
		b.Fatalf("%d of %d clients connected (%d on the hub), %d tick reads missing", res.Connected, n, clients, res.Missing)
	}
	b.ReportMetric(float64(after-before)/float64(n), "go-B/client")
	b.ReportMetric(float64(rssAfter-rssBefore)/float64(n), "rss-B/client")
	b.ReportMetric(loadtest.Quantile(res.PerClient, 0.5), "p50-ms")
	b.ReportMetric(loadtest.Quantile(res.PerClient, 0.99), "p99-ms")
	b.ReportMetric(loadtest.Quantile(res.LastClient, 0.5), "last-p50-ms")
	b.ReportMetric(loadtest.Quantile(res.LastClient, 0.99), "last-p99-ms")
}

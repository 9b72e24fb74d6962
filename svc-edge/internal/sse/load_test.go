package sse

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/loadtest"
	"shindo.dev/devkit/pki"
	"shindo.dev/lib/certfile"
)

// testTLS issues the hub's certificate from a new CA and returns the CA's
// file and the server's configuration (the edge's: lib/certfile).
func testTLS(b *testing.B) (caFile string, cfg *tls.Config) {
	b.Helper()
	ca, err := pki.NewCA("load test CA", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cert, key, err := ca.IssueFiles(dir, "TPE-1", "edge", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "ca.pem"), certfile.ServerConfig(r)
}

// The SSE load benchmark runs the hub in this process and its clients in a
// child process (this test binary again, see TestMain), so the hub's memory
// per client is measured alone, and clients read over real TCP.

const loadEnv = "SHINDO_SSE_LOAD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(loadEnv); spec != "" {
		os.Exit(runLoadClients(spec))
	}
	os.Exit(m.Run())
}

// runLoadClients is the child: "addr clients ticks ca" — connect (over
// TLS trusting the CA file ca, or plain when it is "-"), print "ready",
// read ticks, print the result as JSON.
func runLoadClients(spec string) int {
	var addr, ca string
	var n, ticks int
	if _, err := fmt.Sscan(spec, &addr, &n, &ticks, &ca); err != nil {
		fmt.Fprintln(os.Stderr, "bad load spec:", err)
		return 2
	}
	var tlsConfig *tls.Config
	if ca != "-" {
		pool, err := certfile.LoadPool(ca)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		// HTTP/1.1, one connection per client, as an EventSource without
		// HTTP/2 has: TLS's cost per client at its highest.
		tlsConfig = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}}
	}
	loadtest.RaiseFileLimit(uint64(n) + 400)
	type client struct {
		conn net.Conn
		r    *bufio.Reader
	}
	clients := make([]client, 0, n)
	for i := range n {
		// Spread clients over source addresses: a bound source address
		// has only its own free ephemeral ports.
		local := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+i/5000), 1)}
		d := net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", addr)
		if err == nil && tlsConfig != nil {
			tc := tls.Client(conn, tlsConfig)
			if err = tc.Handshake(); err != nil {
				conn.Close()
			}
			conn = tc
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "client %d: %v\n", i, err)
			break
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: edge\r\nAccept: text/event-stream\r\n\r\n")
		clients = append(clients, client{conn, bufio.NewReaderSize(conn, 512)})
	}
	// Every client reads its headers and the hello before "ready".
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for {
				line, err := c.r.ReadString('\n')
				if err != nil || strings.HasPrefix(line, "event: info") {
					return
				}
			}
		})
	}
	wg.Wait()
	// Not a log line: the parent waits for it on the child's stdout.
	fmt.Fprintln(os.Stdout, "ready")

	// Each client records into its own row: no lock, and parsing by hand,
	// so the clients' own work distorts the latencies as little as
	// possible.
	lat := make([][]float64, len(clients)) // per client, per tick (0: missing)
	for i, c := range clients {
		lat[i] = make([]float64, ticks)
		wg.Go(func() {
			c.conn.SetReadDeadline(time.Now().Add(time.Duration(ticks)*time.Second + 30*time.Second))
			for got := 0; got < ticks; {
				line, err := c.r.ReadSlice('\n')
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				seq, t, ok := loadtest.ParseTick(line)
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

// BenchmarkSSEClients holds N idle SSE clients on one hub (the edge's
// per-client cost) and then publishes ticks to all of them: memory per
// client, and the latency from publish to each client's read, including
// the last client of each tick.
//
// Every client is a descriptor in each process: where RLIMIT_NOFILE cannot
// be raised far enough (it needs CAP_SYS_RESOURCE above the hard limit),
// the largest run is capped below the limit, and its name says so.
func BenchmarkSSEClients(b *testing.B) {
	limit := loadtest.RaiseFileLimit(51_000)
	for _, n := range []int{10_000, 50_000} {
		if uint64(n)+500 > limit {
			b.Logf("%d clients need more than the open file limit %d; running %d", n, limit, limit-500)
			n = int(limit) - 500
		}
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			for range b.N {
				benchClients(b, n, 20, false)
			}
		})
	}
}

// BenchmarkSSEClientsTLS is BenchmarkSSEClients at 10,000 and 20,000
// clients over TLS (TLS 1.3, an ECDSA P-256 certificate, HTTP/1.1: a
// connection per client), each beside the same run in plain text.
func BenchmarkSSEClientsTLS(b *testing.B) {
	limit := loadtest.RaiseFileLimit(51_000)
	for _, n := range []int{10_000, 20_000} {
		if uint64(n)+500 > limit {
			b.Logf("%d clients need more than the open file limit %d; running %d", n, limit, limit-500)
			n = int(limit) - 500
		}
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/tls=%t", n, on), func(b *testing.B) {
				for range b.N {
					benchClients(b, n, 20, on)
				}
			})
		}
	}
}

func benchClients(b *testing.B, n, ticks int, overTLS bool) {
	stop := make(chan struct{})
	h := NewHub(Options{Retry: 3 * time.Second, KeepAlive: 15 * time.Second, Buffer: 16, WriteTimeout: 10 * time.Second, MaxClients: n + 10, Stop: stop, History: time.Minute, MaxHistory: 200})
	hello := NewEvent("info", []byte(`{"location":"TPE-1"}`))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, ServeOptions{Hello: []*Event{hello}})
	})}
	ca := "-"
	if overTLS {
		var cfg *tls.Config
		ca, cfg = testTLS(b)
		ln = tls.NewListener(ln, cfg)
	}
	go srv.Serve(ln)
	defer func() { close(stop); srv.Close() }()

	before, rssBefore := loadtest.GoMemory(), loadtest.RSS(0)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %s", loadEnv, ln.Addr(), n, ticks, ca))
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
		h.Publish(NewEventID("rts", ID(int64(k+1)*500, 0), "", payload))
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
	// Signed: a collection between the two reads can leave RSS lower.
	b.ReportMetric(float64(int64(rssAfter)-int64(rssBefore))/float64(n), "rss-B/client")
	b.ReportMetric(loadtest.Quantile(res.PerClient, 0.5), "p50-ms")
	b.ReportMetric(loadtest.Quantile(res.PerClient, 0.99), "p99-ms")
	b.ReportMetric(loadtest.Quantile(res.LastClient, 0.5), "last-p50-ms")
	b.ReportMetric(loadtest.Quantile(res.LastClient, 0.99), "last-p99-ms")
	b.Logf("per tick, last client (ms): %.0f", res.LastClient)
}

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/loadtest"
	"shindo.dev/devkit/poll"
)

// The clients of the push benchmarks (SSE and WebSocket, of the edge and
// of Centrifugo) run in child processes (this test binary again): each
// client is a descriptor, and one process may hold only RLIMIT_NOFILE of
// them.
const pushClientsEnv = "SHINDO_E2E_PUSH_CLIENTS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(pushClientsEnv); spec != "" {
		os.Exit(runPushClients(spec))
	}
	os.Exit(m.Run())
}

// BenchmarkEdgeSSEClients holds 10,000 and 50,000 SSE clients of
// /api/v2/trem/rts on one edge site while the running topology (shindo dev, 5 stations) ticks:
// the edge is three shindo-edge processes sharing one address
// (-http-reuse-port), because one process may hold only RLIMIT_NOFILE
// descriptors — 20,000 on this machine, which cannot be raised without
// CAP_SYS_RESOURCE. It reports the edges' resident memory per client and
// the latency from each tick's time (its 500 ms boundary) to each client's
// read, and per tick to the last client's read, over 20 ticks.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench EdgeSSEClients -benchtime 1x -timeout 20m
func BenchmarkEdgeSSEClients(b *testing.B) {
	const procs, ticks = 3, 20
	for _, n := range []int{10_000, 50_000} {
		b.Run(fmt.Sprintf("clients=%d/edge-processes=%d", n, procs), func(b *testing.B) {
			if limit := loadtest.FileLimit(); limit < uint64(n/procs+2000) {
				b.Skipf("RLIMIT_NOFILE %d: too few descriptors for %d clients per process", limit, n/procs)
			}
			for b.Loop() {
				edgeClients(b, n, procs, ticks)
			}
		})
	}
}

func edgeClients(b *testing.B, n, procs, ticks int) {
	d := startDev(b, "-stations", "5", "-log-level", "warn")
	addr, edges, admins := startSharedEdges(b, d, procs, "-sse-max-per-ip", "100000", "-sse-max-clients", "19500", "-log-level", "warn")
	pushClients(b, edgeTarget(b, d, "edge", addr, "-", edges, admins), n, ticks)
}

// startSharedEdges starts procs edge processes of site TPE-1 on one
// address (-http-reuse-port), subscribed to the dev topology's cores, and
// waits until each is ready. It returns the address, the processes and
// their admin base URLs.
func startSharedEdges(t testing.TB, d *dev, procs int, args ...string) (string, []*exec.Cmd, []string) {
	t.Helper()
	rts := d.endpoints.get(t, "TNN-1", "rts", "grpc") + "," + d.endpoints.get(t, "TYO-1", "rts", "grpc")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var edges []*exec.Cmd
	var admins []string
	for range procs {
		admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cmd := exec.Command(filepath.Join(binDir(t), "shindo-edge"), append([]string{"-site", "TPE-1", "-rts", rts,
			"-http-addr", addr, "-http-reuse-port", "-grpc-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			"-admin-addr", admin}, args...)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
		edges, admins = append(edges, cmd), append(admins, "http://"+admin)
	}
	for _, a := range admins {
		waitHTTP(t, a+"/readyz", time.Minute)
	}
	return addr, edges, admins
}

// pushClientsResult is what a client process reports.
type pushClientsResult struct {
	Connected int
	Missing   int
	// ByTick are, per tick, the latencies (the message's time → a
	// client's read) of every client that read it, ms.
	ByTick [][]float64
}

// runPushClients is a client process: "addr clients ticks index server
// ca token". It connects its clients to server (pushServers), over TLS
// trusting the CA file ca or plain when it is "-" (from source addresses
// of its own: each has only its own ephemeral ports), with the API key
// token where the server asks for one, each reading from the start,
// prints "ready" once all read the hello, reads the first recorded tick
// from stdin, records ticks ticks, prints the result as JSON and holds
// its connections until stdin closes.
func runPushClients(spec string) int {
	var addr, server, ca, token string
	var n, ticks, index int
	if _, err := fmt.Sscan(spec, &addr, &n, &ticks, &index, &server, &ca, &token); err != nil {
		fmt.Fprintln(os.Stderr, "bad client spec:", err)
		return 2
	}
	srv, known := pushServers[server]
	tlsConfig, err := clientTLS(ca)
	if !known || err != nil {
		fmt.Fprintln(os.Stderr, "bad client spec:", server, err)
		return 2
	}
	loadtest.RaiseFileLimit(uint64(n) + 400)

	var start atomic.Int64 // first recorded tick; 0 until told
	lat := make([][]float64, n)
	var hello, done sync.WaitGroup
	var failed atomic.Int64
	phaseEnd := func(start int64) time.Time { return time.UnixMilli(start + int64(ticks)*pushTickMS).Add(time.Minute) }
	conns := make([]net.Conn, 0, n)
	for i := range n {
		lat[i] = slices.Repeat([]float64{-1}, ticks) // -1: not read (a read may take 0 ms)
		hello.Add(1)
		done.Add(1)
		local := &net.TCPAddr{IP: net.IPv4(127, byte(10+index), byte(1+i/5000), 1)}
		dialer := net.Dialer{LocalAddr: local, Timeout: 30 * time.Second}
		conn, err := dialClient(&dialer, addr, tlsConfig)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client %d: %v\n", i, err)
			return 1
		}
		conns = append(conns, conn)
		if srv.ws {
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", srv.path, addr)
		} else {
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", srv.path, addr)
		}
		go func() {
			defer done.Done()
			// A client that read every tick keeps its connection until the
			// process ends, which the parent does once every client of
			// every process has read: ten thousand connections closing as
			// they finish would load both sides while the last of them are
			// still reading the last tick, and make it the slowest of all.
			// A client that fails lets go at once.
			greeted := false
			greet := func() {
				if !greeted {
					greeted = true
					hello.Done()
				}
			}
			defer greet() // a client that fails before its hello must not hold the others
			r := bufio.NewReaderSize(conn, 4096)
			next, err := srv.open(conn, r, token)
			if err != nil {
				failed.Add(1)
				conn.Close()
				return
			}
			for got := 0; got < ticks; {
				// Until the last tick is well past, once it is known: a
				// client the server stopped sending to (one it dropped,
				// a message it lost) while it keeps the connection alive
				// with pings must end as missing reads, not hold the run.
				if start.Load() == 0 {
					conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
				}
				if s := start.Load(); s != 0 {
					// Also when the start came just now: the deadline
					// set on every connection then may be the one
					// overwritten above.
					conn.SetReadDeadline(phaseEnd(s))
				}
				chunk, err := next()
				if err != nil {
					failed.Add(1)
					conn.Close()
					return
				}
				now := time.Now().UnixMilli()
				// A chunk may hold several messages: Centrifugo joins
				// queued pushes in one frame, a line apart.
				for msg := range bytes.SplitSeq(chunk, []byte("\n")) {
					if !greeted && bytes.HasPrefix(msg, srv.hello) {
						greet()
						continue
					}
					t, ok := srv.tick(msg)
					s := start.Load()
					if !ok || s == 0 || t < s {
						continue
					}
					if k := int((t - s) / 500); k < ticks && lat[i][k] < 0 {
						lat[i][k] = float64(now - t)
						got++
					}
				}
			}
		}()
	}
	hello.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d clients failed before their hello\n", f, n)
		return 1
	}
	// The parent reads this line on the process's stdout: it is the
	// protocol between the two, as the JSON result below is, not a log.
	fmt.Fprintln(os.Stdout, "ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	s, err2 := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "no start tick:", err, err2)
		return 1
	}
	start.Store(s)
	for _, c := range conns {
		c.SetReadDeadline(phaseEnd(s)) // a read already waiting, too
	}
	done.Wait()

	res := pushClientsResult{Connected: n - int(failed.Load()), ByTick: make([][]float64, ticks)}
	for _, row := range lat {
		for k, l := range row {
			if l < 0 {
				res.Missing++
				continue
			}
			res.ByTick[k] = append(res.ByTick[k], l)
		}
	}
	json.NewEncoder(os.Stdout).Encode(res)
	// Until the parent has every process's result and closes stdin.
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// waitHTTP waits until url answers 200.
func waitHTTP(t testing.TB, url string, within time.Duration) {
	t.Helper()
	poll.UntilNil(t, within, url+" ready", func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
}

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

// The clients of BenchmarkEdgeSSEClients run in child processes (this
// test binary again): each client is a descriptor, and one process may
// hold only RLIMIT_NOFILE of them.
const sseClientsEnv = "SHINDO_E2E_SSE_CLIENTS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(sseClientsEnv); spec != "" {
		os.Exit(runSSEClients(spec))
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
	edgeRSS := func() (sum uint64) {
		for _, e := range edges {
			sum += loadtest.RSS(e.Process.Pid)
		}
		return sum
	}
	before := edgeRSS()

	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var children []child
	for p := range procs {
		share := n / procs
		if p == procs-1 {
			share = n - share*(procs-1)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d edge -", sseClientsEnv, addr, share, ticks, p))
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		children = append(children, child{cmd, stdin, bufio.NewReader(stdout)})
	}
	for i, c := range children {
		if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("client process %d: %q %v", i, line, err)
		}
	}
	// The edges settle, every client past its head, before their memory
	// is measured: resident memory has no state to wait for, so this is
	// the measurement's window.
	time.Sleep(2 * time.Second) //nolint:forbidigo // a settling window before measuring RSS, not a wait for a state
	after := edgeRSS()
	held := 0.0
	for _, a := range admins {
		_, page := httpGet(b, a+"/metrics")
		held += metricValue(page, "shindo_edge_sse_clients")
	}
	if int(held) != n {
		b.Fatalf("the edges hold %v clients, want %d", held, n)
	}

	// Record from a tick two seconds ahead, so every process starts at the
	// same one.
	start := (time.Now().UnixMilli()/500 + 4) * 500
	for _, c := range children {
		fmt.Fprintf(c.stdin, "%d\n", start)
	}
	var perClient []float64
	last := make([]float64, ticks)
	for i, c := range children {
		var res sseClientsResult
		if err := json.NewDecoder(c.out).Decode(&res); err != nil {
			b.Fatalf("client process %d: %v", i, err)
		}
		if res.Missing > 0 {
			b.Fatalf("client process %d: %d tick reads missing of %d clients", i, res.Missing, res.Connected)
		}
		perClient = append(perClient, res.PerClient...)
		for k, l := range res.LastClient {
			last[k] = max(last[k], l)
		}
	}
	b.ReportMetric(float64(after-before)/float64(n), "rss-B/client")
	b.ReportMetric(loadtest.Quantile(perClient, 0.5), "p50-ms")
	b.ReportMetric(loadtest.Quantile(perClient, 0.99), "p99-ms")
	b.ReportMetric(loadtest.Quantile(last, 0.5), "last-p50-ms")
	b.ReportMetric(loadtest.Quantile(last, 0.99), "last-p99-ms")
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

// sseClientsResult is what a client process reports.
type sseClientsResult struct {
	Connected int
	Missing   int
	// PerClient are every client's latencies (tick → read), ms.
	PerClient []float64
	// LastClient is, per tick, the latency of this process's last client.
	LastClient []float64
}

// runSSEClients is a client process: "addr clients ticks index server
// ca". It connects its clients to server (sseServers), over TLS trusting
// the CA file ca or plain when it is "-" (from source addresses of its
// own: each has only its own ephemeral ports), each reading from the
// start, prints "ready" once all read the hello, reads the first recorded
// tick from stdin, records ticks ticks and prints the result as JSON.
func runSSEClients(spec string) int {
	var addr, server, ca string
	var n, ticks, index int
	if _, err := fmt.Sscan(spec, &addr, &n, &ticks, &index, &server, &ca); err != nil {
		fmt.Fprintln(os.Stderr, "bad client spec:", err)
		return 2
	}
	srv, known := sseServers[server]
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
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: edge\r\nAccept: text/event-stream\r\n\r\n", srv.path)
		go func() {
			defer done.Done()
			defer conn.Close()
			r := bufio.NewReaderSize(conn, 4096)
			greeted := false
			for got := 0; got < ticks; {
				conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
				line, err := r.ReadSlice('\n')
				if err == bufio.ErrBufferFull {
					continue // a long line: only its end holds the time
				}
				if err != nil {
					failed.Add(1)
					if !greeted {
						hello.Done()
					}
					return
				}
				now := time.Now().UnixMilli()
				if !greeted && bytes.HasPrefix(line, srv.hello) {
					greeted = true
					hello.Done()
					continue
				}
				t, ok := tickTime(line)
				s := start.Load()
				if !ok || s == 0 || t < s {
					continue
				}
				if k := int((t - s) / 500); k < ticks {
					lat[i][k] = float64(now - t)
					got++
				}
			}
		}()
	}
	hello.Wait()
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
	done.Wait()

	res := sseClientsResult{Connected: n - int(failed.Load()), LastClient: make([]float64, ticks)}
	for _, row := range lat {
		for k, l := range row {
			if l < 0 {
				res.Missing++
				continue
			}
			res.PerClient = append(res.PerClient, l)
			res.LastClient[k] = max(res.LastClient[k], l)
		}
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// tickTime reads the tick of a data line of the RTS stream: its "time",
// the last field.
func tickTime(line []byte) (int64, bool) {
	if !bytes.HasPrefix(line, []byte("data: ")) {
		return 0, false
	}
	i := bytes.LastIndex(line, []byte(`"time":`))
	if i < 0 {
		return 0, false
	}
	v := bytes.TrimRight(line[i+len(`"time":`):], "}\r\n")
	t, err := strconv.ParseInt(string(v), 10, 64)
	return t, err == nil
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

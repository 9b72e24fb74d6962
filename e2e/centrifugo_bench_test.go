package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/loadtest"
	"shindo.dev/devkit/pki"
	"shindo.dev/lib/certfile"
)

// Centrifugo beside the edge (issue 14): the same client processes
// (runPushClients) hold 10,000 and 20,000 clients of each server, over SSE
// and over WebSocket, with and without TLS, and report the same metrics as
// BenchmarkEdgeSSEClients: resident memory per idle client, and latency
// from each message's time to each client's read and, per message, to the
// last client's read; and the same latencies from each message's
// publication (pub-), which for the edge's ticks comes after their time
// (published-p50-ms, published-p99-ms: the cores computing the tick).
//
// Run them in one go test run, so they share the machine's state:
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin SHINDO_CENTRIFUGO=$(go env GOPATH)/bin/centrifugo \
//	  go test -run '^$' -bench '^Benchmark(Edge|Centrifugo)(SSE|WS)$' -benchtime 1x -timeout 90m
//
// SHINDO_BENCH_CLIENTS=500 runs each at 500 clients instead: a check that
// the benchmark works, not a measurement.

// centrifugoVersion is the release these benchmarks configure: v6 nests
// its configuration in sections (http_server, client, channel, …).
const centrifugoVersion = "v6.9.1"

// pushTickMS is how often a message is published: the edge's tick, so
// both servers carry the same load.
const pushTickMS = 500

// perServerProcess is the most clients one server process is given: every
// client is a descriptor, and this machine's hard RLIMIT_NOFILE is 20,000.
const perServerProcess = 19_000

// pushClientProcs is how many client processes hold n clients of
// serverProcs server processes: at least two, so the clients' TLS
// handshakes and reads use both cores, and at most perServerProcess
// clients each (the descriptor limit holds for them too).
func pushClientProcs(n, serverProcs int) int {
	return max(2, serverProcs, (n+perServerProcess-1)/perServerProcess)
}

// pushClientCounts are the sizes run: 10,000 and 20,000, or the one in
// SHINDO_BENCH_CLIENTS.
func pushClientCounts(b *testing.B) []int {
	if s := os.Getenv("SHINDO_BENCH_CLIENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			b.Fatalf("SHINDO_BENCH_CLIENTS=%q: want a number of clients, at least 2", s)
		}
		return []int{n}
	}
	return []int{10_000, 20_000}
}

// BenchmarkCentrifugoSSE holds SSE clients of Centrifugo's unidirectional
// SSE transport (/connection/uni_sse), each subscribed to one channel at
// connect, and publishes to it through the server HTTP API twice a second
// a message the size and shape of the topology's ticks carrying its send
// time: memory per idle client (the nodes' RSS growth), and publish →
// client and publish → last client.
//
// Centrifugo runs with its memory engine, one node per 19,000 clients (a
// node is one process: the descriptor limit holds for it as for the edge);
// with two, they share no broker and each node is published to directly,
// so no broker hop is in Centrifugo's latency.
func BenchmarkCentrifugoSSE(b *testing.B) { benchCentrifugo(b, "centrifugo") }

// BenchmarkCentrifugoWS is BenchmarkCentrifugoSSE over Centrifugo's
// unidirectional WebSocket transport (/connection/uni_websocket), the
// clients answering its pings.
func BenchmarkCentrifugoWS(b *testing.B) { benchCentrifugo(b, "centrifugo-ws") }

func benchCentrifugo(b *testing.B, server string) {
	bin := centrifugoBin(b)
	for _, n := range pushClientCounts(b) {
		for _, overTLS := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/tls=%t", n, overTLS), func(b *testing.B) {
				nodes := (n + perServerProcess - 1) / perServerProcess
				skipFewDescriptors(b, n, nodes)
				for b.Loop() {
					centrifugoClients(b, bin, server, n, nodes, overTLS)
				}
			})
		}
	}
}

// BenchmarkEdgeSSE is BenchmarkCentrifugoSSE's counterpart: the same
// clients, sizes and TLS of the edge's SSE stream (/api/v2/trem/rts) on one
// edge site of a running topology (shindo dev, 5 stations), one edge
// process per 19,000 clients sharing one address (-http-reuse-port).
// Latency is from each tick's time, its 500 ms boundary, so it includes
// the cores' work and the hop to the edge, which Centrifugo's publish time
// does not; the pub- metrics are from the tick's publication, when the
// first core's Subscribe stream brought it to a subscriber beside the
// edge (edgeTarget), which Centrifugo's messages carry as their time. Its
// clients receive ticks while their memory is measured; Centrifugo's are
// idle.
func BenchmarkEdgeSSE(b *testing.B) { benchEdge(b, "edge") }

// BenchmarkEdgeWS is BenchmarkEdgeSSE over the edge's WebSocket API
// (/ws), each client starting with a subscriber's key made through the
// data API, beside Centrifugo's unidirectional WebSocket
// (BenchmarkCentrifugoWS).
func BenchmarkEdgeWS(b *testing.B) { benchEdge(b, "edge-ws") }

func benchEdge(b *testing.B, server string) {
	for _, n := range pushClientCounts(b) {
		for _, overTLS := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/tls=%t", n, overTLS), func(b *testing.B) {
				procs := (n + perServerProcess - 1) / perServerProcess
				skipFewDescriptors(b, n, procs)
				for b.Loop() {
					edgePushClients(b, server, n, procs, overTLS)
				}
			})
		}
	}
}

func skipFewDescriptors(b *testing.B, n, serverProcs int) {
	b.Helper()
	per := (n + pushClientProcs(n, serverProcs) - 1) / pushClientProcs(n, serverProcs)
	if limit := loadtest.FileLimit(); limit < uint64(max(per, n/serverProcs)+1000) {
		b.Skipf("RLIMIT_NOFILE %d: too few descriptors for %d clients in %d server processes", limit, n, serverProcs)
	}
}

func edgePushClients(b *testing.B, server string, n, procs int, overTLS bool) {
	d := startDev(b, "-stations", "5", "-log-level", "warn")
	// Each client source address holds up to 5,000 clients
	// (runPushClients), above the edge's default bound per address.
	args := []string{"-sse-max-per-ip", "100000", "-sse-max-clients", "19500", "-max-conns-per-ip", "0", "-log-level", "warn"}
	ca := "-"
	if overTLS {
		var cert, key string
		ca, cert, key = issueServerCert(b)
		args = append(args, "-tls-cert", cert, "-tls-key", key)
	}
	token := "-"
	if server == "edge-ws" {
		// The WebSocket API checks the clients' key through the data API.
		tnn := d.endpoints.get(b, "TNN-1", "dataapi", "http")
		args = append(args, "-data-api", tnn+","+d.endpoints.get(b, "TYO-1", "dataapi", "http"))
		token = subscriberKey(b, d, tnn, "websocket.trem.rts.v1")
	}
	addr, edges, admins := startSharedEdges(b, d, procs, args...)
	target := edgeTarget(b, d, server, addr, ca, edges, admins)
	target.token = token
	pushClients(b, target, n, 20)
}

// edgeTarget is the edge processes edges (their admin base URLs admins)
// at addr, read as server by clients trusting ca, serving the ticks of
// d's cores. A tick is published when the first of the cores' Subscribe
// streams brings it to a subscriber of this process, as it brings it to
// the edges.
func edgeTarget(t testing.TB, d *dev, server, addr, ca string, edges []*exec.Cmd, admins []string) pushTarget {
	target := pushTarget{server: server, addrs: []string{addr}, ca: ca, token: "-"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cores := []*coreTicks{
		watchCoreTicks(ctx, t, d.endpoints.get(t, "TNN-1", "rts", "grpc")),
		watchCoreTicks(ctx, t, d.endpoints.get(t, "TYO-1", "rts", "grpc")),
	}
	target.published = func(tick int64) (first time.Time, ok bool) {
		for _, c := range cores {
			if at, found := c.arrived(tick); found && (!ok || at.Before(first)) {
				first, ok = at, true
			}
		}
		return first, ok
	}
	for _, e := range edges {
		target.pids = append(target.pids, e.Process.Pid)
	}
	gauge := "shindo_edge_sse_clients"
	if pushServers[server].ws {
		gauge = "shindo_edge_ws_clients"
	}
	target.held = func() (int, error) {
		held := 0.0
		for _, a := range admins {
			resp, err := http.Get(a + "/metrics")
			if err != nil {
				return int(held), err
			}
			page, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return int(held), err
			}
			held += metricValue(string(page), gauge)
		}
		return int(held), nil
	}
	return target
}

// subscriberKey makes through the data API at base an API key of a
// subscriber to topics.
func subscriberKey(t testing.TB, d *dev, base string, topics ...string) string {
	t.Helper()
	admin, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"name": "push bench", "role": "subscriber", "topics": topics})
	if err != nil {
		t.Fatal(err)
	}
	code, reply := postJSON(t, base+"/v1/clients", strings.TrimSpace(string(admin)), string(body))
	var created struct {
		Key string `json:"key"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(reply), &created) != nil || created.Key == "" {
		t.Fatalf("create a subscriber key: %d %s", code, reply)
	}
	return created.Key
}

// issueServerCert issues a certificate for 127.0.0.1 from a new CA into a
// temporary directory: the CA's file (what clients trust), the
// certificate's and its key's.
func issueServerCert(b *testing.B) (caFile, cert, key string) {
	b.Helper()
	ca, err := pki.NewCA("push bench CA", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cert, key, err = ca.IssueFiles(dir, "TPE-1", "edge", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "ca.pem"), cert, key
}

// pushTarget is a server under load, as pushClients drives it.
type pushTarget struct {
	// server is how the clients read it: a key of pushServers.
	server string
	// addrs are where the clients connect: client process p to
	// addrs[p%len(addrs)].
	addrs []string
	// ca is the CA file the clients trust over TLS; "-": plain.
	ca string
	// token is the API key the clients present; "-": none.
	token string
	// pids are the processes whose resident memory is the server's.
	pids []int
	// held is how many clients the server holds.
	held func() (int, error)
	// publish publishes ticks messages, the first at start (Unix ms),
	// pushTickMS apart; nil when the server ticks by itself.
	publish func(start int64, ticks int) error
	// published tells when the message of a tick (its time, Unix ms) was
	// published, where that is not the time it carries: the edge's ticks
	// carry their 500 ms boundary, and a core publishes the tick once it
	// has computed it. nil: a message's time is its publication.
	published func(tick int64) (time.Time, bool)
}

// pushClients connects n clients to target from client processes
// (runPushClients), measures the server's memory with them connected, then
// records ticks messages at every client and reports the metrics of
// BenchmarkEdgeSSEClients.
func pushClients(b *testing.B, target pushTarget, n, ticks int) {
	rss := func() (sum int64) {
		for _, pid := range target.pids {
			sum += int64(loadtest.RSS(pid))
		}
		return sum
	}
	before := rss()

	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	procs := pushClientProcs(n, len(target.addrs))
	var children []child
	for p := range procs {
		share := n / procs
		if p == procs-1 {
			share = n - share*(procs-1)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d %s %s %s", pushClientsEnv,
			target.addrs[p%len(target.addrs)], share, ticks, p, target.server, target.ca, target.token))
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
	// As in BenchmarkEdgeSSEClients: the server settles, every client past
	// its head, before its memory is measured; resident memory has no
	// state to wait for, so this is the measurement's window.
	time.Sleep(2 * time.Second) //nolint:forbidigo // a settling window before measuring RSS, not a wait for a state
	after := rss()
	if held, err := target.held(); err != nil || held != n {
		b.Fatalf("the server holds %d clients (%v), want %d", held, err, n)
	}

	// From a tick two seconds ahead, so every process starts at the same
	// one.
	start := (time.Now().UnixMilli()/pushTickMS + 4) * pushTickMS
	for _, c := range children {
		fmt.Fprintf(c.stdin, "%d\n", start)
	}
	var publishing sync.WaitGroup
	defer publishing.Wait() // before the servers stop, on every way out
	if target.publish != nil {
		publishing.Go(func() {
			if err := target.publish(start, ticks); err != nil {
				// The clients would wait for the messages until their
				// read deadline: end them, and the reads below fail.
				b.Error(err)
				for _, c := range children {
					c.cmd.Process.Kill()
				}
			}
		})
	}
	byTick := make([][]float64, ticks)
	for i, c := range children {
		var res pushClientsResult
		if err := json.NewDecoder(c.out).Decode(&res); err != nil {
			b.Fatalf("client process %d: %v", i, err)
		}
		if res.Missing > 0 || len(res.ByTick) != ticks {
			b.Fatalf("client process %d: %d reads missing of %d clients, %d ticks", i, res.Missing, res.Connected, len(res.ByTick))
		}
		for k, row := range res.ByTick {
			byTick[k] = append(byTick[k], row...)
		}
	}
	for _, c := range children {
		c.stdin.Close() // every client has read: they may let go now
	}
	// Signed: a collection between the two readings can leave RSS lower.
	b.ReportMetric(float64(after-before)/float64(n), "rss-B/client")
	// From each message's time, and from its publication: the same for a
	// message stamped as it is published (Centrifugo's), later than the
	// boundary a tick of the edge carries by the cores' work on the tick.
	lag := make([]float64, ticks)
	if target.published != nil {
		for k := range lag {
			tick := start + int64(k)*pushTickMS
			at, ok := target.published(tick)
			if !ok {
				b.Fatalf("tick %d was never published", tick)
			}
			lag[k] = float64(at.Sub(time.UnixMilli(tick))) / float64(time.Millisecond)
		}
		b.ReportMetric(loadtest.Quantile(lag, 0.5), "published-p50-ms")
		b.ReportMetric(loadtest.Quantile(lag, 0.99), "published-p99-ms")
	}
	reportPushLatency(b, byTick, make([]float64, ticks), "")
	last := reportPushLatency(b, byTick, lag, "pub-")
	b.Logf("per tick, publication → last client (ms): %.0f", last)
}

// reportPushLatency reports the latencies byTick, each tick's less its
// offset, as prefix+"p50-ms" and "p99-ms" over every read and
// "last-p50-ms" and "last-p99-ms" over each tick's last read, which it
// returns.
func reportPushLatency(b *testing.B, byTick [][]float64, offset []float64, prefix string) []float64 {
	var all, last []float64
	for k, row := range byTick {
		worst := math.Inf(-1)
		for _, l := range row {
			all = append(all, l-offset[k])
			worst = max(worst, l-offset[k])
		}
		last = append(last, worst)
	}
	b.ReportMetric(loadtest.Quantile(all, 0.5), prefix+"p50-ms")
	b.ReportMetric(loadtest.Quantile(all, 0.99), prefix+"p99-ms")
	b.ReportMetric(loadtest.Quantile(last, 0.5), prefix+"last-p50-ms")
	b.ReportMetric(loadtest.Quantile(last, 0.99), prefix+"last-p99-ms")
	return last
}

// clientTLS is the clients' TLS configuration: trusting the CA file ca
// ("-": plain, nil), TLS 1.3 with X25519 (as BenchmarkTLSHandshakes, what
// both servers share) and HTTP/1.1 alone — a connection per client, as an
// EventSource without HTTP/2 has: TLS's cost per client at its highest.
func clientTLS(ca string) (*tls.Config, error) {
	if ca == "-" {
		return nil, nil
	}
	pool, err := certfile.LoadPool(ca)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519}, NextProtos: []string{"http/1.1"}}, nil
}

// dialClient connects one client, completing the TLS handshake when cfg
// is not nil.
func dialClient(d *net.Dialer, addr string, cfg *tls.Config) (net.Conn, error) {
	conn, err := d.Dial("tcp", addr)
	if err != nil || cfg == nil {
		return conn, err
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// centrifugoChannel is the channel the clients subscribe to and the
// benchmark publishes to.
const centrifugoChannel = "rts"

// centrifugoAPIKey authenticates the benchmark's API calls.
const centrifugoAPIKey = "bench-api-key"

// centrifugoBin is the Centrifugo binary: $SHINDO_CENTRIFUGO, or
// centrifugo on PATH. Its module version is logged with the results
// (`centrifugo version` says v0.0.0 when built by go install).
func centrifugoBin(b *testing.B) string {
	name := cmp.Or(os.Getenv("SHINDO_CENTRIFUGO"), "centrifugo")
	bin, err := exec.LookPath(name)
	if err != nil {
		b.Skipf("no Centrifugo (%s: %v): go install github.com/centrifugal/centrifugo/v6@%s, or set SHINDO_CENTRIFUGO to its binary", name, err, centrifugoVersion)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil || info.Main.Path != "github.com/centrifugal/centrifugo/v6" {
		b.Fatalf("%s is not Centrifugo v6 (%v): the configuration written is v6's", bin, err)
	}
	b.Logf("%s: %s %s, %s", bin, info.Main.Path, info.Main.Version, info.GoVersion)
	return bin
}

func centrifugoClients(b *testing.B, bin, server string, n, nodes int, overTLS bool) {
	ca, cert, key := "-", "", ""
	if overTLS {
		ca, cert, key = issueServerCert(b)
	}
	target := pushTarget{server: server, ca: ca, token: "-"}
	var apis []string
	for range nodes {
		addr, api, cmd := startCentrifugo(b, bin, cert, key)
		target.addrs = append(target.addrs, addr)
		target.pids = append(target.pids, cmd.Process.Pid)
		apis = append(apis, api)
	}
	// The API's own connections are made before the clients' memory is
	// measured, so they are not counted as the clients'.
	api := &http.Client{Timeout: 10 * time.Second}
	target.held = func() (int, error) {
		held := 0
		for _, a := range apis {
			var res struct {
				Channels map[string]struct {
					NumClients int `json:"num_clients"`
				} `json:"channels"`
			}
			if err := centrifugoCall(api, a, "channels", struct{}{}, &res); err != nil {
				return held, err
			}
			held += res.Channels[centrifugoChannel].NumClients
		}
		return held, nil
	}
	if _, err := target.held(); err != nil {
		b.Fatal(err)
	}
	target.publish = func(start int64, ticks int) error {
		errs := make(chan error, len(apis))
		for _, a := range apis {
			go func() { errs <- centrifugoPublish(api, a, start, ticks) }()
		}
		var first error
		for range apis {
			first = cmp.Or(first, <-errs)
		}
		return first
	}
	pushClients(b, target, n, 20)
}

// centrifugoPublish publishes ticks messages to one node, the first at
// start (Unix ms), pushTickMS apart, each with its send time, after
// loadtest.WarmupTicks more.
func centrifugoPublish(c *http.Client, api string, start int64, ticks int) error {
	// Warm-up messages first, before start, which the clients do not
	// record (loadtest.WarmupTicks): the edge's clients have had ticks
	// since they connected, Centrifugo's would otherwise meet their first
	// message in the first recorded tick.
	for k := -loadtest.WarmupTicks; k < ticks; k++ {
		//nolint:forbidigo // publishes at the edge's tick rate, two a second: the pacing is the load under test
		time.Sleep(time.Until(time.UnixMilli(start + int64(k)*pushTickMS)))
		req := struct {
			Channel string          `json:"channel"`
			Data    json.RawMessage `json:"data"`
		}{centrifugoChannel, tickLike(time.Now().UnixMilli())}
		if err := centrifugoCall(c, api, "publish", req, nil); err != nil {
			return fmt.Errorf("publish %d: %w", k, err)
		}
	}
	return nil
}

// tickLike is a message the size and shape of the topology's ticks
// (compatjson.RTS of 5 stations), its time ms last as theirs is.
func tickLike(ms int64) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"station":{`)
	for i := range 5 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"1100%04d":{"pga":0.012,"pgv":0.003,"i":0.12,"I":0.1}`, i)
	}
	fmt.Fprintf(&b, `},"box":{},"int":[],"time":%d}`, ms)
	return json.RawMessage(b.String())
}

// centrifugoCall calls a method of Centrifugo's server HTTP API (POST
// /api/<method>, the key in X-API-Key: its internal/middleware/auth.go)
// and decodes its result into out (nil: discarded).
func centrifugoCall(c *http.Client, api, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, api+"/api/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", centrifugoAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var reply struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %v", method, resp.Status, err)
	}
	if reply.Error != nil {
		return fmt.Errorf("%s: error %d %s", method, reply.Error.Code, reply.Error.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Result, out)
}

// startCentrifugo runs a Centrifugo node serving uni_sse and uni_websocket on a port of its
// own (over TLS with cert and key unless empty) and its API and health on
// another in plain HTTP, so publishing costs the same with TLS or without.
// It returns the clients' address, the API's base URL and the process.
func startCentrifugo(b *testing.B, bin, cert, key string) (string, string, *exec.Cmd) {
	b.Helper()
	port, internal := serverPort(b), serverPort(b)
	// Keys of v6's configuration (its internal/configtypes/types.go and
	// internal/app/mux.go at v6.9.1; centrifugo defaultconfig lists them).
	httpServer := map[string]any{
		"address": "127.0.0.1", "port": port,
		"internal_address": "127.0.0.1", "internal_port": strconv.Itoa(internal),
	}
	if cert != "" {
		// TLS on the clients' port alone.
		httpServer["tls"] = map[string]any{"enabled": true, "cert_pem": cert, "key_pem": key}
		httpServer["tls_external"] = true
	}
	cfg := map[string]any{
		"http_server": httpServer,
		"log":         map[string]any{"level": "error"},
		// Public data, as the edge's streams: anonymous clients subscribe
		// at connect, without tokens. No limit on connections (the
		// default), nor on their rate.
		"client": map[string]any{"allow_anonymous_connect_without_token": true, "connection_limit": 0, "connection_rate_limit": 0},
		"channel": map[string]any{"without_namespace": map[string]any{
			"allow_subscribe_for_client": true, "allow_subscribe_for_anonymous": true}},
		"http_api": map[string]any{"key": centrifugoAPIKey},
		"uni_sse":  map[string]any{"enabled": true},
		// Its unidirectional WebSocket, as the edge's /ws is to a client
		// that only subscribes.
		"uni_websocket": map[string]any{"enabled": true},
		"websocket":     map[string]any{"disabled": true},
		"health":        map[string]any{"enabled": true},
		// Nothing leaves this machine.
		"usage_stats": map[string]any{"disabled": true},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "centrifugo.json")
	writeFile(b, file, string(raw))
	cmd := exec.Command(bin, "--config", file)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	api := fmt.Sprintf("http://127.0.0.1:%d", internal)
	waitHTTP(b, api+"/health", time.Minute)
	return fmt.Sprintf("127.0.0.1:%d", port), api, cmd
}

// serverPort returns a port for a server to listen on that nobody listens
// on now, below the ephemeral range (32768–60999) that the clients' source
// ports and freePort draw on.
func serverPort(b *testing.B) int {
	b.Helper()
	for range 100 {
		p := 20_000 + rand.IntN(12_000)
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p
		}
	}
	b.Fatal("no free port in 20000–31999")
	return 0
}

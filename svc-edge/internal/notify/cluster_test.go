package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"shindo.dev/devkit/faultproxy"
	"shindo.dev/devkit/freeaddr"
)

// The test topology: the real servers in-process on 127.0.0.1 ports — one
// etcd member and one NATS server with JetStream per core (TNN-1, TYO-1),
// separate and unclustered as in production — and edges (Services) with
// their HTTP routes on httptest servers.

const testToken = "app-server-token-0123456789"

type testEnv struct {
	etcd  *etcdNode
	cores []*natsNode
	cli   *clientv3.Client // for looking at the keys
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	return newEnvSync(t, false)
}

// newEnvSync starts the servers; with fsync etcd syncs its log as in
// production (benchmarks), else not (tests: faster, durability of etcd
// itself is not under test). NATS always syncs every write.
func newEnvSync(t testing.TB, fsync bool) *testEnv {
	t.Helper()
	env := &testEnv{etcd: startEtcd(t, fsync)}
	for _, site := range []string{"TNN-1", "TYO-1"} {
		env.cores = append(env.cores, startNATS(t, site))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.etcd.url()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	env.cli = cli
	return env
}

func freePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeaddr.TCP(t))
	n, _ := strconv.Atoi(port)
	return n
}

// etcdNode is the etcd member; it can be stopped and started again on
// the same ports with the same data.
type etcdNode struct {
	t            testing.TB
	dir          string
	client, peer url.URL
	fsync        bool
	e            *embed.Etcd
}

func startEtcd(t testing.TB, fsync bool) *etcdNode {
	t.Helper()
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	n := &etcdNode{t: t, dir: t.TempDir(), client: *client, peer: *peer, fsync: fsync}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *etcdNode) start() {
	n.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "TPE-1"
	cfg.Dir = n.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{n.client}, []url.URL{n.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{n.peer}, []url.URL{n.peer}
	cfg.InitialCluster = cfg.Name + "=" + n.peer.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.UnsafeNoFsync = !n.fsync
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		n.t.Fatalf("etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		n.t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		e.Close()
		n.t.Fatal("etcd not ready within 30s")
	}
	n.e = e
}

func (n *etcdNode) stop() {
	if n.e != nil {
		n.e.Close()
		n.e = nil
	}
}

func (n *etcdNode) url() string { return n.client.String() }

// natsNode is one core's NATS server; it can be stopped and started again
// on the same port with the same store.
type natsNode struct {
	t    testing.TB
	site string
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t testing.TB, site string) *natsNode {
	t.Helper()
	n := &natsNode{t: t, site: site, dir: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *natsNode) start() {
	n.t.Helper()
	srv, err := server.NewServer(&server.Options{
		ServerName: n.site, Host: "127.0.0.1", Port: n.port,
		JetStream: true, JetStreamDomain: strings.ReplaceAll(n.site, "-", "_"), StoreDir: n.dir,
		SyncAlways: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		n.t.Fatalf("nats %s not ready", n.site)
	}
	n.srv, n.port = srv, srv.Addr().(*net.TCPAddr).Port
}

func (n *natsNode) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// name is the core's name in entries: its JetStream domain.
func (n *natsNode) name() string { return strings.ReplaceAll(n.site, "-", "_") }

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (env *testEnv) config(site string) Config {
	cfg := Defaults()
	cfg.Site = site
	for _, c := range env.cores {
		cfg.NATS = append(cfg.NATS, c.url())
	}
	cfg.Etcd = []string{env.etcd.url()}
	cfg.Tokens = []string{testToken}
	cfg.LeaseTTL = 2 * time.Second
	cfg.RepairInterval = 50 * time.Millisecond
	cfg.PublishTimeout = 2 * time.Second
	return cfg
}

// testEdge is a Service with its routes served over HTTP.
type testEdge struct {
	svc  *Service
	http *httptest.Server
	done chan error
}

func testLogger() *slog.Logger {
	if os.Getenv("NOTIFY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (env *testEnv) edge(t testing.TB, site string, change ...func(*Config)) *testEdge {
	t.Helper()
	cfg := env.config(site)
	for _, f := range change {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := New(ctx, cfg, testLogger().With(slog.String("site", site)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc.Register(mux)
	e := &testEdge{svc: svc, http: httptest.NewServer(mux), done: make(chan error, 1)}
	runCtx, stop := context.WithCancel(context.Background())
	go func() { e.done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-e.done; err != nil {
			t.Errorf("Run: %v", err)
		}
		e.http.Close()
		svc.Close()
	})
	return e
}

// kill stops the edge as a crash would: its ownership keys and lease stay
// in etcd until the lease expires.
func (e *testEdge) kill() { e.svc.closeWith(false) }

func newClient(t testing.TB) string {
	t.Helper()
	return "client-" + strings.ToLower(rand.Text())
}

type httpResult struct {
	code int
	body map[string]any
	raw  string
}

func (e *testEdge) do(t testing.TB, path, token, body string) httpResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := httpResult{code: resp.StatusCode, raw: string(raw)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&r.body)
	return r
}

// post posts data for client over HTTP and requires 202.
func (e *testEdge) post(t testing.TB, client, data string) Receipt {
	t.Helper()
	r := e.do(t, "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"data":%s}`, client, data))
	if r.code != http.StatusAccepted {
		t.Fatalf("post: %d %s", r.code, r.raw)
	}
	var rec Receipt
	if err := json.Unmarshal([]byte(r.raw), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// ack acknowledges up to seq over HTTP and requires 200.
func (e *testEdge) ack(t testing.TB, client string, seq uint64) {
	t.Helper()
	r := e.do(t, "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":%d}`, client, seq))
	if r.code != http.StatusOK {
		t.Fatalf("ack %d: %d %s", seq, r.code, r.raw)
	}
}

// recv takes n notifications from ch, failing if they do not come within
// a generous deadline (a hang, not a speed check).
func recv(t testing.TB, ch <-chan Notification, n int) []Notification {
	t.Helper()
	var got []Notification
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed after %d of %d notifications: %v", len(got), n, seqs(got))
			}
			got = append(got, m)
		case <-deadline:
			t.Fatalf("got %d of %d notifications: %v", len(got), n, seqs(got))
		}
	}
	return got
}

// waitClosed drains ch until it closes and returns what it still held.
func waitClosed(t testing.TB, ch <-chan Notification) []Notification {
	t.Helper()
	var got []Notification
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, m)
		case <-deadline:
			t.Fatal("subscription not closed")
		}
	}
}

func seqs(ns []Notification) []uint64 {
	var s []uint64
	for _, n := range ns {
		s = append(s, n.Seq)
	}
	return s
}

func wantSeqs(t testing.TB, got []Notification, want ...uint64) {
	t.Helper()
	if g := seqs(got); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("delivered seqs %v, want %v", g, want)
	}
}

func span(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// keys counts the etcd keys under prefix.
func (env *testEnv) keys(t testing.TB, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := env.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// entryAt reads where a committed notification is stored.
func (env *testEnv) entryAt(t testing.TB, client string, seq uint64) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := env.cli.Get(ctx, entryKey(client, seq))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("entry %d of %s: %v (found %d)", seq, client, err, len(resp.Kvs))
	}
	e, err := parseEntry(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return e.At
}

// tcpProxy puts a fault-injecting proxy in front of target, to cut an
// edge off from a server the way a dead network path would.
func tcpProxy(t testing.TB, target string) *faultproxy.TCP {
	t.Helper()
	p, err := faultproxy.ListenTCP("127.0.0.1:0", target, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

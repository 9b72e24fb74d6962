package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	clientv3 "go.etcd.io/etcd/client/v3"

	"shindo.dev/devkit/faultproxy"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/natsbus"
)

func TestPostDeliverAck(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	a := env.edge(t, "TPE-1")
	client := newClient(t)

	var recs []Receipt
	for i := 1; i <= 3; i++ {
		recs = append(recs, a.post(t, client, fmt.Sprintf(`{"n": %d, "text": "地震"}`, i)))
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) || r.ID == "" || r.Duplicate {
			t.Fatalf("receipt %d: %+v", i, r)
		}
	}
	for _, c := range env.cores {
		if at := env.entryAt(t, client, 1); at[c.name()] == 0 {
			t.Fatalf("seq 1 not stored on %s: %v", c.name(), at)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := a.svc.Subscribe(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch, 3)
	wantSeqs(t, got, 1, 2, 3)
	for i, n := range got {
		if n.ID != recs[i].ID || n.Client != client || n.PostedAt.IsZero() || string(n.Data) != fmt.Sprintf(`{"n":%d,"text":"地震"}`, i+1) {
			t.Fatalf("notification %d: %+v %s", i, n, n.Data)
		}
	}
	var line map[string]any
	if err := json.Unmarshal(got[0].JSON(), &line); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "seq", "client", "time", "data"} {
		if _, ok := line[k]; !ok {
			t.Fatalf("JSON() lacks %q: %s", k, got[0].JSON())
		}
	}

	a.ack(t, client, 2)
	a.post(t, client, `"live"`)
	wantSeqs(t, recv(t, ch, 1), 4)
	cancel()
	waitClosed(t, ch)

	// Reconnect: what was not acknowledged comes again, the rest never.
	ctx, cancel = context.WithCancel(t.Context())
	ch, err = a.svc.Subscribe(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 2), 3, 4)
	a.ack(t, client, 4)
	cancel()
	waitClosed(t, ch)

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	ch, err = a.svc.Subscribe(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	a.post(t, client, `5`)
	wantSeqs(t, recv(t, ch, 1), 5) // 1–4 are acknowledged: not again

	if n := testutil.ToFloat64(a.svc.m.acked); n != 4 {
		t.Fatalf("acked counter %v, want 4", n)
	}
	// Acknowledged payloads leave the streams; only seq 5 stays.
	for _, c := range env.cores {
		poll.Until(t, 20*time.Second, "acknowledged payloads deleted on "+c.site, func() bool { return streamMsgs(t, c) == 1 })
	}
}

func streamMsgs(t testing.TB, n *natsNode) uint64 {
	t.Helper()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), natsbus.Notifications.Stream())
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func TestClientMovesBetweenEdges(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe, khh := env.edge(t, "TPE-1"), env.edge(t, "KHH-1")
	client := newClient(t)

	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	chA, err := tpe.svc.Subscribe(ctxA, client)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		edge := tpe
		if i >= 3 {
			edge = khh // where it is posted does not matter
		}
		edge.post(t, client, fmt.Sprint(i+1))
	}
	wantSeqs(t, recv(t, chA, 5), 1, 2, 3, 4, 5)
	tpe.ack(t, client, 3)

	// The client connects at KHH-1 while TPE-1 still streams to it: KHH-1
	// takes over at once, TPE-1 stops.
	ctxB, cancelB := context.WithCancel(t.Context())
	chB, err := khh.svc.Subscribe(ctxB, client)
	if err != nil {
		t.Fatal(err)
	}
	if extra := waitClosed(t, chA); len(extra) > 0 {
		t.Fatalf("TPE-1 delivered %v after the move", seqs(extra))
	}
	wantSeqs(t, recv(t, chB, 2), 4, 5) // unacknowledged: again; 1–3 never
	khh.ack(t, client, 5)
	for i := 6; i <= 8; i++ {
		tpe.post(t, client, fmt.Sprint(i))
	}
	wantSeqs(t, recv(t, chB, 3), 6, 7, 8)
	khh.ack(t, client, 8)

	// Away from both; posts arrive; back at TPE-1: exactly the new ones.
	cancelB()
	waitClosed(t, chB)
	khh.post(t, client, "9")
	khh.post(t, client, "10")
	ctxA, cancelA = context.WithCancel(t.Context())
	defer cancelA()
	chA, err = tpe.svc.Subscribe(ctxA, client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, chA, 2), 9, 10)

	if n := testutil.ToFloat64(khh.svc.m.takeovers.WithLabelValues("other_edge")); n != 1 {
		t.Fatalf("KHH-1 takeovers from another edge: %v, want 1", n)
	}
	if n := testutil.ToFloat64(tpe.svc.m.lost); n != 1 {
		t.Fatalf("TPE-1 ownership lost: %v, want 1", n)
	}
}

func TestEdgeKilledMidDelivery(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe, khh := env.edge(t, "TPE-1"), env.edge(t, "KHH-1")
	client := newClient(t)

	chA, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		khh.post(t, client, fmt.Sprint(i))
	}
	wantSeqs(t, recv(t, chA, 6), 1, 2, 3, 4, 5, 6)
	tpe.ack(t, client, 4) // 5 and 6 received, not acknowledged
	tpe.kill()
	waitClosed(t, chA)

	// The dead edge's ownership key is still there (its lease has not
	// expired); the client connecting at KHH-1 takes over without waiting.
	resp, err := env.cli.Get(t.Context(), ownerKey(client))
	if err != nil || len(resp.Kvs) != 1 || parseOwner(resp.Kvs[0].Value).Edge != "TPE-1" {
		t.Fatalf("owner key after the kill: %v %v", resp, err)
	}
	chB, err := khh.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, chB, 6), span(5, 10)...)
	khh.ack(t, client, 10)
	khh.post(t, client, "11")
	wantSeqs(t, recv(t, chB, 1), 11)
}

func TestCoreLost(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tnn, tyo := env.cores[0], env.cores[1]
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)

	tpe.post(t, client, "1")
	tpe.post(t, client, "2")

	// TNN-1's NATS goes down: posts are still accepted, stored at TYO-1
	// and marked for repair.
	tnn.stop()
	tpe.post(t, client, "3")
	tpe.post(t, client, "4")
	for seq := uint64(3); seq <= 4; seq++ {
		if at := env.entryAt(t, client, seq); len(at) != 1 || at[tyo.name()] == 0 {
			t.Fatalf("seq %d stored at %v, want TYO-1 only", seq, at)
		}
	}
	if n := env.keys(t, repairPrefix+client+"/"); n != 2 {
		t.Fatalf("%d repair markers, want 2", n)
	}

	// The posting edge goes away; the markers are in etcd, so the other
	// edge copies the payloads to TNN-1 once it is back.
	tpe.svc.Close()
	khh := env.edge(t, "KHH-1")
	tnn.start()
	poll.Until(t, 20*time.Second, "TNN-1 caught up", func() bool { return env.keys(t, repairPrefix+client+"/") == 0 })
	for seq := uint64(1); seq <= 4; seq++ {
		if at := env.entryAt(t, client, seq); len(at) != 2 {
			t.Fatalf("seq %d stored at %v, want both cores", seq, at)
		}
	}

	// Now TYO-1 is lost: TNN-1 alone still has everything acknowledged.
	tyo.stop()
	ch, err := khh.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch, 4)
	wantSeqs(t, got, 1, 2, 3, 4)
	for i, n := range got {
		if string(n.Data) != fmt.Sprint(i+1) {
			t.Fatalf("seq %d data %s", n.Seq, n.Data)
		}
	}
	if n := testutil.ToFloat64(khh.svc.m.repaired); n != 2 {
		t.Fatalf("repaired %v, want 2", n)
	}
	khh.post(t, client, "5") // one core is enough to post
	wantSeqs(t, recv(t, ch, 1), 5)
}

func TestBothCoresDownRefusesPosts(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)
	for _, c := range env.cores {
		c.stop()
	}
	r := tpe.do(t, "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"data":1}`, client))
	if r.code != 503 {
		t.Fatalf("post with no core: %d %s", r.code, r.raw)
	}
	if n := env.keys(t, clientPrefix(client)); n != 0 {
		t.Fatalf("%d keys committed for a refused post", n)
	}
}

func TestConcurrentPostsFromBothEdges(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	edges := []*testEdge{env.edge(t, "TPE-1"), env.edge(t, "KHH-1")}
	client := newClient(t)
	const perWorker, workers = 8, 4
	var mu sync.Mutex
	bySeq := map[uint64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				rec, err := edges[w%2].svc.Post(t.Context(), client, "", json.RawMessage(fmt.Sprintf(`"%d-%d"`, w, i)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := bySeq[rec.Seq]; dup {
					t.Errorf("seq %d given to %s and %s", rec.Seq, prev, rec.ID)
				}
				bySeq[rec.Seq] = rec.ID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	const total = perWorker * workers
	ch, err := edges[1].svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch, total)
	wantSeqs(t, got, span(1, total)...)
	for _, n := range got {
		if bySeq[n.Seq] != n.ID {
			t.Fatalf("seq %d delivered %s, posted %s", n.Seq, n.ID, bySeq[n.Seq])
		}
	}
}

func TestPendingLimit(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1", func(c *Config) { c.MaxPending = 3 })
	client := newClient(t)
	for i := range 3 {
		tpe.post(t, client, fmt.Sprint(i))
	}
	body := fmt.Sprintf(`{"client":%q,"data":4}`, client)
	if r := tpe.do(t, "/v1/notify", testToken, body); r.code != 429 || r.body["error"] == nil {
		t.Fatalf("post beyond the limit: %d %s", r.code, r.raw)
	}
	tpe.ack(t, client, 1)
	if rec := tpe.post(t, client, "4"); rec.Seq != 4 {
		t.Fatalf("after an ack: %+v", rec)
	}
	if r := tpe.do(t, "/v1/notify", testToken, body); r.code != 429 {
		t.Fatalf("post beyond the limit again: %d %s", r.code, r.raw)
	}
	if n := testutil.ToFloat64(tpe.svc.m.posts.WithLabelValues(resultTooMany)); n != 2 {
		t.Fatalf("too_many_pending counted %v, want 2", n)
	}
}

func TestRepeatedIDStoredOnce(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe, khh := env.edge(t, "TPE-1"), env.edge(t, "KHH-1")
	client := newClient(t)
	body := fmt.Sprintf(`{"client":%q,"id":"order-42.shipped","data":{"order":42}}`, client)
	first := tpe.do(t, "/v1/notify", testToken, body)
	again := khh.do(t, "/v1/notify", testToken, body) // the app server retried elsewhere
	if first.code != 202 || again.code != 202 {
		t.Fatalf("posts: %d %s / %d %s", first.code, first.raw, again.code, again.raw)
	}
	if first.body["seq"].(json.Number) != "1" || again.body["seq"].(json.Number) != "1" || again.body["duplicate"] != true || first.body["id"] != "order-42.shipped" {
		t.Fatalf("receipts %s / %s", first.raw, again.raw)
	}
	// The same id for another client is another notification.
	if r := tpe.do(t, "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"id":"order-42.shipped","data":1}`, newClient(t))); r.code != 202 || r.body["duplicate"] != nil {
		t.Fatalf("other client: %d %s", r.code, r.raw)
	}
	tpe.post(t, client, `"next"`)
	ch, err := khh.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch, 2)
	wantSeqs(t, got, 1, 2)
	if got[0].ID != "order-42.shipped" || string(got[0].Data) != `{"order":42}` {
		t.Fatalf("first: %+v %s", got[0], got[0].Data)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)
	tpe.post(t, client, "1")
	tpe.post(t, client, "2")
	tpe.ack(t, client, 1)
	big := fmt.Sprintf(`{"client":%q,"data":"%s"}`, client, strings.Repeat("x", 5000))
	huge := fmt.Sprintf(`{"client":%q,"data":"%0100000d"}`, client, 0)
	cases := []struct {
		name, path, token, body string
		code                    int
		want                    string
	}{
		{"no token", "/v1/notify", "", `{}`, 401, "Bearer"},
		{"wrong token", "/v1/notify", "app-server-token-0123456780", fmt.Sprintf(`{"client":%q,"data":1}`, client), 401, "token"},
		{"empty body", "/v1/notify", testToken, ``, 400, "empty body"},
		{"bad JSON", "/v1/notify", testToken, `{"client":`, 400, "JSON"},
		{"not an object", "/v1/notify", testToken, `[1,2]`, 400, "JSON object"},
		{"two objects", "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"data":1}{}`, client), 400, "exactly one"},
		{"unknown field", "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"date":1}`, client), 400, "unknown field"},
		{"no data", "/v1/notify", testToken, fmt.Sprintf(`{"client":%q}`, client), 400, `"data" is required`},
		{"no client", "/v1/notify", testToken, `{"data":1}`, 400, `"client" is required`},
		{"short client", "/v1/notify", testToken, `{"client":"abc","data":1}`, 400, "16 to 128"},
		{"client with slash", "/v1/notify", testToken, `{"client":"abcdefgh/ijklmnopq","data":1}`, 400, "16 to 128"},
		{"client not a string", "/v1/notify", testToken, `{"client":12345678901234567890,"data":1}`, 400, `"client" must be`},
		{"bad id", "/v1/notify", testToken, fmt.Sprintf(`{"client":%q,"id":"a b","data":1}`, client), 400, "id"},
		{"data too large", "/v1/notify", testToken, big, 413, "at most 4096"},
		{"body too large", "/v1/notify", testToken, huge, 413, "larger than"},
		{"ack bad JSON", "/v1/notify/ack", "", `{"seq":`, 400, "JSON"},
		{"ack no seq", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q}`, client), 400, `"seq" is required`},
		{"ack seq 0", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":0}`, client), 400, "from 1"},
		{"ack seq negative", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":-3}`, client), 400, "whole number"},
		{"ack seq fraction", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1.5}`, client), 400, "whole number"},
		{"ack bad client", "/v1/notify/ack", "", `{"client":"x","seq":1}`, 400, "16 to 128"},
		{"ack beyond the last", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":3}`, client), 409, "last notification for this client is 2"},
		{"ack unknown client", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1}`, newClient(t)), 409, "last notification for this client is 0"},
		{"ack body too large", "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1,"x":"%02000d"}`, client, 0), 413, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := tpe.do(t, c.path, c.token, c.body)
			if r.code != c.code {
				t.Fatalf("status %d, want %d: %s", r.code, c.code, r.raw)
			}
			msg, _ := r.body["error"].(string)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not say %q", msg, c.want)
			}
		})
	}

	// Acknowledgements only move forward; repeating the current one is fine.
	tpe.ack(t, client, 2)
	tpe.ack(t, client, 2)
	r := tpe.do(t, "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1}`, client))
	if r.code != 409 || r.body["acked"].(json.Number) != "2" || !strings.Contains(r.body["error"].(string), "up to 2") {
		t.Fatalf("ack going back: %d %s", r.code, r.raw)
	}
	if _, err := tpe.svc.Subscribe(t.Context(), "short"); !errors.Is(err, ErrBadClient) {
		t.Fatalf("Subscribe with a bad client ID: %v", err)
	}
	if n := testutil.ToFloat64(tpe.svc.m.posts.WithLabelValues(resultUnauthorized)); n != 2 {
		t.Fatalf("unauthorized posts counted %v, want 2", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	good := func() Config {
		c := Defaults()
		c.Site, c.NATS, c.Etcd, c.Tokens = "TPE-1", []string{"nats://127.0.0.1:4222", "nats://127.0.0.1:4223"}, []string{"http://127.0.0.1:2379"}, []string{testToken}
		return c
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no site", func(c *Config) { c.Site = "" }, "site"},
		{"no cores", func(c *Config) { c.NATS = nil }, "NATS URL of every core"},
		{"same core twice", func(c *Config) { c.NATS = []string{"nats://a:1", "nats://a:1"} }, "given twice"},
		{"bad NATS URL", func(c *Config) { c.NATS = []string{"127.0.0.1:4222"} }, "want nats://"},
		{"password hidden", func(c *Config) { c.NATS = []string{"http://u:secret@h:1"} }, "redacted"},
		{"no etcd", func(c *Config) { c.Etcd = nil }, "etcd endpoint"},
		{"bad etcd", func(c *Config) { c.Etcd = []string{"127.0.0.1:2379"} }, "want http://"},
		{"no token", func(c *Config) { c.Tokens = nil }, "token"},
		{"short token", func(c *Config) { c.Tokens = []string{"secret"} }, "16 characters"},
		{"lease too short", func(c *Config) { c.LeaseTTL = time.Second }, "lease TTL"},
		{"lease not whole seconds", func(c *Config) { c.LeaseTTL = 2500 * time.Millisecond }, "whole seconds"},
		{"max data", func(c *Config) { c.MaxData = 1 << 20 }, "max data"},
		{"retention", func(c *Config) { c.Retention = time.Minute }, "retention"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error shows a password: %v", err)
			}
			if _, err := New(t.Context(), cfg, testLogger()); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

func TestNewFailsWithoutEtcd(t *testing.T) {
	t.Parallel()
	cfg := Defaults()
	cfg.Site, cfg.NATS, cfg.Tokens = "TPE-1", []string{"nats://127.0.0.1:1"}, []string{testToken}
	cfg.Etcd = []string{fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	cfg.EtcdTimeout = 300 * time.Millisecond
	_, err := New(t.Context(), cfg, testLogger())
	if err == nil || !strings.Contains(err.Error(), "quorum") {
		t.Fatalf("New without etcd: %v", err)
	}
}

func TestEtcdUnreachable(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	link := tcpProxy(t, env.etcd.client.Host)
	tpe := env.edge(t, "TPE-1", func(c *Config) {
		c.Etcd = []string{"http://" + link.Addr().String()}
		c.EtcdTimeout = 500 * time.Millisecond
	})
	client := newClient(t)
	tpe.post(t, client, "1")
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 1), 1)

	// Cut off from etcd, nothing can be ordered or owned: the subscription
	// ends once the lease cannot be kept alive, posts and acks get 503.
	link.SetBoth(faultproxy.Impairment{Blackhole: true})
	waitClosed(t, ch)
	body := fmt.Sprintf(`{"client":%q,"data":2}`, client)
	if r := tpe.do(t, "/v1/notify", testToken, body); r.code != 503 || r.body["error"] == nil {
		t.Fatalf("post without etcd: %d %s", r.code, r.raw)
	}
	if r := tpe.do(t, "/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1}`, client)); r.code != 503 {
		t.Fatalf("ack without etcd: %d %s", r.code, r.raw)
	}
	if _, err := tpe.svc.Subscribe(t.Context(), client); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Subscribe without etcd: %v", err)
	}
	if tpe.svc.Ready(t.Context()) == nil {
		t.Fatal("ready without etcd")
	}

	link.SetBoth(faultproxy.Impairment{})
	poll.Until(t, 20*time.Second, "ready again", func() bool { return tpe.svc.Ready(t.Context()) == nil })
	ch, err = tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 1), 1) // not acknowledged: again
	tpe.post(t, client, "2")
	wantSeqs(t, recv(t, ch, 1), 2)
}

func TestCoreUnreachable(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tnn, tyo := env.cores[0], env.cores[1]
	link := tcpProxy(t, fmt.Sprintf("127.0.0.1:%d", tnn.port))
	tpe := env.edge(t, "TPE-1", func(c *Config) {
		c.NATS[0] = "nats://" + link.Addr().String()
		c.PublishTimeout = 300 * time.Millisecond
	})
	client := newClient(t)
	tpe.post(t, client, "1")

	// TNN-1 is alive but this edge cannot reach it (a dead path, not a
	// refused connection): the post waits PublishTimeout for it, then is
	// accepted on TYO-1 alone.
	link.SetBoth(faultproxy.Impairment{Blackhole: true})
	tpe.post(t, client, "2")
	if at := env.entryAt(t, client, 2); len(at) != 1 || at[tyo.name()] == 0 {
		t.Fatalf("seq 2 stored at %v, want TYO-1 only", at)
	}
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 2), 1, 2) // read from TYO-1

	link.SetBoth(faultproxy.Impairment{})
	poll.Until(t, 20*time.Second, "TNN-1 caught up", func() bool { return env.keys(t, repairPrefix+client+"/") == 0 })
	if at := env.entryAt(t, client, 2); len(at) != 2 {
		t.Fatalf("seq 2 stored at %v after repair, want both cores", at)
	}
}

func TestReconnectAtSameEdge(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)
	tpe.post(t, client, "1")
	first, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, first, 1), 1)
	// The client reconnects before this edge noticed its old stream died.
	second, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first)
	wantSeqs(t, recv(t, second, 1), 1)
	if n := testutil.ToFloat64(tpe.svc.m.takeovers.WithLabelValues("this_edge")); n != 1 {
		t.Fatalf("takeovers at this edge: %v, want 1", n)
	}

	// A graceful close releases the ownership at once.
	tpe.svc.Close()
	waitClosed(t, second)
	if n := env.keys(t, ownerKey(client)); n != 0 {
		t.Fatalf("owner key left after a graceful close")
	}
}

func TestMissingPayloadSkipped(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)
	tpe.post(t, client, "1")
	tpe.post(t, client, "2")
	// Seq 1's payload disappears from both cores (say, restored from
	// an old backup): delivery skips it instead of stalling the client.
	for _, c := range env.cores {
		nc, err := nats.Connect(c.url())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		st, err := js.Stream(t.Context(), natsbus.Notifications.Stream())
		if err == nil {
			err = st.DeleteMsg(t.Context(), env.entryAt(t, client, 1)[c.name()])
		}
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 1), 2)
	if n := testutil.ToFloat64(tpe.svc.m.missing); n != 1 {
		t.Fatalf("missing %v, want 1", n)
	}
}

func TestCollectorsRegister(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tpe.svc.Collectors()...)
	tpe.post(t, tpe.svc.cfg.Site+"-client-0123456789", "1")
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n == 0 {
		t.Fatalf("gathered %d metrics: %v", n, err)
	}
	if v := testutil.ToFloat64(tpe.svc.Collectors()[len(tpe.svc.Collectors())-2]); v != 2 {
		t.Fatalf("cores ready %v, want 2", v)
	}
}

func TestCoreDownAtStart(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tnn := env.cores[0]
	tnn.stop()
	tpe := env.edge(t, "TPE-1") // starts with one core: it is not needed to start
	client := newClient(t)
	tpe.post(t, client, "1")
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 1), 1)
	tnn.start()
	poll.Until(t, 20*time.Second, "TNN-1 caught up", func() bool { return env.keys(t, repairPrefix+client+"/") == 0 })
	if at := env.entryAt(t, client, 1); at[tnn.name()] == 0 {
		t.Fatalf("seq 1 stored at %v after repair", at)
	}
}

// TestDeliveredLineUnchanged: the SSE data line of a notification is what
// it was when payloads were stored as JSON, byte for byte: HTML characters
// and line separators escaped as encoding/json writes them, other text as
// it came.
func TestDeliveredLineUnchanged(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t) + ".app"
	rec := tpe.post(t, client, "{\"t\": \"<a&b>\", \"s\": \"\u2028\u2029\", \"jp\": \"震度5弱\", \"n\": [1, 2.50, null]}")
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	n := recv(t, ch, 1)[0]
	want := fmt.Sprintf(`{"id":%q,"seq":1,"client":%q,"time":%d,"data":{"t":"\u003ca\u0026b\u003e","s":"\u2028\u2029","jp":"震度5弱","n":[1,2.50,null]}}`,
		rec.ID, client, n.PostedAt.UnixMilli())
	if got := string(n.JSON()); got != want {
		t.Fatalf("data line\n got %s\nwant %s", got, want)
	}
}

// TestOldPayloadUndecodable: a payload stored by the edges before natsbus
// (JSON) is read back as undecodable on each core that holds it — counted,
// logged, and skipped as missing — and delivery goes on with the next.
func TestOldPayloadUndecodable(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	tpe := env.edge(t, "TPE-1")
	client := newClient(t)
	first := tpe.post(t, client, "1")
	tpe.post(t, client, "2")
	// Seq 1 now points at a payload as the previous version stored it.
	old := fmt.Sprintf(`{"id":%q,"client":%q,"time":%d,"data":1}`, first.ID, client, time.Now().UnixMilli())
	at := map[string]uint64{}
	for _, c := range env.cores {
		nc, err := nats.Connect(c.url())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ack, err := js.Publish(t.Context(), natsbus.Notifications.Subject(client), []byte(old))
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
		at[c.name()] = ack.Sequence
	}
	e := entry{ID: first.ID, Posted: time.Now().UnixMilli(), At: at}
	if _, err := env.cli.Put(t.Context(), entryKey(client, 1), e.marshal(), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	ch, err := tpe.svc.Subscribe(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, recv(t, ch, 1), 2)
	if n := testutil.ToFloat64(tpe.svc.m.undecodable); n != float64(len(env.cores)) {
		t.Fatalf("undecodable %v, want one per core", n)
	}
	if n := testutil.ToFloat64(tpe.svc.m.missing); n != 1 {
		t.Fatalf("missing %v, want 1", n)
	}
}

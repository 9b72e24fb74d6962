package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/devkit/tlsrecord"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/peerid"
)

// devCA is the trust bundle of a shindo dev -tls (endpoints.json's dev.ca).
func (e endpoints) devCA(t testing.TB) string {
	t.Helper()
	var dev struct {
		CA string `json:"ca"`
	}
	raw, _ := json.Marshal(e["dev"])
	if err := json.Unmarshal(raw, &dev); err != nil || dev.CA == "" {
		t.Fatalf("endpoints.json names no dev CA (dev.ca): %v", err)
	}
	return dev.CA
}

// operatorClient is an HTTP client as the operator's tools are: under
// -tls trusting the dev CA and presenting the operator's certificate (which
// the internal HTTPS of the data APIs and Patroni's REST APIs ask for),
// plain otherwise.
func (e endpoints) operatorClient(t testing.TB, timeout time.Duration) *http.Client {
	t.Helper()
	var dev struct {
		CA   string `json:"ca"`
		Cert string `json:"operator_cert"`
		Key  string `json:"operator_key"`
	}
	raw, _ := json.Marshal(e["dev"])
	if err := json.Unmarshal(raw, &dev); err != nil {
		t.Fatal(err)
	}
	if dev.CA == "" {
		return &http.Client{Timeout: timeout}
	}
	pool, err := certfile.LoadPool(dev.CA)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(dev.Cert, dev.Key)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// browserTrusting is a home directory whose NSS database, where Chromium
// on Linux keeps the certificates its user added, trusts ca to identify
// servers: the browser then trusts the edges as it would a public CA's
// certificate, no flag turning checks off.
func browserTrusting(t *testing.T, ca string) string {
	t.Helper()
	certutil, err := exec.LookPath("certutil")
	if err != nil {
		t.Fatal("certutil not found: install the Debian package libnss3-tools (deploy/dev/system-packages does)")
	}
	home := t.TempDir()
	db := "sql:" + filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(filepath.Join(home, ".pki", "nssdb"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-N", "-d", db, "--empty-password"},
		{"-A", "-d", db, "-n", "shindo dev CA", "-t", "C,,", "-i", ca},
	} {
		if out, err := exec.Command(certutil, args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %v: %v\n%s", args, err, out)
		}
	}
	return home
}

// TestTLS runs the topology with -tls, as a user would meet it: curl with
// the dev CA streams SSE from an edge over HTTP/2; the edge's plain port
// redirects to HTTPS; a headless Chromium whose only extra trust is the
// dev CA opens the dashboard over HTTPS and sees it live; a station that
// trusts the CA falls back to its wss:// uplink and back to UDP.
func TestTLS(t *testing.T) {
	chromiumPath(t) // fail before starting anything
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl not found: install the Debian package curl (deploy/dev/system-packages does)")
	}
	// The rotation below holds 1,000 streams from this one address.
	d := startDevEnv(t, []string{"SHINDO_EDGE_SSE_MAX_PER_IP=2000"}, "-tls", "-stations", "2", "-simulate=false")
	ca := d.endpoints.devCA(t)
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	if !strings.HasPrefix(tpe, "https://") {
		t.Fatalf("TPE-1's edge at %s under -tls", tpe)
	}
	for _, ws := range []string{d.endpoints.get(t, "TNN-1", "ingest", "ws"), d.endpoints.get(t, "TYO-1", "ingest", "ws")} {
		if !strings.HasPrefix(ws, "wss://") {
			t.Fatalf("an ingest WebSocket at %s under -tls", ws)
		}
	}

	t.Run("curl streams SSE over HTTP/2", func(t *testing.T) {
		headers := filepath.Join(t.TempDir(), "headers")
		cmd := exec.Command(curl, "-sS", "-N", "--http2", "--cacert", ca, "--max-time", "4", "-D", headers, tpe+"/api/v2/trem/rts?sse=1")
		out, err := cmd.Output()
		// curl ends the endless stream at --max-time with exit code 28.
		if ee := (*exec.ExitError)(nil); err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 28) {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		h, _ := os.ReadFile(headers)
		if !strings.HasPrefix(string(h), "HTTP/2 200") {
			t.Errorf("response head %q, want HTTP/2 200", firstLine(string(h)))
		}
		ids := 0
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id: ") {
				ids++
			}
		}
		if ids < 4 {
			t.Errorf("%d events in 4 s over HTTP/2, want a tick every 500 ms:\n%s", ids, out)
		}
		// Without the CA, curl refuses the edge (exit 60: peer
		// certificate cannot be authenticated).
		err = exec.Command(curl, "-sS", "--max-time", "4", "-o", "/dev/null", tpe+"/v1/time").Run()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 60 {
			t.Errorf("curl without the CA: %v, want exit 60", err)
		}
	})

	t.Run("plain HTTP redirects", func(t *testing.T) {
		plain := d.endpoints.get(t, "TPE-1", "edge", "http_plain")
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 5 * time.Second}
		resp, err := c.Get(plain + "/api/v2/trem/rts?sse=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := tpe + "/api/v2/trem/rts?sse=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Errorf("%d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
	})

	t.Run("Chromium opens the dashboard over HTTPS", func(t *testing.T) {
		p := openDashboard(t, tpe+"/", chromedp.Env("HOME="+browserTrusting(t, ca)))
		s := p.waitFor(t, "live ticks over HTTPS", 20*time.Second, func(s pageState) bool { return s.LastTick > 0 && s.Stations == 2 })
		if s.EntranceURL != tpe {
			t.Errorf("stream from %s, want %s", s.EntranceURL, tpe)
		}
		first := s.LastTick
		p.waitFor(t, "the tick to advance", 5*time.Second, func(s pageState) bool { return s.LastTick >= first+1000 })
	})

	t.Run("the WebSocket API over wss://", func(t *testing.T) {
		token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Through the edge's routed data API, as an operator outside the
		// network would: the data API itself serves the network's
		// certificates alone.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tpe+"/v1/clients",
			strings.NewReader(`{"name":"e2e tls","role":"subscriber","topics":["websocket.trem.rts.v1"]}`))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		var created struct {
			Key string `json:"key"`
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&created)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || created.Key == "" {
			t.Fatalf("create a subscriber key through the edge: %s %v", resp.Status, err)
		}
		// A browser's WebSocket: HTTP/1.1 on a connection of its own.
		ws, _, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(tpe, "https")+"/ws", &websocket.DialOptions{
			HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.Write(ctx, websocket.MessageText, []byte(`{"type":"start","token":"`+created.Key+`","topic":["websocket.trem.rts.v1"]}`))
		for seen := map[string]bool{}; !seen["connect"] || !seen["data"]; {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("after %v: %v", seen, err)
			}
			var m struct{ Type, Event string }
			json.Unmarshal(b, &m)
			seen[m.Event] = seen[m.Event] || m.Type == "info"
			seen["data"] = seen["data"] || m.Type == "data"
		}
	})

	t.Run("a station falls back to wss:// and back", func(t *testing.T) {
		testUplinkFailover(t, d, "-ca-file", ca)
	})

	t.Run("gRPC between the services is mutual TLS with roles", func(t *testing.T) {
		testInternalGRPC(t, d, ca)
	})

	t.Run("the data API's REST is mutual TLS with roles", func(t *testing.T) {
		testInternalREST(t, d, ca)
	})

	t.Run("NATS is mutual TLS with roles", func(t *testing.T) {
		testInternalNATS(t, d, ca)
	})

	t.Run("SeedLink over TLS at the edges, mutual TLS to the cores", func(t *testing.T) {
		testSeedLinkTLS(t, d, ca)
	})

	t.Run("etcd and PostgreSQL take certificates only", func(t *testing.T) {
		testInternalStores(t, d, ca)
	})

	t.Run("certificate rotation under 1,000 SSE clients", func(t *testing.T) {
		testRotationUnderLoad(t, d, ca)
	})

	t.Run("silent and stalled handshakes are bounded", func(t *testing.T) {
		testStalledHandshakes(t, d, ca)
	})
}

// testInternalStores: every etcd member's client URL is https:// and
// refuses a client without a certificate, while an edge's certificate
// reads and writes; the metadata database refuses plain text and TLS
// without a certificate, and the operator's URL (endpoints.json
// dev.database_url) connects over TLS 1.3.
func testInternalStores(t *testing.T, d *dev, caFile string) {
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Dir(caFile)
	edgeCert, err := certfile.Load(filepath.Join(tlsDir, "TPE-1-edge.pem"), filepath.Join(tlsDir, "TPE-1-edge-key.pem"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A refused client fails its handshake at once; the deadline only
	// bounds a member that would not answer.
	put := func(endpoint string, cfg *tls.Config) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, TLS: cfg, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, err = cli.Put(pctx, "/e2e/tls", "x")
		return err
	}
	for _, site := range []string{"TNN-1", "TYO-1", "TPE-1"} {
		client := d.endpoints.get(t, site, "etcd", "client")
		if !strings.HasPrefix(client, "https://") {
			t.Errorf("%s etcd at %s under -tls", site, client)
			continue
		}
		if err := put(client, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil {
			t.Errorf("%s etcd: a client without a certificate wrote", site)
		}
		if err := put(client, certfile.MutualClientConfig(edgeCert, pool)); err != nil {
			t.Errorf("%s etcd, an edge's certificate: %v", site, err)
		}
		if code, _ := httpGet(t, d.endpoints.get(t, site, "etcd", "metrics")+"/health"); code != http.StatusOK {
			t.Errorf("%s etcd: the plain health endpoint answered %d", site, code)
		}
	}

	var dev struct {
		DatabaseURL string `json:"database_url"`
	}
	raw, _ := json.Marshal(d.endpoints["dev"])
	if err := json.Unmarshal(raw, &dev); err != nil || dev.DatabaseURL == "" {
		t.Fatalf("endpoints.json names no database URL: %v", err)
	}
	conn, err := pgx.Connect(ctx, dev.DatabaseURL)
	if err != nil {
		t.Fatalf("the operator's database URL: %v", err)
	}
	var version string
	err = conn.QueryRow(ctx, "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl").Scan(&version)
	conn.Close(ctx)
	if err != nil || version != "TLSv1.3" {
		t.Errorf("the operator's connection: TLS %q, %v", version, err)
	}
	u, err := url.Parse(dev.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]url.Values{
		"plain text":          {"sslmode": {"disable"}},
		"TLS, no certificate": {"sslmode": {"verify-full"}, "sslrootcert": {caFile}},
	} {
		u.RawQuery = q.Encode()
		if c, err := pgx.Connect(ctx, u.String()); err == nil {
			c.Close(ctx)
			t.Errorf("the metadata database, %s: connected", name)
		}
	}
}

// testRotationUnderLoad: TPE-1's certificate is replaced with shindo cert
// issue — the operator's tool, from the dev CA — while 1,000 SSE clients
// stream over HTTPS, each on a connection of its own; new connections
// see the new certificate within the edge's look (5 s), and every one of
// the 1,000 goes on getting ticks, none dropped.
func testRotationUnderLoad(t *testing.T, d *dev, caFile string) {
	const clients = 1000
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	type counted struct {
		events atomic.Int64
		ended  atomic.Bool
	}
	streams := make([]*counted, clients)
	var served *x509.Certificate
	for i := range streams {
		s := &counted{}
		streams[i] = s
		resp, err := c.Get(tpe + "/api/v2/trem/rts?sse=1")
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("client %d: %s", i, resp.Status)
		}
		served = resp.TLS.PeerCertificates[0]
		go func() {
			defer s.ended.Store(true)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "id: ") {
					s.events.Add(1)
				}
			}
		}()
	}
	streaming := func(at []int64, what string) {
		t.Helper()
		if !poll.Within(30*time.Second, func() bool {
			for i, s := range streams {
				if s.events.Load() <= at[i] {
					return false
				}
			}
			return true
		}) {
			behind, ended := 0, 0
			for i, s := range streams {
				if s.events.Load() <= at[i] {
					behind++
				}
				if s.ended.Load() {
					ended++
				}
			}
			t.Fatalf("%s: %d of %d clients got no new event within 30 s (%d streams ended)", what, behind, clients, ended)
		}
	}
	streaming(make([]int64, clients), "before the rotation")

	tlsDir := filepath.Dir(caFile)
	cert, key := filepath.Join(tlsDir, "TPE-1-edge.pem"), filepath.Join(tlsDir, "TPE-1-edge-key.pem")
	host, _, _ := net.SplitHostPort(strings.TrimPrefix(tpe, "https://"))
	out, err := exec.Command(filepath.Join(binDir(t), "shindo"), "cert", "issue", "-ca-cert", caFile, "-ca-key", filepath.Join(tlsDir, "ca-key.pem"),
		"-site", "TPE-1", "-role", peerid.Edge, "-host", host+",localhost", "-cert", cert, "-key", key).CombinedOutput()
	if err != nil {
		t.Fatalf("shindo cert issue: %v\n%s", err, out)
	}
	var fresh *x509.Certificate
	poll.Until(t, 15*time.Second, "a new connection gets the new certificate", func() bool {
		nc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer nc.CloseIdleConnections()
		resp, err := nc.Get(tpe + "/v1/time")
		if err != nil {
			return false
		}
		resp.Body.Close()
		fresh = resp.TLS.PeerCertificates[0]
		return !fresh.Equal(served)
	})
	at := make([]int64, clients)
	for i, s := range streams {
		at[i] = s.events.Load()
	}
	streaming(at, "after the rotation")
	for i, s := range streams {
		if s.ended.Load() {
			t.Errorf("client %d's stream ended", i)
		}
	}
	t.Logf("%d streams over the rotation from serial %s to %s, none dropped", clients, served.SerialNumber, fresh.SerialNumber)
}

// tlsSilent is how many connections testStalledHandshakes holds open at
// an edge's HTTPS port without finishing a handshake (SHINDO_TLS_SILENT).
var tlsSilent = envInt("SHINDO_TLS_SILENT", 10_000)

// testStalledHandshakes: 10,000 connections to TPE-1's HTTPS port from
// attacker addresses, a tenth sending the first bytes of a TLS record and
// stalling, the rest nothing. Meanwhile an SSE client streaming over
// HTTPS goes on without a gap, and a new client is served; every one of
// them is closed by the edge's handshake deadline (10 s) and counted.
func testStalledHandshakes(t *testing.T, d *dev, caFile string) {
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	admin := d.endpoints.get(t, "TPE-1", "edge", "admin")
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Get(tpe + "/api/v2/trem/rts?sse=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var longest atomic.Int64 // ms between two events of the stream
	go func() {
		sc := bufio.NewScanner(resp.Body)
		last := time.Now()
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id: ") {
				if gap := time.Since(last).Milliseconds(); gap > longest.Load() {
					longest.Store(gap)
				}
				last = time.Now()
			}
		}
	}()
	before := metricSum(t, admin, "shindo_tls_handshake_failures_total", `listener="edge https"`)
	// Four attacker addresses, each under the edge's per-address budget.
	const addrs = 4
	start := time.Now()
	conns := flood(t, 5, addrs, tlsSilent/addrs, strings.TrimPrefix(tpe, "https://"), func(i int) string {
		if i%10 == 0 {
			return "\x16\x03\x01\x02" // a handshake record's header, its length never sent
		}
		return ""
	})
	opened := time.Since(start)
	if len(conns) < tlsSilent*9/10 {
		t.Fatalf("only %d of %d connections opened", len(conns), tlsSilent)
	}
	// While they are held: a new client is served at once.
	t0 := time.Now()
	r, err := client.Get(tpe + "/v1/time")
	if err != nil {
		t.Fatalf("a new client while %d handshakes stall: %v", len(conns), err)
	}
	r.Body.Close()
	served := time.Since(t0)
	took := closedWithin(t, conns, 20*time.Second)
	counted := metricSum(t, admin, "shindo_tls_handshake_failures_total", `listener="edge https"`) - before
	if counted < float64(len(conns)) {
		t.Errorf("%d stalled handshakes closed, %.0f counted", len(conns), counted)
	}
	if gap := time.Duration(longest.Load()) * time.Millisecond; gap > 2*time.Second {
		t.Errorf("the SSE stream over HTTPS stopped for %s while the handshakes stalled", gap)
	}
	t.Logf("%d silent or stalled connections opened in %s; a new client served in %s; all closed within %s; %.0f handshake failures counted; longest gap of the SSE stream %d ms",
		len(conns), opened.Round(time.Millisecond), served.Round(time.Millisecond), took.Round(100*time.Millisecond), counted, longest.Load())
}

// testInternalNATS: each core's NATS server refuses a client without a
// certificate, and one with the operator's connects; an edge's
// certificate cannot publish a core's snapshot; and the services, which
// all reach NATS under -tls, do their work there — the snapshots the
// core's RTS publishes arrive.
func testInternalNATS(t *testing.T, d *dev, caFile string) {
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	as := func(site, role string) *tls.Config { return devClientTLS(t, caFile, site, role) }
	for _, site := range []string{"TNN-1", "TYO-1"} {
		url := d.endpoints.get(t, site, "nats", "url")
		if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
			nc.Close()
			t.Errorf("%s NATS: a plain-text client connected", site)
		}
		if nc, err := nats.Connect(url, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}), nats.MaxReconnects(0)); err == nil {
			nc.Close()
			t.Errorf("%s NATS: a client without a certificate connected", site)
		}
	}
	url := d.endpoints.get(t, "TNN-1", "nats", "url")
	op, err := nats.Connect(url, nats.Secure(as("dev", peerid.Operator)), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("TNN-1 NATS, the operator's certificate: %v", err)
	}
	defer op.Close()
	snaps, err := op.SubscribeSync(natsbus.Snapshots.Subject("TNN-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snaps.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no snapshot of TNN-1's RTS over NATS under -tls: %v", err)
	}
	violations := make(chan error, 4)
	edge, err := nats.Connect(url, nats.Secure(as("TPE-1", peerid.Edge)), nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatalf("TNN-1 NATS, an edge's certificate: %v", err)
	}
	defer edge.Close()
	edge.Publish(natsbus.Snapshots.Subject("TNN-1"), []byte("forged"))
	edge.Flush()
	select {
	case err := <-violations:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("an edge publishing TNN-1's snapshot: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("an edge published TNN-1's snapshot without a permissions violation")
	}
}

// testInternalGRPC: every service's gRPC port refuses a caller without a
// certificate of the dev CA — plain text, TLS without a certificate, a
// certificate of another CA naming a member — and each call is allowed by
// role: the edge, which subscribes to a core's RTS, may not feed it; the
// other core's ingest may not either; the core's own ingest's certificate
// may, and the operator's reads the stream.
func testInternalGRPC(t *testing.T, d *dev, caFile string) {
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	as := func(site, role string) credentials.TransportCredentials {
		return credentials.NewTLS(devClientTLS(t, caFile, site, role))
	}
	stranger, err := pki.NewCA("not the dev CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := stranger.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: peerid.Ingest}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	impostorCert, err := tls.X509KeyPair(impostor.CertPEM, impostor.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]credentials.TransportCredentials{
		"plain text":                insecure.NewCredentials(),
		"TLS, no certificate":       credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}),
		"another CA's TNN-1/ingest": credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{impostorCert}}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	health := func(addr string, creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for _, port := range []struct{ site, svc string }{
		{"TNN-1", "ingest"}, {"TNN-1", "rts"}, {"TNN-1", "waveform"}, {"TNN-1", "dataapi"}, {"TPE-1", "edge"},
	} {
		addr := d.endpoints.get(t, port.site, port.svc, "grpc")
		for name, creds := range refused {
			if err := health(addr, creds); status.Code(err) != codes.Unavailable {
				t.Errorf("%s %s gRPC (%s), %s: %v, want the connection refused", port.site, port.svc, addr, name, err)
			}
		}
		if err := health(addr, as("dev", peerid.Operator)); err != nil {
			t.Errorf("%s %s gRPC, the operator's certificate: %v", port.site, port.svc, err)
		}
	}

	rts := d.endpoints.get(t, "TNN-1", "rts", "grpc")
	feed := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(rts, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		stream, err := rtsv1.NewRTSServiceClient(conn).Ingest(cctx)
		if err == nil {
			_, err = stream.Recv() // the receiver speaks first, if it lets us in
		}
		return err
	}
	for _, who := range []struct {
		site, role string
		want       codes.Code
	}{
		{"TPE-1", peerid.Edge, codes.PermissionDenied},
		{"TYO-1", peerid.Ingest, codes.PermissionDenied},
		{"TNN-1", peerid.Ingest, codes.OK},
	} {
		if got := status.Code(feed(as(who.site, who.role))); got != who.want {
			t.Errorf("%s/%s feeding TNN-1's RTS: %s, want %s", who.site, who.role, got, who.want)
		}
	}
	conn, err := grpc.NewClient(rts, grpc.WithTransportCredentials(as("dev", peerid.Operator)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sub, err := rtsv1.NewRTSServiceClient(conn).Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "e2e operator"})
	if err == nil {
		_, err = sub.Recv()
	}
	if err != nil {
		t.Errorf("the operator subscribing to TNN-1's RTS: %v", err)
	}
}

// testInternalREST: the data API's REST, which the edges route to, is
// served over mutual TLS: plain text and TLS without a certificate of the
// dev CA get nothing from it, a certificate of a role other than edge or
// operator gets 403, the operator's is served — and the edges' routing
// (with their own certificates) answers the public.
func testInternalREST(t *testing.T, d *dev, caFile string) {
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(url string, cfg *tls.Config) (int, string, error) {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String(), err
	}
	as := func(site, role string) *tls.Config { return devClientTLS(t, caFile, site, role) }
	for _, site := range []string{"TNN-1", "TYO-1"} {
		api := d.endpoints.get(t, site, "dataapi", "http")
		if !strings.HasPrefix(api, "https://") {
			t.Fatalf("%s's data API at %s under -tls", site, api)
		}
		stations := api + "/v1/stations"
		if _, _, err := get(stations, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil {
			t.Errorf("%s data API: served TLS without a client certificate", site)
		}
		if code, body, err := get("http"+strings.TrimPrefix(stations, "https"), nil); err == nil && code != http.StatusBadRequest {
			t.Errorf("%s data API: plain text answered %d %q", site, code, firstLine(body))
		}
		if code, body, err := get(stations, as(site, peerid.Ingest)); err != nil || code != http.StatusForbidden {
			t.Errorf("%s data API, its own ingest's certificate: %d %q %v, want 403", site, code, firstLine(body), err)
		}
		if code, body, err := get(stations, as("dev", peerid.Operator)); err != nil || code != http.StatusOK {
			t.Errorf("%s data API, the operator's certificate: %d %q %v, want 200", site, code, firstLine(body), err)
		}
	}
	for _, edge := range []string{"TPE-1", "KHH-1"} {
		url := d.endpoints.get(t, edge, "edge", "http") + "/v1/stations"
		if code, body, err := get(url, &tls.Config{RootCAs: pool}); err != nil || code != http.StatusOK {
			t.Errorf("%s's routed data API: %d %q %v, want 200", edge, code, firstLine(body), err)
		}
	}
}

// devClientTLS is the client side of mutual TLS with the certificate shindo
// dev -tls issued site's role, beside caFile.
func devClientTLS(t *testing.T, caFile, site, role string) *tls.Config {
	t.Helper()
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(caFile)
	r, err := certfile.Load(filepath.Join(dir, site+"-"+role+".pem"), filepath.Join(dir, site+"-"+role+"-key.pem"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return certfile.MutualClientConfig(r, pool)
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// testSeedLinkTLS: each edge serves SeedLink over TLS (and WebSocket over
// it, wss://) with its public certificate and carries it to a core over
// mutual TLS: the core's HELLO comes back through both. A core's SeedLink
// port is an internal hop: plain text, TLS without a certificate and an
// ingest's certificate get no byte of SeedLink; the operator's does. A
// TLS client whose core's svc-waveform is killed from outside loses its
// connection at once and reconnects through the same entrance.
func testSeedLinkTLS(t *testing.T, d *dev, caFile string) {
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	// hello says HELLO over c and returns the server's two lines, or what
	// came before the connection ended.
	hello := func(c net.Conn) (string, error) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("HELLO\r\n")); err != nil {
			return "", err
		}
		r := bufio.NewReader(c)
		var got string
		for range 2 {
			l, err := r.ReadString('\n')
			got += l
			if err != nil {
				return got, err
			}
		}
		return got, nil
	}
	isHello := func(s string) bool {
		return strings.HasPrefix(s, "SeedLink v4.0 (") && (strings.Contains(s, "\nshindo TNN-1") || strings.Contains(s, "\nshindo TYO-1"))
	}
	for _, edge := range []string{"TPE-1", "KHH-1"} {
		addr := d.endpoints.get(t, edge, "edge", "seedlink_tls")
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("%s SeedLink over TLS: %v", edge, err)
		}
		if got, err := hello(c); err != nil || !isHello(got) {
			t.Errorf("%s SeedLink over TLS: %q %v, want a core's HELLO", edge, got, err)
		}
		// Plain SeedLink stays for the clients that speak nothing else; its
		// hop to the core is mutual TLS too.
		pc, err := net.DialTimeout("tcp", d.endpoints.get(t, edge, "edge", "seedlink"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := hello(pc); err != nil || !isHello(got) {
			t.Errorf("%s plain SeedLink: %q %v, want a core's HELLO", edge, got, err)
		}
	}

	// SeedLink 4 over WebSocket over TLS, as seisplotjs connects.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ws, _, err := websocket.Dial(ctx, "wss://"+d.endpoints.get(t, "TPE-1", "edge", "seedlink_tls")+"/seedlink",
		&websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"SeedLink4.0"}})
	if err != nil {
		t.Fatalf("wss:// through TPE-1: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("HELLO\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.HasPrefix(string(b), "SeedLink v4.0 (") {
		t.Errorf("wss:// through TPE-1: %q %v, want HELLO's first line", b, err)
	}

	checkSeedLinkRecordPerPacket(t, d, pool)

	for _, core := range []string{"TNN-1", "TYO-1"} {
		addr := d.endpoints.get(t, core, "waveform", "seedlink")
		dial := func(cfg *tls.Config) (string, error) {
			d := &net.Dialer{Timeout: 5 * time.Second}
			if cfg == nil {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					return "", err
				}
				return hello(c)
			}
			c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
			if err != nil {
				return "", err
			}
			return hello(c)
		}
		if got, err := dial(nil); err == nil || got != "" {
			t.Errorf("%s SeedLink, plain text: %q %v, want nothing", core, got, err)
		}
		if got, err := dial(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil || got != "" {
			t.Errorf("%s SeedLink, TLS without a certificate: %q %v, want nothing", core, got, err)
		}
		if got, err := dial(devClientTLS(t, caFile, core, peerid.Ingest)); err == nil || got != "" {
			t.Errorf("%s SeedLink, its ingest's certificate: %q %v, want nothing", core, got, err)
		}
		if got, err := dial(devClientTLS(t, caFile, "dev", peerid.Operator)); err != nil || !strings.HasPrefix(got, "SeedLink v4.0 (") {
			t.Errorf("%s SeedLink, the operator's certificate: %q %v, want HELLO", core, got, err)
		}
		// The operator may list the connections; a client through an edge
		// may not (ringserver's trusted clients).
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, devClientTLS(t, caFile, "dev", peerid.Operator))
		if err != nil {
			t.Fatal(err)
		}
		if doc := infoConnections(t, c); !strings.Contains(doc, `"connections":{"client_count":`) {
			t.Errorf("%s INFO CONNECTIONS for the operator: %s", core, doc)
		}
	}
	c, err := net.DialTimeout("tcp", d.endpoints.get(t, "TPE-1", "edge", "seedlink"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if doc := infoConnections(t, c); !strings.Contains(doc, "UNAUTHORIZED") {
		t.Errorf("INFO CONNECTIONS through TPE-1: %s, want UNAUTHORIZED", doc)
	}

	// The svc-waveform a TLS client reached through TPE-1 is killed from
	// outside: the client's connection ends at once, a reconnection
	// through the same entrance gets the other core, and the killed
	// process comes back by itself.
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatal(err)
	}
	tlsAddr := d.endpoints.get(t, "TPE-1", "edge", "seedlink_tls")
	dialTLS := func() *tls.Conn {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tlsAddr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("TPE-1 SeedLink over TLS: %v", err)
		}
		return c
	}
	// servedBy says HELLO and returns the core that answered.
	servedBy := func(c net.Conn, r *bufio.Reader) string {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("HELLO\r\n")); err != nil {
			t.Fatal(err)
		}
		var lines [2]string
		for i := range lines {
			if lines[i], err = r.ReadString('\n'); err != nil {
				t.Fatalf("HELLO through TPE-1's TLS entrance: %q %v", lines, err)
			}
		}
		for _, core := range []string{"TNN-1", "TYO-1"} {
			if strings.Contains(lines[1], "shindo "+core) {
				return core
			}
		}
		t.Fatalf("HELLO through TPE-1's TLS entrance names no core: %q", lines)
		return ""
	}
	held := dialTLS()
	defer held.Close()
	heldR := bufio.NewReader(held)
	site := servedBy(held, heldR)
	target := site + "-waveform"
	old := processes(t, control)[target].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (%d): %v", target, old, err)
	}
	_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := heldR.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the TLS client's connection to the killed %s: read %d bytes (%v), want it ended at once", target, n, err)
	}
	// At once: the other core, unless the supervisor's restart (after
	// 250 ms) was quicker than this client.
	again := dialTLS()
	defer again.Close()
	t.Logf("killed %s, which served a TLS client through TPE-1; its reconnection reached %s", target, servedBy(again, bufio.NewReader(again)))
	poll.Until(t, 45*time.Second, target+" back", func() bool {
		p := processes(t, control)[target]
		return p.State == "running" && p.PID != old && p.PID != 0 && reachable(d.endpoints.get(t, site, "waveform", "seedlink"))
	})
}

// checkSeedLinkRecordPerPacket: a live SeedLink 3 packet reaches a client
// of an edge's TLS entrance as one TLS record — sealed once by the core for
// its mutual-TLS hop and once by the edge — not one record for its 8-byte
// header and another for its 512-byte miniSEED record (what writing the two
// as separate buffers to a tls.Conn gave, lib/writev). The client follows
// one station's PGA channel (MXA) while a probe sends it a frame per tick.
func checkSeedLinkRecordPerPacket(t *testing.T, d *dev, pool *x509.CertPool) {
	t.Helper()
	const frames = 8
	st := d.stations[0]
	var codes seedCodes
	var list struct {
		Stations []seedCodes `json:"stations"`
	}
	resp, err := d.endpoints.operatorClient(t, 10*time.Second).Get(d.endpoints.get(t, "TPE-1", "edge", "http") + "/v1/stations")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("/v1/stations: %v", err)
	}
	for _, c := range list.Stations {
		if c.ID == st.ID {
			codes = c
		}
	}
	if codes.Sta == "" {
		t.Fatalf("/v1/stations lists no %s", st.ID)
	}

	addr := d.endpoints.get(t, "TPE-1", "edge", "seedlink_tls")
	host, _, _ := net.SplitHostPort(addr)
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	counted := &tlsrecord.Counter{Conn: raw}
	c := tls.Client(counted, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	if _, err := fmt.Fprintf(c, "STATION %s %s\r\nSELECT MXA\r\nDATA\r\nEND\r\n", codes.Sta, codes.Net); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if l, err := r.ReadString('\n'); err != nil || l != "OK\r\n" {
			t.Fatalf("SeedLink over TLS through TPE-1: %q %v, want OK", l, err)
		}
	}
	before := counted.Records()

	prb := newProbe(t, st, d.endpoints.get(t, "TNN-1", "ingest", "udp"), d.endpoints.get(t, "TYO-1", "ingest", "udp"))
	// The sender ends before the test does, whichever way it ends: the
	// probe's sockets close with the test, and a send after that would
	// report to a finished test.
	sent := make(chan struct{})
	defer func() { <-sent }()
	go func() {
		defer close(sent)
		for i := range frames {
			prb.send(nextBoundary(), 1, float32(10+i))
		}
	}()
	pkt := make([]byte, 8+512)
	for i := range frames {
		if _, err := io.ReadFull(r, pkt); err != nil {
			t.Fatalf("SeedLink packet %d of %d over TLS: %v", i+1, frames, err)
		}
		if string(pkt[:2]) != "SL" || string(pkt[8+15:8+18]) != "MXA" {
			t.Fatalf("SeedLink packet %d: %q, want an MXA record", i+1, pkt[:8+20])
		}
	}
	// The client's TLS may have read the start of one record more.
	records := counted.Records() - before
	t.Logf("%d live SeedLink packets through TPE-1's TLS entrance came in %d TLS records", frames, records)
	if records > frames+1 {
		t.Errorf("%d live SeedLink packets came in %d TLS records, want one each", frames, records)
	}
}

// infoConnections asks INFO CONNECTIONS in SeedLink 4 over c and returns
// the JSON document of the answer (or the error one).
func infoConnections(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("SLPROTO 4.0\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ReadString('\n'); err != nil || l != "OK\r\n" {
		t.Fatalf("SLPROTO 4.0: %q %v", l, err)
	}
	if _, err := c.Write([]byte("INFO CONNECTIONS\r\n")); err != nil {
		t.Fatal(err)
	}
	h := make([]byte, 17)
	if _, err := io.ReadFull(r, h); err != nil || string(h[:2]) != "SE" {
		t.Fatalf("INFO CONNECTIONS: header %q %v", h, err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(h[4:])+uint32(h[16]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return string(body[h[16]:])
}

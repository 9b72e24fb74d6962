package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/pki"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

// devCA is the trust bundle of a shindo dev -tls (endpoints.json's dev.ca).
func (e endpoints) devCA(t *testing.T) string {
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
	d := startDev(t, "-tls", "-stations", "2", "-simulate=false")
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
		code, body := postJSON(t, d.endpoints.get(t, "TNN-1", "dataapi", "http")+"/v1/clients", strings.TrimSpace(string(token)),
			`{"name":"e2e tls","role":"subscriber","topics":["websocket.trem.rts.v1"]}`)
		var created struct {
			Key string `json:"key"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &created) != nil || created.Key == "" {
			t.Fatalf("create a subscriber key: %d %s", code, body)
		}
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
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
	tlsDir := filepath.Dir(caFile)
	as := func(site, role string) credentials.TransportCredentials {
		r, err := certfile.Load(filepath.Join(tlsDir, site+"-"+role+".pem"), filepath.Join(tlsDir, site+"-"+role+"-key.pem"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return credentials.NewTLS(certfile.MutualClientConfig(r, pool))
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

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

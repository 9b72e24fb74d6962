package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/pki"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

type testPKI struct {
	t   *testing.T
	ca  *pki.CA
	dir string
}

// issue writes a certificate of site/role and returns its files.
func (p testPKI) issue(site, role string) (certFile, keyFile string) {
	p.t.Helper()
	certFile, keyFile, err := p.ca.IssueFiles(p.dir, site, role, "127.0.0.1")
	if err != nil {
		p.t.Fatal(err)
	}
	return certFile, keyFile
}

// mutualCommon is the configuration of a TNN-1 service of role under
// mutual TLS, with the test CA that issued its certificate.
func mutualCommon(t *testing.T, role string) (Common, testPKI) {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{t: t, ca: ca, dir: t.TempDir()}
	common := testCommon()
	common.MTLSCert, common.MTLSKey = p.issue("TNN-1", role)
	common.MTLSCA = filepath.Join(p.dir, "ca.pem")
	return common, p
}

// TestMutualTLS: a service with -mtls-cert serves gRPC only to callers
// with a certificate of the network's CA, and each call only to the roles
// its policy allows — from its own site where the policy says so; a
// method no policy names is closed. Refusals are counted.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	common, p := mutualCommon(t, peerid.RTS)
	ca := p.ca
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, "shindo-test", common, &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Authorize(peerid.Policy{
		"/grpc.health.v1.Health/Check": peerid.AllowSameSite(peerid.Ingest),
		"/grpc.health.v1.Health/List":  peerid.Allow(peerid.Edge),
	})
	svc.SetServingStatus("", true)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	addr := svc.GRPCAddr().String()

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	call := func(cfg *tls.Config, method string) error {
		t.Helper()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		hc := healthpb.NewHealthClient(conn)
		switch method {
		case "Check":
			_, err = hc.Check(cctx, &healthpb.HealthCheckRequest{})
		case "List":
			_, err = hc.List(cctx, &healthpb.HealthListRequest{})
		case "Watch":
			var w healthpb.Health_WatchClient
			if w, err = hc.Watch(cctx, &healthpb.HealthCheckRequest{}); err == nil {
				_, err = w.Recv()
			}
		}
		return err
	}
	as := func(site, role string) *tls.Config {
		cert, key := p.issue(site, role)
		r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return certfile.MutualClientConfig(r, pool)
	}
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		method string
		want   codes.Code
	}{
		{"ingest of the site", as("TNN-1", peerid.Ingest), "Check", codes.OK},
		{"ingest of the other core", as("TYO-1", peerid.Ingest), "Check", codes.PermissionDenied},
		{"edge where only ingest may", as("TPE-1", peerid.Edge), "Check", codes.PermissionDenied},
		{"edge where edges may", as("TPE-1", peerid.Edge), "List", codes.OK},
		{"anyone of the network (the base policy)", as("KHH-1", peerid.Edge), "Watch", codes.OK},
		{"no certificate", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, "Check", codes.Unavailable},
	} {
		if got := status.Code(call(tc.cfg, tc.method)); got != tc.want {
			t.Errorf("%s: %s → %s, want %s", tc.name, tc.method, got, tc.want)
		}
	}

	// A certificate of another CA with the right name is no member.
	other, err := pki.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger := testPKI{t: t, ca: other, dir: t.TempDir()}
	cert, key := stranger.issue("TNN-1", peerid.Ingest)
	r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := status.Code(call(certfile.MutualClientConfig(r, pool), "Check")); got != codes.Unavailable {
		t.Errorf("certificate of another CA: %s", got)
	}
	// A plain-text client gets no gRPC at all.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
	ccancel()
	conn.Close()
	if status.Code(err) != codes.Unavailable {
		t.Errorf("plain-text client: %v", err)
	}
	if got := counterValue(t, svc, "shindo_grpc_calls_denied_total", "/grpc.health.v1.Health/Check"); got != 2 {
		t.Errorf("denied calls of Check counted %v, want 2", got)
	}
}

// TestMutualTLSConfiguration: a certificate of another site than the
// process's, or not of the CA given, is an error at start.
func TestMutualTLSConfiguration(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{t: t, ca: ca, dir: t.TempDir()}
	p.issue("TNN-1", peerid.Edge) // writes the CA's certificate too
	caFile := filepath.Join(p.dir, "ca.pem")
	stranger := testPKI{t: t, ca: other, dir: t.TempDir()}
	for _, tc := range []struct {
		name       string
		issuer     testPKI
		site       string
		wantErrHas string
	}{
		{"another site's", p, "TYO-1", "runs at TNN-1"},
		{"another CA's", stranger, "TNN-1", "does not chain"},
	} {
		c := testCommon()
		c.MTLSCert, c.MTLSKey = tc.issuer.issue(tc.site, peerid.RTS)
		c.MTLSCA = caFile
		_, err := New(context.Background(), "shindo-test", c, &struct{}{})
		if err == nil || !strings.Contains(err.Error(), tc.wantErrHas) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestInternalListener: an Internal HTTP listener under -mtls-cert is
// served over mutual TLS (HTTP/2 by ALPN): no certificate of the network's
// CA, no handshake; a role its rule does not permit gets 403, counted.
// Without -mtls-cert the same listener serves plain HTTP.
func TestInternalListener(t *testing.T) {
	t.Parallel()
	common, p := mutualCommon(t, peerid.DataAPI)
	ca := p.ca
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, "shindo-test", common, &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Proto) })
	addr, err := svc.Listen("data api", "127.0.0.1:0", ok, Internal(peerid.Allow(peerid.Edge, peerid.Operator)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	fetch := func(cfg *tls.Config) (int, string, error) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		resp, err := c.Get("https://" + addr.String() + "/v1/stations")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	as := func(site, role string) *tls.Config {
		cert, key := p.issue(site, role)
		r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return certfile.MutualClientConfig(r, pool)
	}
	if code, body, err := fetch(as("TPE-1", peerid.Edge)); err != nil || code != http.StatusOK || body != "HTTP/2.0" {
		t.Errorf("edge: %d %q %v, want 200 over HTTP/2", code, body, err)
	}
	if code, _, err := fetch(as("dev", peerid.Operator)); err != nil || code != http.StatusOK {
		t.Errorf("operator: %d %v, want 200", code, err)
	}
	code, body, err := fetch(as("TNN-1", peerid.Ingest))
	if err != nil || code != http.StatusForbidden || !strings.Contains(body, "TNN-1/ingest may not call the data api") {
		t.Errorf("ingest: %d %q %v, want 403 naming the caller", code, body, err)
	}
	if _, _, err := fetch(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil {
		t.Error("a client without a certificate was served")
	}
	// Plain text gets net/http's 400 for HTTP at an HTTPS port, and no
	// handler runs.
	if code, body := get(t, "http://"+addr.String()+"/v1/stations"); code != http.StatusBadRequest || strings.Contains(body, "HTTP/") {
		t.Errorf("plain-text request: %d %q, want 400 from the TLS layer", code, body)
	}
	if got := counterValue(t, svc, "shindo_http_requests_denied_total", peerid.Ingest); got != 1 {
		t.Errorf("denied requests of ingest counted %v, want 1", got)
	}

	// The same listener without -mtls-cert: plain HTTP.
	plain, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	paddr, err := plain.Listen("data api", "127.0.0.1:0", ok, Internal(peerid.Allow(peerid.Edge)))
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	pdone := make(chan error, 1)
	go func() { pdone <- plain.Run(pctx) }()
	defer func() {
		pcancel()
		<-pdone
	}()
	if code, body := get(t, "http://"+paddr.String()+"/"); code != http.StatusOK || body != "HTTP/1.1" {
		t.Errorf("plain internal listener: %d", code)
	}
}

package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/service"
)

// tlsEdge runs a whole edge serving HTTPS with a certificate of a test CA,
// a plain-HTTP listener beside it, and one fake core feeding it ticks.
type tlsEdge struct {
	ca              *pki.CA
	roots           *x509.CertPool
	cert, key       string
	httpsURL, plain string
	core            *core
}

func startTLSEdge(t *testing.T, args ...string) *tlsEdge {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &tlsEdge{ca: ca, roots: x509.NewCertPool(), cert: filepath.Join(dir, "edge.pem"), key: filepath.Join(dir, "edge-key.pem"), core: startCore(t)}
	e.roots.AddCert(ca.Cert)
	e.issue(t)
	cfg := DefaultConfig()
	cfg.Common = service.Common{Site: "TPE-1", GRPCAddr: freeaddr.TCP(t), AdminAddr: freeaddr.TCP(t), LogFormat: "json", LogLevel: "error",
		ShutdownTimeout: 3 * time.Second, DependencyWait: 5 * time.Second}
	cfg.HTTPAddr, cfg.PlainAddr = freeaddr.TCP(t), freeaddr.TCP(t)
	args = append([]string{"-rts", e.core.addr, "-tls-cert", e.cert, "-tls-key", e.key}, args...)
	noEnv := func(string) (string, bool) { return "", false }
	if err := conf.Load(&cfg, "EDGE", args, conf.Options{Env: noEnv, Name: Name, Help: io.Discard, Warn: func(string) {}}); err != nil {
		t.Fatal(err)
	}
	e.httpsURL, e.plain = "https://"+cfg.HTTPAddr, "http://"+cfg.PlainAddr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	})
	go func() { // ticks until the test ends
		for ms := int64(500); ctx.Err() == nil; ms += 500 {
			select {
			case e.core.feed <- snapshot(ms):
			case <-ctx.Done():
			}
			//nolint:forbidigo // a core's tick interval, shortened
			time.Sleep(50 * time.Millisecond)
		}
	}()
	poll.UntilNil(t, 10*time.Second, "the edge answers over HTTPS", func() error {
		resp, err := e.client(false).Get(e.httpsURL + "/v1/time")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return e
}

// issue writes a new certificate for the edge into its files.
func (e *tlsEdge) issue(t *testing.T) *x509.Certificate {
	t.Helper()
	is, err := e.ca.Issue(pki.Request{Identity: pki.Identity{Site: "TPE-1", Role: "edge"}, Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := certfile.Write(e.cert, e.key, is.CertPEM, is.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return is.Cert
}

// client trusts the test CA; h2 asks for HTTP/2, otherwise HTTP/1.1.
func (e *tlsEdge) client(h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.roots}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// stream opens the RTS stream and returns its response and the ids of the
// events as they come.
func stream(t *testing.T, c *http.Client, url string) (*http.Response, <-chan string) {
	t.Helper()
	resp, err := c.Get(url + "/api/v2/trem/rts?sse=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ids := make(chan string, 1024)
	go func() {
		defer close(ids)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				ids <- id
			}
		}
	}()
	return resp, ids
}

func nextID(t *testing.T, ids <-chan string) string {
	t.Helper()
	select {
	case id, ok := <-ids:
		if !ok {
			t.Fatal("the stream ended")
		}
		return id
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return ""
}

// TestHTTPS: the edge streams over HTTPS with HTTP/2 and HTTP/1.1, tells
// browsers to stay on HTTPS, refuses TLS below 1.2, and its plain
// listener redirects to it keeping path and query.
func TestHTTPS(t *testing.T) {
	e := startTLSEdge(t, "-hsts-max-age", "8760h")
	for _, h2 := range []bool{true, false} {
		resp, ids := stream(t, e.client(h2), e.httpsURL)
		if want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]; resp.Proto != want {
			t.Errorf("protocol %s, want %s", resp.Proto, want)
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("Strict-Transport-Security %q", got)
		}
		nextID(t, ids)
		nextID(t, ids)
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.roots, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(e.httpsURL + "/v1/time"); err == nil {
		resp.Body.Close()
		t.Error("TLS 1.1 was accepted")
	}

	resp, err := e.client(false).Get(e.plain + "/api/v2/trem/rts?sse=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := e.httpsURL + "/api/v2/trem/rts?sse=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// TestCertificateRotation replaces the edge's certificate files under two
// open streams: they go on, and a new connection sees the new certificate
// without the edge being told (SIGHUP is tested in lib/certfile).
func TestCertificateRotation(t *testing.T) {
	e := startTLSEdge(t)
	_, h2 := stream(t, e.client(true), e.httpsURL)
	_, h1 := stream(t, e.client(false), e.httpsURL)
	nextID(t, h2)
	nextID(t, h1)
	next := e.issue(t)
	poll.Until(t, 15*time.Second, "a new connection gets the new certificate", func() bool {
		c := e.client(false)
		resp, err := c.Get(e.httpsURL + "/v1/time")
		if err != nil {
			return false
		}
		resp.Body.Close()
		c.CloseIdleConnections()
		return resp.TLS.PeerCertificates[0].Equal(next)
	})
	// Both streams still run: each gets events after the rotation, not
	// only those it had buffered before.
	for _, ids := range []<-chan string{h1, h2} {
		for len(ids) > 0 {
			<-ids
		}
	}
	for range 3 {
		nextID(t, h2)
		nextID(t, h1)
	}
}

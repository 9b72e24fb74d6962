package certfile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/atomicfile"
)

type files struct {
	ca        *pki.CA
	cert, key string
	roots     *x509.CertPool
}

func newFiles(t *testing.T) *files {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &files{ca: ca, cert: filepath.Join(dir, "edge.pem"), key: filepath.Join(dir, "edge-key.pem"), roots: x509.NewCertPool()}
	f.roots.AddCert(ca.Cert)
	f.issue(t)
	return f
}

// issue replaces the files with a new certificate and returns it.
func (f *files) issue(t *testing.T) *x509.Certificate {
	t.Helper()
	is, err := f.ca.Issue(pki.Request{Identity: pki.Identity{Site: "TPE-1", Role: "edge"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f.cert, f.key, is.CertPEM, is.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return is.Cert
}

// serve runs a TLS echo server with r's certificate.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ServerConfig(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func (f *files) dial(t *testing.T, addr string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: f.roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echoes(c *tls.Conn) bool {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return false
	}
	b := make([]byte, 4)
	_, err := io.ReadFull(c, b)
	return err == nil && string(b) == "ping"
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReloadKeepsConnections rotates the certificate under an open
// connection: it goes on, a new one gets the new certificate.
func TestReloadKeepsConnections(t *testing.T) {
	f := newFiles(t)
	r, err := Load(f.cert, f.key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	old := f.dial(t, addr)
	first := old.ConnectionState().PeerCertificates[0]
	if !echoes(old) {
		t.Fatal("no echo")
	}
	next := f.issue(t)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := f.dial(t, addr).ConnectionState().PeerCertificates[0]; !got.Equal(next) || got.Equal(first) {
		t.Errorf("a new connection got serial %s, want the new certificate's %s", got.SerialNumber, next.SerialNumber)
	}
	if !echoes(old) {
		t.Error("the connection made before the rotation broke")
	}
	if reloads, failures := r.Counts(); reloads != 1 || failures != 0 {
		t.Errorf("counts %d reloads, %d failures; want 1, 0", reloads, failures)
	}
}

// TestBadFilesKeepTheCertificate: a key that does not match, or a file
// that went missing, is refused and counted; the certificate in use stays.
func TestBadFilesKeepTheCertificate(t *testing.T) {
	f := newFiles(t)
	r, err := Load(f.cert, f.key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	inUse := r.Leaf()
	other, err := f.ca.Issue(pki.Request{Identity: pki.Identity{Site: "X", Role: "y"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(f.key, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Error("a key of another certificate was taken")
	}
	os.Remove(f.cert)
	if err := r.Reload(); err == nil {
		t.Error("a missing file was taken")
	}
	if !r.Leaf().Equal(inUse) {
		t.Error("the certificate in use changed")
	}
	if _, failures := r.Counts(); failures != 2 {
		t.Errorf("%d failures counted, want 2", failures)
	}
	if _, err := Load(f.cert, f.key, quiet()); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// TestRunReloadsOnChangeAndSIGHUP: Run finds changed files by itself, and
// at once on SIGHUP.
func TestRunReloadsOnChangeAndSIGHUP(t *testing.T) {
	// The test's own registration keeps a SIGHUP that arrives before
	// Run's, or after it (the poll's last one is delivered whenever the
	// kernel gets to it, perhaps after the test returned), from ending the
	// process: it stays for the rest of the test binary.
	hold := make(chan os.Signal, 1)
	signal.Notify(hold, syscall.SIGHUP)

	f := newFiles(t)
	r, err := Load(f.cert, f.key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 100*time.Millisecond) }()
	next := f.issue(t)
	poll.Until(t, 5*time.Second, "the changed files loaded", func() bool { return r.Leaf().Equal(next) })
	cancel()
	<-done

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	go func() { done <- r.Run(ctx, time.Hour) }()
	next = f.issue(t)
	poll.Until(t, 5*time.Second, "the files loaded on SIGHUP", func() bool {
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		return r.Leaf().Equal(next)
	})
}

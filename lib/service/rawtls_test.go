package service

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

// TestInternalRawListener: a raw TCP protocol's internal listener (the
// cores' SeedLink) under -mtls-cert admits only callers with a
// certificate of the network whose role the rule permits; a wrong role
// and a caller without a certificate get no byte of the protocol, and
// both are counted. Without -mtls-cert the listener is the plain one.
func TestInternalRawListener(t *testing.T) {
	t.Parallel()
	common, p := mutualCommon(t, peerid.Waveform)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, "shindo-test", common, &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := svc.InternalListener("seedlink", raw, peerid.Allow(peerid.Edge))
	defer ln.Close()
	// The protocol: the server greets, then echoes one line.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
				if _, err := c.Write([]byte("HELLO\n")); err != nil {
					return
				}
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("OK " + line))
			}()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	as := func(site, role string) *tls.Config {
		cert, key := p.issue(site, role)
		r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return certfile.MutualClientConfig(r, pool)
	}
	// talk dials with cfg (nil: plain TCP) and returns what the server
	// said to "hello x" (as plain text, more than a TLS record header).
	talk := func(cfg *tls.Config) (string, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		var c net.Conn
		var err error
		if cfg != nil {
			c, err = tls.DialWithDialer(d, "tcp", raw.Addr().String(), cfg)
		} else {
			c, err = d.Dial("tcp", raw.Addr().String())
		}
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("hello x\n")); err != nil {
			return "", err
		}
		r := bufio.NewReader(c)
		hello, err := r.ReadString('\n')
		if err != nil {
			return hello, err
		}
		ok, err := r.ReadString('\n')
		return hello + ok, err
	}
	if got, err := talk(as("TPE-1", peerid.Edge)); err != nil || got != "HELLO\nOK hello x\n" {
		t.Errorf("an edge: %q %v", got, err)
	}
	// TLS 1.3's client finishes before the server checked its
	// certificate: the refusal shows as the connection's end, with no byte
	// of the protocol.
	if got, err := talk(as("TNN-1", peerid.Ingest)); err == nil || got != "" {
		t.Errorf("an ingest: %q %v, want nothing", got, err)
	}
	if got, err := talk(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil || got != "" {
		t.Errorf("no certificate: %q %v, want nothing", got, err)
	}
	if got, err := talk(nil); err == nil || got != "" {
		t.Errorf("plain text: %q %v, want nothing", got, err)
	}
	// The server counts after its side of the handshake ended, which the
	// client may see first.
	poll.Until(t, 5*time.Second, "one ingest connection denied, two failed handshakes (no certificate, plain text)", func() bool {
		return counterValue(t, svc, "shindo_connections_denied_total", peerid.Ingest) == 1 &&
			counterValue(t, svc, "shindo_tls_handshake_failures_total", "seedlink") == 2
	})

	plain, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if l := plain.InternalListener("seedlink", raw, peerid.Allow(peerid.Edge)); l != raw {
		t.Error("without -mtls-cert the listener is wrapped")
	}
}

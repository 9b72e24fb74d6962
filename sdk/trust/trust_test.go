package trust

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shindo.dev/devkit/pki"
)

// server serves TLS with a certificate for 127.0.0.1 from ca and returns
// its address and certificate.
func server(t *testing.T, ca *pki.CA, hosts ...string) (string, *pki.Issued) {
	t.Helper()
	is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: "ingest"}, Hosts: hosts, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
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
			go func() { defer c.Close(); c.(*tls.Conn).Handshake(); io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String(), is
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestClientConfig(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	good, goodCert := server(t, ca, "127.0.0.1")
	// A server whose certificate names another host, from another CA: only
	// a pin can make it trusted.
	stranger, strangerCert := server(t, other, "example.org")
	pinGood, pinStranger := Pin(goodCert.Cert), Pin(strangerCert.Cert)
	for _, c := range []struct {
		name, caFile, pins, addr string
		ok                       bool
	}{
		{"CA", caFile, "", good, true},
		{"CA and the right pin", caFile, pinGood, good, true},
		{"CA and one of two pins", caFile, pinStranger + "," + pinGood, good, true},
		{"CA and a wrong pin", caFile, pinStranger, good, false},
		{"CA, another's server", caFile, "", stranger, false},
		{"pin alone", "", pinStranger, stranger, true},
		{"a wrong pin alone", "", pinGood, stranger, false},
	} {
		cfg, err := ClientConfig(c.caFile, c.pins)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.addr, cfg)
		if err == nil {
			conn.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("%s: connected %v (%v), want %v", c.name, err == nil, err, c.ok)
		}
		if !c.ok && c.pins != "" && c.caFile == "" && !errors.Is(err, ErrPinMismatch) {
			t.Errorf("%s: %v, want ErrPinMismatch", c.name, err)
		}
	}
	for _, bad := range []string{"sha1//abc", "sha256//not base64!", "sha256//YWJj", ","} {
		if _, err := ClientConfig("", bad); err == nil {
			t.Errorf("pin list %q accepted", bad)
		}
	}
	if _, err := ClientConfig(filepath.Join(t.TempDir(), "none.pem"), ""); err == nil {
		t.Error("a missing CA file accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("no PEM here"), 0o644)
	if _, err := ClientConfig(empty, ""); err == nil {
		t.Error("a CA file without a certificate accepted")
	}
}

func FuzzParsePins(f *testing.F) {
	f.Add("sha256//47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
	f.Add("sha256//a,sha256//b;")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		pins, err := ParsePins(s)
		if err == nil && len(pins) > len(s) {
			t.Fatalf("%d pins from %d bytes", len(pins), len(s))
		}
	})
}

package pki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIssueNamesSiteRoleAndHosts(t *testing.T) {
	ca, err := NewCA("test CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, kt := range []KeyType{ECDSAP256, RSA2048} {
		is, err := ca.Issue(Request{Identity: Identity{Site: "TNN-1", Role: "ingest"}, Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour, Key: kt})
		if err != nil {
			t.Fatal(kt, err)
		}
		if len(is.Cert.URIs) != 1 || is.Cert.URIs[0].String() != "shindo://TNN-1/ingest" {
			t.Errorf("%s: URIs %v", kt, is.Cert.URIs)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		for _, host := range []string{"127.0.0.1", "localhost"} {
			if _, err := is.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s: does not verify for %s: %v", kt, host, err)
			}
		}
		if _, err := is.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: not a client certificate: %v", kt, err)
		}
		if _, err := is.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.org"}); err == nil {
			t.Errorf("%s: verifies for a host it was not issued for", kt)
		}
		if _, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM); err != nil {
			t.Errorf("%s: certificate and key do not pair: %v", kt, err)
		}
	}
	if _, err := ca.Issue(Request{Identity: Identity{Site: "TNN-1", Role: "in gest"}, Validity: time.Hour}); err == nil {
		t.Error("issued for a role with a space")
	}
	if _, err := ca.Issue(Request{Identity: Identity{Site: "TNN-1", Role: "edge"}, Validity: time.Hour, Key: "dsa"}); err == nil {
		t.Error("issued for an unknown key type")
	}
	long, err := ca.Issue(Request{Identity: Identity{Site: "TNN-1", Role: "edge"}, Validity: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if long.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("a certificate outlives its CA: %s after %s", long.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("operator CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Request{Identity: Identity{Site: "A", Role: "b"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", ca.PEM)
	write("ca-key.pem", caKey)
	again, err := LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(ca.Cert) {
		t.Error("the CA read back is another")
	}
	write("leaf.pem", leaf.CertPEM)
	write("leaf-key.pem", leaf.KeyPEM)
	// A leaf's key beside the CA's certificate is refused.
	if _, err := LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "leaf-key.pem")); err == nil || !strings.Contains(err.Error(), "not the key") {
		t.Errorf("a CA with another's key: %v", err)
	}
	if _, err := LoadCA(filepath.Join(dir, "leaf.pem"), filepath.Join(dir, "leaf-key.pem")); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("a leaf as CA: %v", err)
	}
}

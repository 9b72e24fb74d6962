package certcmd

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/pki"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

// operatorCA writes a CA as an operator would hand it over.
func operatorCA(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	ca, err := pki.NewCA("operator CA", 24*time.Hour*400)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := os.WriteFile(certFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestIssueRenewShow: issue writes a pair a service loads, naming the
// site and role; with -renew-within it keeps a certificate that is good
// and renews one for other hosts; show prints identity, hosts and pin.
func TestIssueRenewShow(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey := operatorCA(t, dir)
	cert, key := filepath.Join(dir, "edge.pem"), filepath.Join(dir, "edge-key.pem")
	issue := func(extra ...string) (int, string, string) {
		return runCmd(append([]string{"issue", "-ca-cert", caCert, "-ca-key", caKey, "-site", "TPE-1", "-role", "edge",
			"-cert", cert, "-key", key}, extra...)...)
	}
	code, out, errOut := issue("-host", "edge.tpe.example,192.0.2.10")
	if code != 0 || !strings.Contains(out, "issued "+cert) || !strings.Contains(out, "pin sha256//") {
		t.Fatalf("issue: %d %q %q", code, out, errOut)
	}
	r, err := certfile.Load(cert, key, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("a service cannot load what was issued: %v", err)
	}
	if id, ok := peerid.Of(r.Leaf()); !ok || id != (peerid.Identity{Site: "TPE-1", Role: "edge"}) {
		t.Errorf("identity %v", id)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, %v", fi.Mode().Perm(), err)
	}
	first := r.Leaf()

	code, out, _ = issue("-host", "192.0.2.10,edge.tpe.example", "-renew-within", "720h")
	if code != 0 || !strings.HasPrefix(out, "kept "+cert) {
		t.Errorf("a good certificate was not kept: %d %q", code, out)
	}
	code, out, _ = issue("-host", "edge.tpe.example", "-renew-within", "720h")
	if code != 0 || !strings.Contains(out, "renewing") || !strings.Contains(out, "issued") {
		t.Errorf("a certificate for other hosts was not renewed: %d %q", code, out)
	}
	if code, out, _ = issue("-host", "edge.tpe.example", "-validity", "800h"); code != 0 {
		t.Fatalf("%d %q", code, out)
	}
	code, out, _ = issue("-host", "edge.tpe.example", "-renew-within", "720h")
	if code != 0 || !strings.HasPrefix(out, "kept") {
		t.Errorf("a certificate valid 800h more was not kept with -renew-within 720h: %d %q", code, out)
	}
	code, out, _ = issue("-host", "edge.tpe.example", "-renew-within", "1000h")
	if code != 0 || !strings.Contains(out, "renewing") || !strings.Contains(out, "expires") {
		t.Errorf("a certificate expiring within -renew-within was kept: %d %q", code, out)
	}
	if err := r.Reload(); err != nil || r.Leaf().Equal(first) {
		t.Errorf("the service did not find the renewed certificate: %v", err)
	}

	code, out, _ = runCmd("show", cert)
	for _, want := range []string{"TPE-1/edge", "edge.tpe.example", "operator CA", "sha256//"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show lacks %q: %d %q", want, code, out)
		}
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey := operatorCA(t, dir)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "usage"},
		{[]string{"renew"}, 2, "usage"},
		{[]string{"show"}, 2, "usage"},
		{[]string{"issue", "-site", "TPE-1", "-role", "edge"}, 2, "ca-cert is required"},
		{[]string{"issue", "-ca-cert", caCert, "-ca-key", caKey, "-site", "TPE 1", "-role", "edge", "-cert", "c", "-key", "k"}, 2, "site and role"},
		{[]string{"issue", "-ca-cert", caCert, "-ca-key", caKey, "-site", "TPE-1", "-role", "edge", "-cert", "c", "-key", "k", "-key-type", "dsa"}, 2, "key-type"},
		// The CA's certificate given as its key.
		{[]string{"issue", "-ca-cert", caCert, "-ca-key", caCert, "-site", "TPE-1", "-role", "edge", "-cert", filepath.Join(dir, "c"), "-key", filepath.Join(dir, "k")}, 1, "not a private key"},
		{[]string{"show", filepath.Join(dir, "missing.pem")}, 1, "no such file"},
	} {
		code, _, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: %d %q, want %d saying %q", c.args, code, errOut, c.code, c.says)
		}
	}
}

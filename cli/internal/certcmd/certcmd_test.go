package certcmd

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestBootstrap: bootstrap makes a CA where there is none and issues each
// certificate of -issue into its own directory, with the CA beside it and
// the owner asked for; run again it keeps what is good, issues what names
// other hosts, and after a new CA issues everything again; it never puts
// the CA's key where the services look.
func TestBootstrap(t *testing.T) {
	root := t.TempDir()
	caDir, dir, caCopy := filepath.Join(root, "ca"), filepath.Join(root, "tls"), filepath.Join(root, "host-ca.pem")
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 999, 999 // as the PostgreSQL image's user, where we may give files away
	}
	run := func(issue string) (int, string, string) {
		return runCmd("bootstrap", "-ca-dir", caDir, "-dir", dir, "-ca-copy", caCopy, "-issue", issue,
			"-owner", fmt.Sprintf("tnn1-postgres:%d:%d", uid, gid))
	}
	issue := "tnn1-rts:TNN-1/rts:tnn1-rts,localhost  tnn1-postgres:TNN-1/postgres:tnn1-postgres\n\ttpe1-edge:TPE-1/edge:tpe1-edge,localhost,127.0.0.1"
	code, out, errOut := run(issue)
	if code != 0 || !strings.Contains(out, "made a CA") || !strings.Contains(out, "3 certificates issued, 0 kept") {
		t.Fatalf("first run: %d %q %q", code, out, errOut)
	}
	cas, err := certfile.LoadPool(caCopy)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name string
		id   peerid.Identity
		host string
	}{
		{"tnn1-rts", peerid.Identity{Site: "TNN-1", Role: peerid.RTS}, "tnn1-rts"},
		{"tnn1-postgres", peerid.Identity{Site: "TNN-1", Role: "postgres"}, "tnn1-postgres"},
		{"tpe1-edge", peerid.Identity{Site: "TPE-1", Role: peerid.Edge}, "127.0.0.1"},
	} {
		d := filepath.Join(dir, want.name)
		r, err := certfile.Load(filepath.Join(d, "cert.pem"), filepath.Join(d, "key.pem"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: a service cannot load it: %v", want.name, err)
		}
		if id, ok := peerid.Of(r.Leaf()); !ok || id != want.id {
			t.Errorf("%s names %v, want %v", want.name, id, want.id)
		}
		if err := r.Leaf().VerifyHostname(want.host); err != nil {
			t.Errorf("%s: %v", want.name, err)
		}
		beside, err := certfile.LoadPool(filepath.Join(d, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		for _, pool := range []*x509.CertPool{cas, beside} {
			if _, err := r.Leaf().Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				t.Errorf("%s is not of the CA: %v", want.name, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(caDir, "ca-key.pem")); err != nil {
		t.Errorf("the CA's key: %v", err)
	}
	for _, f := range []string{"cert.pem", "key.pem", "ca.pem"} {
		fi, err := os.Stat(filepath.Join(dir, "tnn1-postgres", f))
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("tnn1-postgres/%s is not %d:%d's: %+v", f, uid, gid, fi.Sys())
		}
	}
	if err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err == nil && strings.Contains(filepath.Base(path), "ca-key") {
			t.Errorf("the CA's key is among the services' files: %s", path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// Again: all kept. With the edge for other hosts: that one issued.
	if code, out, _ := run(issue); code != 0 || !strings.Contains(out, "0 certificates issued, 3 kept") {
		t.Errorf("second run: %d %q", code, out)
	}
	code, out, _ = run(strings.Replace(issue, ",127.0.0.1", ",edge.example", 1))
	if code != 0 || !strings.Contains(out, "1 certificates issued, 2 kept") || !strings.Contains(out, "it is for") {
		t.Errorf("other hosts: %d %q", code, out)
	}
	// A new CA (the old moved away): every certificate is issued again.
	if err := os.Rename(caDir, caDir+".old"); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(issue)
	if code != 0 || !strings.Contains(out, "made a CA") || !strings.Contains(out, "3 certificates issued") || !strings.Contains(out, "not of the CA") {
		t.Errorf("after a new CA: %d %q", code, out)
	}
	// Half a CA is not replaced silently.
	if err := os.Remove(filepath.Join(caDir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(issue); code != 1 || !strings.Contains(errOut, "half a CA") {
		t.Errorf("half a CA: %d %q", code, errOut)
	}

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-ca-dir", caDir, "-dir", caDir, "-issue", "a:TNN-1/rts:"}, "must not be dir"},
		{[]string{"-ca-dir", caDir, "-dir", dir, "-issue", "a:TNN-1/rts"}, "want NAME:SITE/ROLE"},
		{[]string{"-ca-dir", caDir, "-dir", dir, "-issue", "A/b:TNN-1/rts:"}, "name"},
		{[]string{"-ca-dir", caDir, "-dir", dir, "-issue", "a:TNN-1/rts: a:TNN-1/rts:"}, "named twice"},
		{[]string{"-ca-dir", caDir, "-dir", dir, "-issue", "a:TNN_1!/rts:"}, "site and role"},
		{[]string{"-ca-dir", caDir, "-dir", dir, "-issue", "a:TNN-1/rts:", "-owner", "b:1:1"}, "owner"},
		{[]string{"-ca-dir", caDir, "-dir", dir}, "names no certificate"},
	} {
		code, _, errOut := runCmd(append([]string{"bootstrap"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: %d %q, want 2 saying %q", c.args, code, errOut, c.says)
		}
	}
}

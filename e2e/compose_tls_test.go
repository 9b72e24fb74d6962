package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/devkit/pgserver"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

// TLS in docker-compose.yml, where it is the default: the certs service
// issues every certificate into the tls volume, one directory per service,
// and each service reads its own. checkComposeTLS runs `shindo cert
// bootstrap` with the certs service's environment into a directory
// standing for the volumes, then checks each service's files there — the
// identity, the names the others reach it by, the CA — and that no hop is
// left plain; the metadata database's TLS settings run on a real
// PostgreSQL.

// composeTLS are, per program, the role its certificate names and its
// certificate flags: each pair's files must come from the program's own
// directory of the tls volume, as must the CA flag's.
var composeTLS = map[string]struct {
	role  string
	pairs [][2]string
	ca    string
}{
	"shindo-ingest":   {peerid.Ingest, [][2]string{{"mtls-cert", "mtls-key"}, {"ws-tls-cert", "ws-tls-key"}}, "mtls-ca"},
	"shindo-rts":      {peerid.RTS, [][2]string{{"mtls-cert", "mtls-key"}}, "mtls-ca"},
	"shindo-waveform": {peerid.Waveform, [][2]string{{"mtls-cert", "mtls-key"}}, "mtls-ca"},
	"shindo-dataapi":  {peerid.DataAPI, [][2]string{{"mtls-cert", "mtls-key"}}, "mtls-ca"},
	"shindo-edge":     {peerid.Edge, [][2]string{{"mtls-cert", "mtls-key"}, {"tls-cert", "tls-key"}}, "mtls-ca"},
	"shindo nats":     {"nats", [][2]string{{"tls-cert", "tls-key"}}, "tls-ca"},
	"shindo etcd":     {"etcd", [][2]string{{"tls-cert", "tls-key"}}, "tls-ca"},
}

// composeVolumes stands for the volumes and bind mounts of the compose
// project: a path inside a container maps to one below root.
type composeVolumes struct{ root string }

// host is where path inside u's container lies here; false when no mount
// holds it.
func (v composeVolumes) host(svc composeServiceYAML, path string) (string, volumeMount, bool) {
	mnt, rest, ok := svc.Volumes.find(path)
	if !ok {
		return "", mnt, false
	}
	if mnt.bind {
		return filepath.Join(v.root, "bind", filepath.Clean(mnt.source), rest), mnt, true
	}
	return filepath.Join(v.root, "volume", mnt.source, mnt.subpath, rest), mnt, true
}

func checkComposeTLS(t *testing.T, m *composeModel) {
	var certs *composeUnit
	for _, u := range m.units {
		if u.program == "shindo cert bootstrap" {
			certs = u
		}
	}
	if certs == nil {
		t.Fatal("no service runs `shindo cert bootstrap`: who issues the certificates?")
	}
	// Everything waits for the certificates.
	for _, name := range slices.Concat(m.thirdParty, unitNames(m)) {
		svc := m.third[name]
		if u, ok := m.byName[name]; ok {
			svc = u.svc
		}
		if name == certs.name || name == "otel-collector" {
			continue
		}
		if c := svc.DependsOn.condition[certs.name]; c != "service_completed_successfully" {
			t.Errorf("%s: depends_on %s with condition %q; want service_completed_successfully", name, certs.name, c)
		}
	}

	vols := composeVolumes{root: pgReadableDir(t)}
	env := []string{}
	for k, v := range certs.svc.Environment {
		if k == "SHINDO_CERT_CA_DIR" || k == "SHINDO_CERT_DIR" || k == "SHINDO_CERT_CA_COPY" {
			h, mnt, ok := vols.host(certs.svc, v)
			if !ok || mnt.readOnly {
				t.Fatalf("%s: %s %s is not in a writable mount", certs.name, k, v)
			}
			v = h
		}
		env = append(env, k+"="+v)
	}
	// The database's files go to the user the server runs as here (the
	// compose file names the image's).
	owner, err := pgserver.RunAs()
	if err != nil {
		t.Fatal(err)
	}
	want := "tnn1-postgres:999:999"
	if got := certs.svc.Environment["SHINDO_CERT_OWNER"]; got != want {
		t.Errorf("%s: SHINDO_CERT_OWNER %q, want %q (the postgres image's user)", certs.name, got, want)
	}
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SHINDO_CERT_OWNER=") })
	if owner != nil {
		env = append(env, fmt.Sprintf("SHINDO_CERT_OWNER=tnn1-postgres:%d:%d", owner.Uid, owner.Gid))
	}
	for _, dir := range []string{"CA_DIR", "DIR", "CA_COPY"} {
		for _, kv := range env {
			if p, ok := strings.CutPrefix(kv, "SHINDO_CERT_"+dir+"="); ok {
				if dir == "CA_COPY" {
					p = filepath.Dir(p)
				}
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(t), "shindo"), "cert", "bootstrap")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("shindo cert bootstrap with %s's environment: %v\n%s", certs.name, err, out)
	}

	// The CA's key stays in the certs service.
	caVol, _, _ := certs.svc.Volumes.find(certs.svc.Environment["SHINDO_CERT_CA_DIR"])
	for _, name := range slices.Concat(m.thirdParty, unitNames(m)) {
		svc := m.third[name]
		if u, ok := m.byName[name]; ok {
			svc = u.svc
		}
		for _, mnt := range svc.Volumes {
			if name != certs.name && !mnt.bind && mnt.source == caVol.source {
				t.Errorf("%s mounts the CA's volume %s", name, mnt.source)
			}
		}
	}
	// Each service's files: its own directory, its identity, its name.
	for _, u := range m.units {
		spec, ok := composeTLS[u.program]
		if !ok {
			continue
		}
		site, _ := u.value("site")
		if u.program == "shindo etcd" {
			site, _ = u.value("name")
		}
		file := func(flag string) string {
			v, set := u.value(flag)
			if !set || v == "" {
				t.Errorf("%s: -%s is not set: the hop would be plain", u.name, flag)
				return ""
			}
			h, mnt, ok := vols.host(u.svc, v)
			if !ok || mnt.bind || mnt.source != "tls" || mnt.subpath != u.name || !mnt.readOnly {
				t.Errorf("%s: -%s %s is not in its own directory of the tls volume, read-only (subpath %s)", u.name, flag, v, u.name)
				return ""
			}
			return h
		}
		caFile := file(spec.ca)
		if caFile == "" {
			continue
		}
		cas, err := certfile.LoadPool(caFile)
		if err != nil {
			t.Errorf("%s: -%s: %v", u.name, spec.ca, err)
			continue
		}
		for _, pair := range spec.pairs {
			cert, key := file(pair[0]), file(pair[1])
			if cert == "" || key == "" {
				continue
			}
			checkComposeCert(t, u.name, pair[0], cert, key, cas, peerid.Identity{Site: site, Role: spec.role})
		}
	}
	checkComposePlainHops(t, m, vols)
	checkComposeDatabaseTLS(t, m, vols)
}

func unitNames(m *composeModel) []string {
	var out []string
	for _, u := range m.units {
		out = append(out, u.name)
	}
	return out
}

// checkComposeCert: the pair loads as a service loads it, names who, is for
// the compose service's name (how the others reach it) and chains to cas.
func checkComposeCert(t *testing.T, service, flag, cert, key string, cas *x509.CertPool, who peerid.Identity) {
	t.Helper()
	r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Errorf("%s: -%s: %v", service, flag, err)
		return
	}
	leaf := r.Leaf()
	if id, ok := peerid.Of(leaf); !ok || id != who {
		t.Errorf("%s: -%s names %v, want %v", service, flag, id, who)
	}
	if err := leaf.VerifyHostname(service); err != nil {
		t.Errorf("%s: -%s: %v", service, flag, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("%s: -%s is not of the CA beside it: %v", service, flag, err)
	}
}

// checkComposePlainHops: no address a service is given is plain: no
// http:// or ws:// to another service, databases verified with a client
// certificate of the service's own, and the stations trust the CA the
// certs service copies out.
func checkComposePlainHops(t *testing.T, m *composeModel, vols composeVolumes) {
	for _, u := range m.units {
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range u.svc.Environment {
				if !yield(k) {
					return
				}
			}
		}) {
			for _, v := range strings.Split(u.svc.Environment[k], ",") {
				pu, err := url.Parse(strings.TrimSpace(v))
				if err != nil || pu.Host == "" {
					continue
				}
				host := pu.Hostname()
				_, ours := m.byName[host]
				if !ours && !slices.Contains(m.thirdParty, host) {
					continue
				}
				switch pu.Scheme {
				case "http", "ws":
					t.Errorf("%s: %s=%s is plain text", u.name, k, v)
				case "postgres", "postgresql":
					checkComposeDatabaseURL(t, u, k, pu, vols)
				}
			}
		}
	}
	// The fleet trusts the CA the certs service writes for the host.
	for _, u := range m.units {
		if u.program != "shindo sim" {
			continue
		}
		ca, _ := u.value("ca-file")
		got, _, ok := vols.host(u.svc, ca)
		var copyTo string
		for _, c := range m.units {
			if c.program == "shindo cert bootstrap" {
				copyTo, _, _ = vols.host(c.svc, c.svc.Environment["SHINDO_CERT_CA_COPY"])
			}
		}
		if !ok || got != copyTo {
			t.Errorf("%s: -ca-file %s is not the CA the certs service copies out (%s)", u.name, ca, copyTo)
		}
	}
}

func checkComposeDatabaseURL(t *testing.T, u *composeUnit, k string, pu *url.URL, vols composeVolumes) {
	q := pu.Query()
	if q.Get("sslmode") != "verify-full" {
		t.Errorf("%s: %s sslmode %q, want verify-full", u.name, k, q.Get("sslmode"))
	}
	for _, p := range []string{"sslrootcert", "sslcert", "sslkey"} {
		h, mnt, ok := vols.host(u.svc, q.Get(p))
		if !ok || mnt.source != "tls" || mnt.subpath != u.name {
			t.Errorf("%s: %s %s=%q is not in its own directory of the tls volume", u.name, k, p, q.Get(p))
			continue
		}
		if _, err := os.Stat(h); err != nil {
			t.Errorf("%s: %s %s: %v", u.name, k, p, err)
		}
	}
}

// checkComposeDatabaseTLS starts PostgreSQL 15 with the compose file's
// settings for tnn1-postgres (its certificate from the tls volume, the
// authentication rules of deploy/postgres) and connects as a service of
// the compose file does: over TLS 1.3 with its certificate. Plain text and
// TLS without a certificate are refused.
func checkComposeDatabaseTLS(t *testing.T, m *composeModel, vols composeVolumes) {
	pg, ok := m.third["tnn1-postgres"]
	if !ok {
		t.Fatal("no tnn1-postgres")
	}
	settings := map[string]string{}
	args := []string(pg.Command)
	if len(args) == 0 || args[0] != "postgres" {
		t.Fatalf("tnn1-postgres: command %v does not run postgres", args)
	}
	for i := 1; i < len(args); i++ {
		if args[i] != "-c" || i+1 == len(args) {
			t.Fatalf("tnn1-postgres: command %v: want postgres -c name=value…", args)
		}
		i++
		name, value, _ := strings.Cut(args[i], "=")
		if strings.HasSuffix(name, "_file") {
			h, _, ok := vols.host(pg, value)
			if !ok {
				t.Fatalf("tnn1-postgres: %s %s is in no mount", name, value)
			}
			value = h
		}
		settings[name] = value
	}
	for _, want := range []string{"ssl", "ssl_cert_file", "ssl_key_file", "ssl_ca_file", "hba_file", "ident_file"} {
		if _, ok := settings[want]; !ok {
			t.Errorf("tnn1-postgres: no -c %s", want)
		}
	}
	if t.Failed() {
		return
	}
	// The rules come from the repository, through the bind mount.
	for _, f := range []string{"hba_file", "ident_file"} {
		mnt, _, _ := pg.Volumes.find(pgValue(pg, f))
		src := filepath.Join("..", mnt.source, filepath.Base(pgValue(pg, f)))
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(settings[f]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(settings[f], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A service's database URL, pointed at this server.
	var svcURL *url.URL
	var svc *composeUnit
	for _, u := range m.units {
		if v, ok := u.value("database-url"); ok {
			svcURL, _ = url.Parse(v)
			svc = u
			break
		}
	}
	if svcURL == nil {
		t.Fatal("no service has a database-url")
	}
	q := svcURL.Query()
	for _, p := range []string{"sslrootcert", "sslcert", "sslkey"} {
		h, _, _ := vols.host(svc.svc, q.Get(p))
		q.Set(p, h)
	}
	dir := pgReadableDir(t)
	srv, err := pgserver.Start(context.Background(), pgserver.Options{
		DataDir: filepath.Join(dir, "data"),
		// Start connects over TLS with the service's certificate to see
		// the server up: the compose file's rules must admit it.
		TLS: &pgserver.TLS{CA: settings["ssl_ca_file"], ServerCert: settings["ssl_cert_file"], ServerKey: settings["ssl_key_file"],
			ClientCert: q.Get("sslcert"), ClientKey: q.Get("sslkey")},
		Settings: settings,
	})
	if err != nil {
		t.Fatalf("PostgreSQL with tnn1-postgres's settings: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	// As the image makes it (POSTGRES_DB).
	if err := srv.EnsureDatabase(context.Background(), pg.Environment["POSTGRES_DB"]); err != nil {
		t.Fatal(err)
	}
	connect := func(q url.Values) (string, error) {
		u := *svcURL
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
		u.RawQuery = q.Encode()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return "", err
		}
		defer conn.Close(ctx)
		// Admitted: the TLS version, "plain" without.
		var version *string
		if err := conn.QueryRow(ctx, "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&version); err != nil {
			return "", err
		}
		if version == nil {
			return "plain", nil
		}
		return *version, nil
	}
	if v, err := connect(q); err != nil || v != "TLSv1.3" {
		t.Errorf("%s's database-url: %q %v, want TLSv1.3", svc.name, v, err)
	}
	if v, err := connect(url.Values{"sslmode": {"disable"}}); err == nil {
		t.Errorf("plain text was admitted (%s)", v)
	}
	noCert := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {q.Get("sslrootcert")}}
	if v, err := connect(noCert); err == nil {
		t.Errorf("TLS without a client certificate was admitted (%s)", v)
	}
}

// pgValue is the value of -c name=… in tnn1-postgres's command.
func pgValue(pg composeServiceYAML, name string) string {
	for _, a := range pg.Command {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// pgReadableDir is a temporary directory the PostgreSQL server's user
// (when the tests run as root, another user) may enter.
func pgReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "compose-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

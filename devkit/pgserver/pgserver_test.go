package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/devkit/pki"
)

// tempDir returns a directory removed when t ends, which the server's user
// can enter when that is not us (when the tests run as root).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

// start starts a server for t and stops it when t ends.
func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func execSQL(t *testing.T, dsn, sql string) {
	t.Helper()
	if _, err := connect(t, dsn).Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryString(t *testing.T, dsn, sql string) string {
	t.Helper()
	var s string
	if err := connect(t, dsn).QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestDataDirIsReusedAcrossStarts(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	opts := Options{DataDir: filepath.Join(dir, "dev", "data")} // parents created too
	s := start(t, opts)
	execSQL(t, s.DSN(), "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Pid() != 0 {
		t.Errorf("Pid = %d after Stop, want 0", s.Pid())
	}

	s = start(t, opts)
	if got := queryString(t, s.DSN(), "SELECT x::text FROM kept"); got != "42" {
		t.Fatalf("after a stop and a new Start: x = %s, want 42", got)
	}
	if s.DataDir() != opts.DataDir {
		t.Errorf("DataDir = %s, want %s", s.DataDir(), opts.DataDir)
	}
	// The defaults put the socket and the log beside the data directory.
	if want := filepath.Join(dir, "dev", "sock"); s.SocketDir() != want {
		t.Errorf("SocketDir = %s, want %s", s.SocketDir(), want)
	}
	socketDSN := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", s.SocketDir(), s.Port())
	if got := queryString(t, socketDSN, "SELECT count(*)::text FROM kept"); got != "1" {
		t.Errorf("over the unix socket: %s rows, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "dev", "postgres.log")); err != nil {
		t.Errorf("default log: %v", err)
	}
}

func TestDurableDecidesSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		durable bool
		want    string
	}{
		{"durable", true, "on"},
		{"fast", false, "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, Options{
				DataDir:  filepath.Join(tempDir(t), "data"),
				Durable:  tc.durable,
				Settings: map[string]string{"work_mem": "7MB"},
			})
			for _, setting := range []string{"fsync", "full_page_writes"} {
				if got := queryString(t, s.DSN(), "SHOW "+setting); got != tc.want {
					t.Errorf("%s = %s, want %s", setting, got, tc.want)
				}
			}
			if got := queryString(t, s.DSN(), "SHOW work_mem"); got != "7MB" {
				t.Errorf("work_mem = %s, want the 7MB of Settings", got)
			}
		})
	}
}

func TestKillAndRestartKeepCommittedData(t *testing.T) {
	t.Parallel()
	s := start(t, Options{DataDir: filepath.Join(tempDir(t), "data"), Durable: true})
	ctx := context.Background()
	execSQL(t, s.DSN(), "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)")
	var backend int
	if err := connect(t, s.DSN()).QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	done := s.Done()
	select {
	case <-done:
		t.Fatal("Done closed while the server runs")
	default:
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done still open after Kill returned")
	}
	if s.Pid() != 0 {
		t.Errorf("Pid = %d after Kill, want 0", s.Pid())
	}
	if anyAlive([]int{backend}) {
		t.Errorf("backend %d still running after Kill", backend)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(cctx, s.DSN()); err == nil {
		c.Close(ctx)
		t.Fatal("server accepts connections after Kill")
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Error("Restart of a running server succeeded")
	}
	select {
	case <-s.Done():
		t.Fatal("Done closed after Restart")
	default:
	}
	if got := queryString(t, s.DSN(), "SELECT count(*)::text FROM t"); got != "2" {
		t.Fatalf("after a kill and crash recovery: %s rows, want the 2 committed", got)
	}

	// A postmaster that dies by itself, as a supervisor would see it.
	if err := syscall.Kill(s.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("Done still open 15 s after the postmaster was killed")
	}
	if s.Pid() != 0 {
		t.Errorf("Pid = %d after the postmaster died, want 0", s.Pid())
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, s.DSN(), "SELECT count(*)::text FROM t"); got != "2" {
		t.Fatalf("after a crash of the postmaster: %s rows, want the 2 committed", got)
	}
}

func TestLongDataDirGetsTemporarySocketDir(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(tempDir(t), strings.Repeat("d", maxSocketDir), "data")
	s := start(t, Options{DataDir: dataDir})
	first := s.SocketDir()
	if len(first) > maxSocketDir || strings.HasPrefix(first, filepath.Dir(dataDir)) {
		t.Fatalf("SocketDir = %s, want a short temporary directory", first)
	}
	socketDSN := func() string {
		return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", s.SocketDir(), s.Port())
	}
	execSQL(t, socketDSN(), "SELECT 1")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("temporary socket dir %s left behind after Stop: %v", first, err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	execSQL(t, socketDSN(), "SELECT 1")
}

func TestEnsureDatabaseIsIdempotent(t *testing.T) {
	t.Parallel()
	s := start(t, Options{DataDir: filepath.Join(tempDir(t), "data")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"shindo_meta", "Dev meta-2"} {
		for range 2 {
			if err := s.EnsureDatabase(ctx, name); err != nil {
				t.Fatalf("EnsureDatabase(%q): %v", name, err)
			}
		}
		if got := queryString(t, s.DatabaseDSN(name), "SELECT current_database()"); got != name {
			t.Errorf("DatabaseDSN(%q) reaches database %q", name, got)
		}
	}
}

// TestStartFailures starts servers that cannot start, then one that can, on
// one data directory: a failed start must leave it usable.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "data")
	if err := start(t, Options{DataDir: dir}).Stop(); err != nil { // initdb once
		t.Fatal(err)
	}

	startErr := func(opts Options) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Start(ctx, opts)
		if err == nil {
			s.Stop()
			t.Fatal("Start succeeded")
		}
		return err
	}

	err := startErr(Options{DataDir: dir, Settings: map[string]string{"shared_buffers": "lots"}})
	if !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), `"shared_buffers"`) {
		t.Errorf("bad setting: %v\nwant the exit and the log line naming shared_buffers", err)
	}

	taken, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	err = startErr(Options{DataDir: dir, Port: port})
	if !errors.Is(err, errPortInUse) || !strings.Contains(err.Error(), fmt.Sprintf("port %d", port)) {
		t.Errorf("port taken: %v", err)
	}

	s := start(t, Options{DataDir: dir})
	err = startErr(Options{DataDir: dir})
	if !strings.Contains(err.Error(), "in use by another postgres") {
		t.Errorf("second server on a data dir: %v", err)
	}
	if s.Pid() == 0 {
		t.Error("the running server died when a second one failed to start")
	}
}

func TestBadOptionsAreExplained(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	file := filepath.Join(dir, "file")
	junk := filepath.Join(dir, "junk")
	future := filepath.Join(dir, "future")
	for path, content := range map[string]string{file: "", filepath.Join(junk, "x"): "", filepath.Join(future, "PG_VERSION"): "99\n"} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no data dir", Options{}, "Options.DataDir"},
		{"data dir is a file", Options{DataDir: file}, "is a file, not a directory"},
		{"data dir holds something else", Options{DataDir: junk}, "holds no PostgreSQL cluster"},
		{"data dir of a newer major", Options{DataDir: future}, "belongs to PostgreSQL 99, newer than"},
		{"no binaries", Options{DataDir: filepath.Join(dir, "new"), BinDir: dir}, "install the PostgreSQL server"},
		{"managed setting", Options{DataDir: filepath.Join(dir, "new"), Settings: map[string]string{"port": "1"}}, "Options.Port"},
		{"long socket dir", Options{DataDir: filepath.Join(dir, "new"), SocketDir: "/" + strings.Repeat("s", 100)}, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(context.Background(), tc.opts)
			if err == nil {
				s.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestDSNHost(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		"127.0.0.1":           "127.0.0.1",
		"*":                   "127.0.0.1",
		"0.0.0.0":             "127.0.0.1",
		"::":                  "::1",
		"localhost, 10.0.0.1": "localhost",
	} {
		if got := dsnHost(listen); got != want {
			t.Errorf("dsnHost(%q) = %q, want %q", listen, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	if got := tail([]byte("a\nb\nc\n"), 2); got != "b\nc" {
		t.Errorf("tail = %q", got)
	}
	if got := tail([]byte("a"), 2); got != "a" {
		t.Errorf("tail = %q", got)
	}
}

// TestTLS: a server with Options.TLS refuses TCP connections without TLS
// and without a certificate of its CA, and its DSN connects with the
// client certificate given, over TLS.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := serverCredential()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode, owner bool) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, mode); err != nil {
			t.Fatal(err)
		}
		if owner {
			if err := chownTo(path, cred); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	issue := func(role string, owner bool) (string, string) {
		is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: role}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return write(role+".pem", is.CertPEM, 0o644, owner), write(role+"-key.pem", is.KeyPEM, 0o600, owner)
	}
	tls := &TLS{CA: write("ca.pem", ca.PEM, 0o644, false)}
	tls.ServerCert, tls.ServerKey = issue("postgres", true)
	tls.ClientCert, tls.ClientKey = issue("operator", false)
	s := start(t, Options{DataDir: filepath.Join(dir, "data"), TLS: tls})
	if got := queryString(t, s.DSN(), "SELECT CASE WHEN ssl THEN version ELSE 'none' END FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); got != "TLSv1.3" {
		t.Errorf("the DSN's connection: TLS %q", got)
	}
	u, err := url.Parse(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	for name, query := range map[string]url.Values{
		"plain text":          {"sslmode": {"disable"}},
		"TLS, no certificate": {"sslmode": {"verify-full"}, "sslrootcert": {tls.CA}},
	} {
		u.RawQuery = query.Encode()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, u.String())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			t.Errorf("%s: connected", name)
		}
	}
}

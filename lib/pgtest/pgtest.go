// Package pgtest runs throwaway PostgreSQL servers for tests: the real
// server, started from its binaries on a free port, with settings that trade
// durability for speed (fsync off), and stopped when the test ends.
//
// Most test binaries share one server and give every test its own database:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.Shared(t).NewDatabase(t) // created now, dropped at cleanup
//		…
//	}
//
// A test that stops, kills or restarts the server (failover, reconnection)
// starts its own with Start.
//
// The binaries are found in $SHINDO_PG_BIN, else the newest
// /usr/lib/postgresql/*/bin, else PATH. initdb refuses to run as root, so
// when the tests run as root the server runs as the OS user "postgres" (or
// $SHINDO_PG_USER), which then owns the server's temporary directory.
//
// Servers run with fsync off: fast, and safe against everything but an OS
// crash, which a test does not survive anyway. On Linux a server also
// shuts down if the test binary dies without stopping it (a test timeout).
// Nothing is printed on success; failures carry the end of the server log.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Timeouts are generous: a loaded CI machine running many test binaries at
// once can take seconds to initdb or to start a server.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
)

// serverSettings make the server fast and quiet rather than durable against
// an OS crash: a test server's data is worth nothing after the test. Commits
// still reach the kernel before they are acknowledged (synchronous_commit
// stays on), so Kill, which kills processes and not the machine, loses no
// acknowledged write. max_connections leaves room for many parallel tests,
// each with a small pool.
var serverSettings = []string{
	"fsync=off",
	"full_page_writes=off",
	"max_connections=300",
	"shared_buffers=32MB",
	"listen_addresses=127.0.0.1",
	"unix_socket_permissions=0777",
	"log_min_messages=warning",
	"log_min_error_statement=panic",
	"log_checkpoints=off",
	"autovacuum=off",
}

// Server is one running (or stopped) PostgreSQL server with its own data
// directory. Its superuser is "postgres", authenticated by trust.
type Server struct {
	bin     string // directory of initdb and postgres
	cred    *syscall.Credential
	base    string // temporary directory holding everything below
	data    string
	sockDir string
	logPath string
	port    int
	major   int // PostgreSQL major version

	mu   sync.Mutex
	proc *process // nil while stopped

	dbSeq atomic.Int64
}

// process is one run of the postmaster.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the postmaster has exited
	err  error         // its exit status, valid after done
}

// Start starts a new server for tb on a free port and stops it and removes
// its files when tb ends. It fails tb, with the server log, if the server
// cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// StartServer starts a new server outside of any test; the caller must
// Close it. Start is the usual way in a test.
func StartServer() (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	// A short base path: the server's unix socket path must fit in 107 bytes.
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	s := &Server{
		bin:     bin,
		cred:    cred,
		base:    base,
		data:    filepath.Join(base, "data"),
		sockDir: filepath.Join(base, "sock"),
		logPath: filepath.Join(base, "server.log"),
	}
	if err := s.init(); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	// Another process may grab the free port between our probe and the
	// server's bind; a new port is then tried.
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			os.RemoveAll(base)
			return nil, err
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		if attempt == 2 || !strings.Contains(s.LogTail(), "could not bind") {
			os.RemoveAll(base)
			return nil, err
		}
	}
}

func (s *Server) init() error {
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	if s.cred != nil {
		for _, dir := range []string{s.base, s.sockDir} {
			if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return fmt.Errorf("hand %s to the server's user: %w", dir, err)
			}
		}
	}
	cmd := exec.Command(filepath.Join(s.bin, "initdb"),
		"-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.Dir = s.base // the server's user may not be able to enter ours
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		hint := ""
		if s.cred != nil {
			hint = fmt.Sprintf(" (running as uid %d: every directory above %s must be searchable by it)", s.cred.Uid, s.base)
		}
		return fmt.Errorf("initdb: %v%s\n%s", err, hint, tail(out, 30))
	}
	version, err := os.ReadFile(filepath.Join(s.data, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	s.major, _ = strconv.Atoi(strings.TrimSpace(string(version)))
	return nil
}

// start runs the postmaster and waits until it accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("server already running")
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	args := []string{"-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.sockDir}
	for _, setting := range serverSettings {
		args = append(args, "-c", setting)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.base
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		// Its own process group: a Ctrl-C meant for the test binary must
		// not reach the server behind our back; it stops when told to, or
		// when the test binary dies.
		Setpgid: true,
	}
	setDeathSignal(cmd.SysProcAttr)
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends the parent-death signal when the thread that forked
		// the child exits, not the process: keep this goroutine on its
		// thread for the child's life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	if err := s.waitReady(p); err != nil {
		stopProcess(p, syscall.SIGQUIT)
		return fmt.Errorf("%w\nserver log, last lines:\n%s", err, s.LogTail())
	}
	s.proc = p
	return nil
}

// waitReady polls until the server accepts a connection, it exits, or the
// start timeout passes.
func (s *Server) waitReady(p *process) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.tryConnect(ctx, p)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited while starting: %v", p.err)
		default:
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited while starting: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("postgres not accepting connections after %s: %v", startTimeout, err)
		case <-tick.C:
		}
	}
}

// tryConnect makes one connection attempt, given up if the server exits
// meanwhile (something else may hold the port and never answer).
func (s *Server) tryConnect(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// Stop shuts the server down cleanly (SIGINT, PostgreSQL's fast shutdown),
// killing it if it has not exited within 15 s. Its data stays, so Restart can
// start it again. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	return s.halt(syscall.SIGINT)
}

// Kill kills the server and all its backends with SIGKILL, like a crash or a
// power cut: clients see their connections drop, and Restart runs crash
// recovery. Killing a stopped server does nothing.
func (s *Server) Kill() error {
	return s.halt(syscall.SIGKILL)
}

func (s *Server) halt(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	err := stopProcess(s.proc, sig)
	s.proc = nil
	return err
}

// stopProcess stops the postmaster, with SIGINT (fast shutdown) or by
// killing it and its children, and waits for them all to exit, killing them
// after the stop timeout.
func stopProcess(p *process, sig syscall.Signal) error {
	pid := p.cmd.Process.Pid
	var orphans []int
	if sig == syscall.SIGKILL {
		orphans = killServer(pid)
	} else {
		_ = syscall.Kill(pid, sig)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-p.done:
	case <-timer.C:
		orphans = killServer(pid)
		<-p.done
		err = fmt.Errorf("postgres did not stop within %s and was killed", stopTimeout)
	}
	// Killed backends outlive the postmaster by a moment, and a restart
	// must not find them still attached to the shared memory.
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	deadline := time.Now().Add(stopTimeout)
	for anyAlive(orphans) {
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres backends %v still running %s after SIGKILL", orphans, stopTimeout)
		}
		<-poll.C
	}
	return err
}

// Restart starts a stopped or killed server again, on the same port and
// data directory.
func (s *Server) Restart() error {
	if err := s.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Close stops the server and removes its files.
func (s *Server) Close() error {
	err := s.Stop()
	if rmErr := os.RemoveAll(s.base); rmErr != nil && err == nil {
		err = fmt.Errorf("remove %s: %w", s.base, rmErr)
	}
	return err
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// SocketDir returns the directory of the server's unix socket.
func (s *Server) SocketDir() string { return s.sockDir }

// DSN returns the URL of the server's maintenance database "postgres" as
// superuser, over TCP so that a stopped server refuses connections.
func (s *Server) DSN() string { return s.DatabaseDSN("postgres") }

// DatabaseDSN returns the URL of database name on this server.
func (s *Server) DatabaseDSN(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

// NewDatabase creates an empty database for tb and returns its URL; the
// database is dropped, with any connections still open to it, when tb ends.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%s", s.dbSeq.Add(1), dbNameFrom(tb.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE template0"
	if s.major >= 15 {
		// Copy the template's files rather than write them through the
		// WAL (the default since 15): the WAL buys nothing in a test.
		create += " STRATEGY FILE_COPY"
	}
	if err := s.admin(ctx, create); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		// FORCE: a test that forgot to close a pool must not fail the next.
		if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.DatabaseDSN(name)
}

func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// dbNameFrom makes a readable database name from a test name, short enough
// for PostgreSQL's 63-byte identifiers.
func dbNameFrom(testName string) string {
	name := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(testName), "_"), "_")
	if len(name) > 48 {
		name = name[:48]
	}
	return name
}

// LogTail returns the last lines of the server log, for failure messages.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return tail(b, 40)
}

func tail(b []byte, lines int) string {
	b = bytes.TrimRight(b, "\n")
	for i, n := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if n++; n == lines {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serverEnv is our environment without PG* variables, which would point
// initdb or postgres elsewhere, and with the C locale, which every system has.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

const installHint = "install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql-15; " +
	"Fedora: dnf install postgresql15-server; macOS: brew install postgresql@15) " +
	"or set SHINDO_PG_BIN to the directory holding initdb and postgres"

// findBinaries returns the directory holding initdb and postgres.
func findBinaries() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("SHINDO_PG_BIN"); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("SHINDO_PG_BIN=%s has no initdb and postgres: %s", dir, installHint)
		}
		return dir, nil
	}
	// Debian and Ubuntu keep each major version apart; take the newest.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err == nil && has(filepath.Dir(initdb)) {
		return filepath.Dir(initdb), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found in $SHINDO_PG_BIN, " +
		"/usr/lib/postgresql/*/bin or PATH: " + installHint)
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// serverCredential returns the user to run the server as when we are root,
// and nil otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("SHINDO_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root, but there is no user %q to run it as "+
			"(create one, e.g. useradd --system %s, set SHINDO_PG_USER, or run the tests as a normal user): %w", name, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has a non-numeric uid or gid", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %q is root, and PostgreSQL refuses to run as root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

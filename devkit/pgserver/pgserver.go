// Package pgserver runs a PostgreSQL server from its binaries as a child
// process: the metadata database of `shindo dev`, and the throwaway servers
// of tests (through package pgtest).
//
//	srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir, Durable: true})
//	…
//	defer srv.Stop()
//
// Start creates a cluster with initdb when the data directory is missing or
// empty and reuses the cluster it holds otherwise. The cluster's superuser is
// "postgres", trusted without a password on the unix socket and on loopback
// TCP only: a server for one developer's machine, not for a network.
//
// The binaries are found in Options.BinDir, else $SHINDO_PG_BIN, else the
// versioned installs of Debian/Ubuntu (/usr/lib/postgresql/*/bin), the PGDG
// packages and Homebrew (preferring the data directory's major version, else
// the newest), else PATH. initdb and postgres refuse to run as root, so when
// we run as root the server runs as the OS user "postgres" (or
// $SHINDO_PG_USER), and the directories created for it are handed to it.
//
// The server runs in its own process group, so a Ctrl-C meant for us does not
// reach it behind our back; on Linux it also shuts down if we die without
// stopping it.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Timeouts are generous: a loaded machine running many servers at once can
// take seconds to start one.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
)

// maxSocketDir bounds the socket directory's path: the socket's full path,
// dir + "/.s.PGSQL.<port>", must fit in the 104 bytes that macOS allows
// (Linux allows 108).
const maxSocketDir = 104 - 1 - len("/.s.PGSQL.65535")

// Options configure Start. Only DataDir is required.
type Options struct {
	// DataDir is the cluster's data directory. A missing or empty one gets
	// a new cluster; one that holds a cluster is reused, and must belong
	// to the PostgreSQL major version of the binaries.
	DataDir string
	// Port is the TCP port; 0 picks a free one at Start, kept by Restart.
	Port int
	// Listen is PostgreSQL's listen_addresses; default "127.0.0.1".
	// Whatever it says, the cluster's authentication admits loopback only.
	Listen string
	// SocketDir holds the unix socket; default "sock" beside DataDir, or,
	// when that path is too long for a socket, a temporary directory made
	// at each start and removed when the server stops.
	SocketDir string
	// LogPath is the server log, appended to; default "postgres.log"
	// beside DataDir. Give each server a directory of its own, holding
	// DataDir, and the defaults do not collide.
	LogPath string
	// Durable keeps PostgreSQL's safe defaults (fsync on). Without it the
	// server trades durability against an OS crash for speed (fsync off,
	// no full-page writes, no autovacuum, a quiet log): right for tests.
	// Either way, a commit survives Kill.
	Durable bool
	// Settings are extra server settings (-c name=value), applied last.
	// port, listen_addresses and unix_socket_directories are set through
	// the fields above instead.
	Settings map[string]string
	// BinDir is the directory holding initdb and postgres, if set.
	BinDir string
	// TLS, when set, makes every TCP connection TLS 1.3 with a client
	// certificate of TLS.CA (the unix socket stays trusted, as before),
	// and the DSNs carry TLS's client certificate.
	TLS *TLS
}

// TLS are the files of a server that requires client certificates.
type TLS struct {
	// CA holds the CA certificates both sides are checked against; the
	// server's user must be able to read it.
	CA string
	// ServerCert and ServerKey are the server's: the key owned by the
	// server's user and readable by it alone, as PostgreSQL requires.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are what DSN and DatabaseDSN connect with.
	ClientCert, ClientKey string
}

// hbaTLS admits local connections as before, and over TCP only TLS with a
// certificate of the CA, whatever it names, as the superuser (identTLS):
// the certificate is the authentication.
const (
	hbaTLS = `local all all trust
hostssl all all all cert map=shindo
hostnossl all all all reject
`
	identTLS = "shindo /^.*$ postgres\n"
)

// fastSettings make a non-durable server fast and quiet. Commits still reach
// the kernel before they are acknowledged (synchronous_commit stays on), so
// Kill, which kills processes and not the machine, loses no acknowledged
// write. max_connections leaves room for many parallel tests, each with a
// small pool.
var fastSettings = map[string]string{
	"fsync":                   "off",
	"full_page_writes":        "off",
	"max_connections":         "300",
	"shared_buffers":          "32MB",
	"unix_socket_permissions": "0777",
	"log_min_messages":        "warning",
	"log_min_error_statement": "panic",
	"log_checkpoints":         "off",
	"autovacuum":              "off",
}

// managedSettings come from Options fields, which the DSNs depend on.
var managedSettings = map[string]string{
	"port":                    "Port",
	"listen_addresses":        "Listen",
	"unix_socket_directories": "SocketDir",
	"data_directory":          "DataDir",
}

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("already in use")

// Server is one PostgreSQL server, running or stopped, with its data
// directory. Its methods are safe for concurrent use.
type Server struct {
	opts     Options // as given, for Durable and Settings
	bin      string  // directory of initdb and postgres
	cred     *syscall.Credential
	major    int
	dataDir  string
	logPath  string
	listen   string
	host     string // for DSNs
	port     int
	tempSock bool // the socket dir is temporary, made at each start

	op sync.Mutex // serialises starting and stopping

	mu      sync.Mutex // guards what follows
	proc    *process   // nil while stopped
	sockDir string     // "" while stopped if tempSock
}

// process is one run of the postmaster.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the postmaster has exited
	err  error         // its exit status, valid after done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a server on opts.DataDir, creating the cluster first if the
// directory is missing or empty, and returns once it accepts connections. ctx
// bounds the start only; the server runs until Stop or Kill. If the server
// exits while starting, the error carries the end of its log.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	// Another process may take a free port between our probe and the
	// server's bind; a new port is then tried.
	for attempt := 0; ; attempt++ {
		if opts.Port == 0 {
			if s.port, err = freePort(s.host); err != nil {
				return nil, err
			}
		}
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		if opts.Port != 0 || attempt == 2 || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

// newServer checks opts and fills in the defaults.
func newServer(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("no data dir given (Options.DataDir)")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("port %d out of range", opts.Port)
	}
	for name := range opts.Settings {
		if field, ok := managedSettings[name]; ok {
			return nil, fmt.Errorf("setting %s is managed by pgserver: set Options.%s instead", name, field)
		}
		if name == "" || strings.ContainsAny(name, "= ") {
			return nil, fmt.Errorf("invalid setting name %q", name)
		}
	}
	s := &Server{opts: opts, port: opts.Port, listen: opts.Listen}
	var err error
	if s.dataDir, err = filepath.Abs(opts.DataDir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if s.listen == "" {
		s.listen = "127.0.0.1"
	}
	s.host = dsnHost(s.listen)
	s.logPath = opts.LogPath
	if s.logPath == "" {
		s.logPath = filepath.Join(filepath.Dir(s.dataDir), "postgres.log")
	}
	if s.logPath, err = filepath.Abs(s.logPath); err != nil {
		return nil, fmt.Errorf("log path: %w", err)
	}
	switch {
	case opts.SocketDir != "":
		if s.sockDir, err = filepath.Abs(opts.SocketDir); err != nil {
			return nil, fmt.Errorf("socket dir: %w", err)
		}
		if len(s.sockDir) > maxSocketDir {
			return nil, fmt.Errorf("socket dir %s is too long for a unix socket (%d bytes, at most %d): choose a shorter one",
				s.sockDir, len(s.sockDir), maxSocketDir)
		}
	case len(filepath.Join(filepath.Dir(s.dataDir), "sock")) <= maxSocketDir:
		s.sockDir = filepath.Join(filepath.Dir(s.dataDir), "sock")
	default:
		s.tempSock = true
	}
	return s, nil
}

// prepare finds the binaries and readies the data directory: a new cluster,
// or a check that the existing one can run here.
func (s *Server) prepare(ctx context.Context) error {
	state, major, err := inspectDataDir(s.dataDir)
	if err != nil {
		return err
	}
	if s.bin, err = findBinaries(s.opts.BinDir, major); err != nil {
		return err
	}
	if s.cred, err = serverCredential(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.logPath), 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	if err := s.writeTLSFiles(); err != nil {
		return err
	}
	if state != dirCluster {
		return s.initdb(ctx)
	}
	if err := checkClusterMajor(s.dataDir, major, s.bin); err != nil {
		return err
	}
	if err := checkOwner(s.dataDir, s.cred); err != nil {
		return err
	}
	s.major = major
	return nil
}

// writeTLSFiles writes the authentication files of a TLS server beside its
// data directory.
func (s *Server) writeTLSFiles() error {
	if s.opts.TLS == nil {
		return nil
	}
	dir := filepath.Dir(s.dataDir)
	for name, body := range map[string]string{"pg_hba_tls.conf": hbaTLS, "pg_ident_tls.conf": identTLS} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// start runs the postmaster and waits until it accepts connections.
func (s *Server) start(ctx context.Context) error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	running := s.proc != nil && !s.proc.exited()
	if !running {
		s.proc = nil // forget one that exited by itself
	}
	s.mu.Unlock()
	if running {
		return errors.New("postgres is already running")
	}
	sockDir, err := s.makeSocketDir()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	var logStart int64
	if st, err := logFile.Stat(); err == nil {
		logStart = st.Size()
	}

	cmd := exec.Command(filepath.Join(s.bin, "postgres"), s.args(sockDir)...)
	cmd.Dir = "/" // the server's user may not be able to enter ours
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		// Its own process group: a Ctrl-C meant for us must not reach the
		// server; it stops when told to, or when we die.
		Setpgid: true,
	}
	// If we die: a fast shutdown (with a checkpoint) for a durable
	// server, an immediate one (crash recovery at the next start) for a
	// throwaway one.
	deathSig := syscall.SIGQUIT
	if s.opts.Durable {
		deathSig = syscall.SIGINT
	}
	setDeathSignal(cmd.SysProcAttr, deathSig)
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
		s.removeTempSocketDir()
		return fmt.Errorf("start postgres: %w", err)
	}
	if err := s.waitReady(ctx, p); err != nil {
		_ = stopProcess(p, syscall.SIGQUIT)
		s.removeTempSocketDir()
		return s.startError(err, logStart)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// args are the postmaster's command line: our settings, then the caller's.
func (s *Server) args(sockDir string) []string {
	settings := map[string]string{"listen_addresses": s.listen}
	if !s.opts.Durable {
		maps.Copy(settings, fastSettings)
	}
	if t := s.opts.TLS; t != nil {
		dir := filepath.Dir(s.dataDir)
		maps.Copy(settings, map[string]string{
			"ssl": "on", "ssl_cert_file": t.ServerCert, "ssl_key_file": t.ServerKey, "ssl_ca_file": t.CA,
			"ssl_min_protocol_version": "TLSv1.3",
			"hba_file":                 filepath.Join(dir, "pg_hba_tls.conf"), "ident_file": filepath.Join(dir, "pg_ident_tls.conf"),
		})
	}
	maps.Copy(settings, s.opts.Settings)
	args := []string{"-D", s.dataDir, "-p", strconv.Itoa(s.port), "-k", sockDir}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", name+"="+settings[name])
	}
	return args
}

// makeSocketDir creates the socket directory if it is missing, or a new
// temporary one, and returns it.
func (s *Server) makeSocketDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tempSock {
		if err := mkdirFor(s.sockDir, 0o700, s.cred); err != nil {
			return "", fmt.Errorf("create socket dir: %w", err)
		}
		return s.sockDir, nil
	}
	if s.sockDir != "" {
		return s.sockDir, nil
	}
	base := os.TempDir()
	if len(base)+len("/pgserver-1234567890") > maxSocketDir {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pgserver-")
	if err != nil {
		return "", fmt.Errorf("create socket dir: %w", err)
	}
	if err := chownTo(dir, s.cred); err != nil {
		os.Remove(dir)
		return "", err
	}
	s.sockDir = dir
	return dir, nil
}

func (s *Server) removeTempSocketDir() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tempSock && s.sockDir != "" {
		os.RemoveAll(s.sockDir)
		s.sockDir = ""
	}
}

// startError explains a failed start, from the log it wrote.
func (s *Server) startError(err error, logStart int64) error {
	log := s.readLog(logStart)
	switch {
	case bytes.Contains(log, []byte("could not bind")):
		err = fmt.Errorf("port %d on %s is %w", s.port, s.listen, errPortInUse)
	case bytes.Contains(log, []byte("pre-existing shared memory block")):
		err = fmt.Errorf("%w: backends of the previous postmaster are still exiting", errShmemInUse)
	case bytes.Contains(log, []byte(`lock file "postmaster.pid" already exists`)):
		err = fmt.Errorf("data dir %s is in use by another postgres (whose pid starts its postmaster.pid): stop that one first", s.dataDir)
	default:
		if fatal := firstLineAfter(log, "FATAL:"); fatal != "" {
			err = fmt.Errorf("%w: %s", err, fatal)
		}
	}
	return fmt.Errorf("%w%s\nserver log, last lines:\n%s", err, s.accessHint(), tail(log, 40))
}

// firstLineAfter returns what follows marker on the first line of log that
// holds it, or "".
func firstLineAfter(log []byte, marker string) string {
	_, rest, found := bytes.Cut(log, []byte(marker))
	if !found {
		return ""
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return string(bytes.TrimSpace(line))
}

// waitReady polls until the server accepts a connection, exits, refuses us
// for good, or the start timeout or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.tryConnect(ctx, p)
		if err == nil {
			return nil
		}
		// A server that answers with anything but "starting up" is up
		// and refusing us: a cluster made with other authentication,
		// or without the postgres role or database.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code != "57P03" {
			return fmt.Errorf("postgres is up but refuses its superuser postgres: %w", err)
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
			return fmt.Errorf("postgres not accepting connections (%w): %v", ctx.Err(), err)
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
// power cut, and returns once they are gone: clients see their connections
// drop, and Restart runs crash recovery. Killing a stopped server does
// nothing.
func (s *Server) Kill() error {
	return s.halt(syscall.SIGKILL)
}

func (s *Server) halt(sig syscall.Signal) error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	err := stopProcess(p, sig)
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	s.removeTempSocketDir()
	return err
}

// stopProcess stops the postmaster, with a signal (SIGINT: fast shutdown,
// SIGQUIT: immediate) or by killing it and its children (SIGKILL), and waits
// for them all to exit, killing them after the stop timeout. A postmaster
// that has already exited is left alone.
func stopProcess(p *process, sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	var orphans []int
	if sig == syscall.SIGKILL {
		orphans = killServer(p.cmd.Process)
	} else {
		_ = p.cmd.Process.Signal(sig)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-p.done:
	case <-timer.C:
		orphans = killServer(p.cmd.Process)
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

// Restart starts a stopped, killed or crashed server again, on the same
// port and data directory, and returns once it accepts connections.
//
// After a postmaster that died by itself (killed from outside), its
// backends notice and exit a moment later; until they have, the shared
// memory is still attached and postgres refuses to start, so Restart
// tries again for up to the stop timeout.
func (s *Server) Restart() error {
	deadline := time.Now().Add(stopTimeout)
	for {
		err := s.start(context.Background())
		if err == nil {
			return nil
		}
		if !errors.Is(err, errShmemInUse) || time.Now().After(deadline) {
			return fmt.Errorf("restart: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// errShmemInUse: the shared memory of a previous postmaster of the data
// directory is still attached by its exiting backends.
var errShmemInUse = errors.New("the previous server's shared memory is still in use")

// Done returns a channel closed when the running postmaster exits, whether
// stopped, killed or crashed; for a stopped server, a closed channel. Each
// start makes a new one, so call Done again after Restart.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return closed
	}
	return s.proc.done
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Pid returns the postmaster's process ID, or 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// SocketDir returns the directory of the server's unix socket; "" for a
// stopped server whose socket dir is temporary.
func (s *Server) SocketDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sockDir
}

// DataDir returns the cluster's data directory, as an absolute path.
func (s *Server) DataDir() string { return s.dataDir }

// Major returns the cluster's PostgreSQL major version, such as 15.
func (s *Server) Major() int { return s.major }

// DSN returns the URL of the maintenance database "postgres" as superuser,
// over TCP, so that a stopped server refuses connections.
func (s *Server) DSN() string { return s.DatabaseDSN("postgres") }

// DatabaseDSN returns the URL of database name as superuser.
func (s *Server) DatabaseDSN(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort(s.host, strconv.Itoa(s.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	if t := s.opts.TLS; t != nil {
		u.RawQuery = url.Values{"sslmode": {"verify-full"}, "sslrootcert": {t.CA}, "sslcert": {t.ClientCert}, "sslkey": {t.ClientKey}}.Encode()
	}
	return u.String()
}

// EnsureDatabase creates database name unless it exists.
func (s *Server) EnsureDatabase(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("ensure database: no name given")
	}
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return fmt.Errorf("ensure database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		return fmt.Errorf("ensure database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// LogTail returns the last n lines of the server log, for failure messages.
func (s *Server) LogTail(n int) string {
	if n <= 0 {
		return ""
	}
	if _, err := os.Stat(s.logPath); err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return tail(s.readLog(0), n)
}

// maxLogRead bounds how much of a long-lived server's log is read for a tail.
const maxLogRead = 1 << 20

// readLog returns the server log from offset from, or its last maxLogRead
// bytes if that is less.
func (s *Server) readLog(from int64) []byte {
	f, err := os.Open(s.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	from = max(from, st.Size()-maxLogRead)
	b, err := io.ReadAll(io.NewSectionReader(f, from, st.Size()-from))
	if err != nil {
		return nil
	}
	return b
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	for i, seen := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if seen++; seen == n {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

// dsnHost is the address clients use to reach a server listening on listen.
func dsnHost(listen string) string {
	first, _, _ := strings.Cut(listen, ",")
	switch first = strings.TrimSpace(first); first {
	case "", "*", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return first
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

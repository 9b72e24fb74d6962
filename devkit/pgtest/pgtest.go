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
// The servers are run by package pgserver, which finds the binaries
// ($SHINDO_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH) and,
// when the tests run as root, runs them as the OS user "postgres" (or
// $SHINDO_PG_USER). Each lives in a temporary directory removed when it
// closes.
//
// Servers run with fsync off: fast, and safe against everything but an OS
// crash, which a test does not survive anyway. On Linux a server also
// shuts down if the test binary dies without stopping it (a test timeout).
// Nothing is printed on success; failures carry the end of the server log.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/devkit/pgserver"
)

// Generous: a loaded CI machine running many test binaries at once can take
// seconds to start a server or create a database.
const timeout = 60 * time.Second

// Server is one running (or stopped) PostgreSQL server with its own
// temporary directory. Its superuser is "postgres", authenticated by trust.
type Server struct {
	pg    *pgserver.Server
	base  string // temporary directory holding the data, socket and log
	dbSeq atomic.Int64
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
	// A short base path: the server's unix socket path must fit in 107 bytes.
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	// Enterable, not readable, by the server's user when that is not us.
	if err := os.Chmod(base, 0o711); err != nil {
		os.RemoveAll(base)
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pg, err := pgserver.Start(ctx, pgserver.Options{
		DataDir:   filepath.Join(base, "data"),
		SocketDir: filepath.Join(base, "sock"),
		LogPath:   filepath.Join(base, "server.log"),
	})
	if err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	return &Server{pg: pg, base: base}, nil
}

// Stop shuts the server down cleanly (SIGINT, PostgreSQL's fast shutdown),
// killing it if it has not exited within 15 s. Its data stays, so Restart can
// start it again. Stopping a stopped server does nothing.
func (s *Server) Stop() error { return s.pg.Stop() }

// Kill kills the server and all its backends with SIGKILL, like a crash or a
// power cut: clients see their connections drop, and Restart runs crash
// recovery. Killing a stopped server does nothing.
func (s *Server) Kill() error { return s.pg.Kill() }

// Restart starts a stopped or killed server again, on the same port and
// data directory.
func (s *Server) Restart() error { return s.pg.Restart() }

// Close stops the server and removes its files.
func (s *Server) Close() error {
	err := s.pg.Stop()
	if rmErr := os.RemoveAll(s.base); rmErr != nil && err == nil {
		err = fmt.Errorf("remove %s: %w", s.base, rmErr)
	}
	return err
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.pg.Port() }

// SocketDir returns the directory of the server's unix socket.
func (s *Server) SocketDir() string { return s.pg.SocketDir() }

// DSN returns the URL of the server's maintenance database "postgres" as
// superuser, over TCP so that a stopped server refuses connections.
func (s *Server) DSN() string { return s.pg.DSN() }

// DatabaseDSN returns the URL of database name on this server.
func (s *Server) DatabaseDSN(name string) string { return s.pg.DatabaseDSN(name) }

// LogTail returns the last lines of the server log, for failure messages.
func (s *Server) LogTail() string { return s.pg.LogTail(40) }

// NewDatabase creates an empty database for tb and returns its URL; the
// database is dropped, with any connections still open to it, when tb ends.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%s", s.dbSeq.Add(1), dbNameFrom(tb.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE template0"
	if s.pg.Major() >= 15 {
		// Copy the template's files rather than write them through the
		// WAL (the default since 15): the WAL buys nothing in a test.
		create += " STRATEGY FILE_COPY"
	}
	if err := s.admin(ctx, create); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
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

package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/cli/internal/proc"
	"shindo.dev/devkit/pgserver"
)

// dbName is the metadata database of the dev topology; it is made afresh at
// every start, so each run provisions its own stations and keys.
const dbName = "shindo"

// metadata is the dev topology's PostgreSQL member.
type metadata struct {
	*pgserver.Server
	scratch string // a directory to remove at stop, if any
}

// stop shuts the member down and removes a scratch data directory.
func (m *metadata) stop() {
	_ = m.Stop() // stopped is stopped: what it failed to do, the next run's start cleans up
	if m.scratch != "" {
		os.RemoveAll(m.scratch)
	}
}

// supervise restarts the member whenever its postmaster exits unasked, with
// the back-off of every other process, until ctx ends; restarted is called
// once it accepts connections again, failed when it keeps failing. While
// it is down real-time data flows on — no service needs the database for
// it — and the data API answers writes with 503.
func (m *metadata) supervise(ctx context.Context, log *slog.Logger, failed func(error), restarted func()) {
	policy := proc.DefaultRestarts()
	for {
		started := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-m.Done():
		}
		if ctx.Err() != nil {
			return
		}
		ran := time.Since(started)
		delay, giveUp := policy.Exited(ran)
		if giveUp {
			failed(fmt.Errorf("the metadata database keeps failing: it exited %d times in a row soon after starting; last lines of its log:\n%s",
				policy.ShortRuns(), m.LogTail(8)))
			return
		}
		log.Warn("metadata database exited unasked; restarting", slog.Duration("restart_in", delay),
			slog.String("last_lines", m.LogTail(5)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if err := m.Restart(); err != nil {
			log.Warn("metadata database restart failed", slog.Any("err", err))
			continue // Done is closed while stopped: counted as a short run
		}
		log.Info("metadata database restarted", slog.Int("pid", m.Pid()))
		restarted()
	}
}

// startMetadata starts TNN-1's PostgreSQL member (data kept under dir, so a
// second start is quick) and recreates the metadata database.
// Under -tls (dbTLS) the member takes TLS connections with a certificate
// of the dev CA only.
func startMetadata(ctx context.Context, cfg Config, port int, base string, scratch bool, dbTLS *pgserver.TLS, log *slog.Logger) (*metadata, string, error) {
	if scratch {
		log.Info("metadata database kept outside the dev directory, which the postgres user cannot enter; removed at stop", slog.String("dir", base))
	}
	m := &metadata{}
	if scratch {
		m.scratch = filepath.Dir(base)
	}
	base = filepath.Join(base, tnn.name)
	srv, err := pgserver.Start(ctx, pgserver.Options{
		DataDir: filepath.Join(base, "data"),
		Port:    port,
		Listen:  cfg.Host,
		LogPath: filepath.Join(cfg.Dir, "logs", tnn.name+"-postgres.log"),
		Durable: true,
		TLS:     dbTLS,
	})
	if err != nil {
		if m.scratch != "" {
			os.RemoveAll(m.scratch)
		}
		return nil, "", fmt.Errorf("metadata database: %w", err)
	}
	m.Server = srv
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		m.stop()
		return nil, "", fmt.Errorf("metadata database: %w", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := conn.Exec(ctx, q); err != nil {
			m.stop()
			return nil, "", fmt.Errorf("metadata database: %s: %w", q, err)
		}
	}
	return m, srv.DatabaseDSN(dbName), nil
}

// pgBase is where the PostgreSQL members keep their data: <dir>/pg, unless
// shindo dev runs as root in a directory the postgres user (which the
// server runs as) cannot enter, such as one under /root; then a scratch
// directory under the system's temporary directory, removed at stop.
func pgBase(dir string) (base string, scratch bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if os.Geteuid() != 0 || traversable(abs) {
		return filepath.Join(abs, "pg"), false, nil
	}
	tmp, err := os.MkdirTemp("", "shindo-dev-")
	if err != nil {
		return "", false, fmt.Errorf("metadata database directory: %w", err)
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return "", false, fmt.Errorf("metadata database directory: %w", err)
	}
	return filepath.Join(tmp, "pg"), true, nil
}

// traversable reports whether every existing ancestor of path lets others
// pass through.
func traversable(path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if parent := filepath.Dir(p); parent == p {
			return true
		}
	}
}

// newToken returns a random admin token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

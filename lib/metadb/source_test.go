package metadb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/poll"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
)

// runSource starts a Source on pool, running with interval until the test
// ends.
func runSource(t *testing.T, pool *pgxpool.Pool, interval time.Duration, log *slog.Logger) *metadb.Source {
	t.Helper()
	src, err := metadb.NewSource(context.Background(), pool, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, interval) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return src
}

func station(src registry.Source, id string) *registry.Station {
	st, _ := src.Lookup(id)
	return st
}

// A Source with no periodic reload to speak of sees changes through
// notifications alone.
func TestSourceFollowsNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("A"))
	src := runSource(t, pool, time.Hour, discardLog())
	if station(src, "A") == nil || src.Current().Len() != 1 {
		t.Fatal("initial snapshot lacks A")
	}
	var _ registry.Source = src

	// Seeing B proves the listener is listening: with an hour between
	// periodic reloads, only it triggers reloads, and only once LISTEN has
	// succeeded. So the later changes arrive by notification.
	created := mustCreate(t, s, hualien("B"))
	poll.Until(t, waitFor, "B in the registry", func() bool { return station(src, "B") != nil })
	if !bytes.Equal(station(src, "B").CurrentKey(), created.CurrentKey()) {
		t.Fatal("B arrived with the wrong key")
	}

	keyID, newKey, err := s.RotateKey(ctx, "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "A's new key in the registry", func() bool { return station(src, "A").KeyID == keyID })
	a := station(src, "A")
	if k, ok := a.Key(keyID); !ok || !bytes.Equal(k, newKey) {
		t.Fatal("A's new key refused")
	}
	if _, ok := a.Key(1); !ok {
		t.Fatal("A's old key refused during its overlap")
	}

	if _, err := s.UpdateStation(ctx, "B", metadb.Update{Name: "moved", Lat: 22, Lon: 120}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "B moved", func() bool { return station(src, "B").Name == "moved" })

	reset, err := s.ResetStationSeq(ctx, "B", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "B's seq reset in the registry", func() bool { return station(src, "B").SeqResetMs == reset.SeqResetMs })

	if err := s.RetireStation(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "A out of service", func() bool { return !station(src, "A").InService() })
}

// Changes that notify nobody (here: triggers off for the session, as a
// replication tool would write) still arrive through the periodic reload.
func TestSourcePeriodicFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newStore(t)
	src := runSource(t, pool, 20*time.Millisecond, discardLog())

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, `BEGIN;
		SET LOCAL session_replication_role = replica;
		INSERT INTO stations (id, lat, lon, seed_net, seed_sta) VALUES ('silent', 23.5, 121, 'SH', 'SILNT'); -- the triggers that would give codes are off too
		INSERT INTO station_keys (station_id, key_id, secret) VALUES ('silent', 1, repeat('k', 32)::bytea);
		COMMIT`)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "the silently inserted station in the registry", func() bool { return station(src, "silent") != nil })
}

// The listener survives losing its connection: it reconnects, reloads what
// it may have missed, and goes on receiving notifications.
func TestSourceReconnectsListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	src := runSource(t, pool, time.Hour, discardLog())

	listener := func() (pid int) {
		err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, metadb.ListenerApplicationName).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	var first int
	poll.Until(t, waitFor, "listening", func() bool { first = listener(); return first != 0 })
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "listening again", func() bool { pid := listener(); return pid != 0 && pid != first })

	mustCreate(t, s, hualien("after-reconnect"))
	poll.Until(t, waitFor, "a station created after the reconnection in the registry", func() bool {
		return station(src, "after-reconnect") != nil
	})
}

// A failing reload leaves the last good set in place and says so; the
// next good one replaces it.
func TestSourceKeepsSetWhenReloadFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("A"))
	logs := &syncBuffer{}
	src := runSource(t, pool, 20*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil)))
	before := src.Current()

	if _, err := pool.Exec(ctx, "ALTER TABLE station_keys RENAME TO station_keys_away"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitFor, "a reload failure logged", func() bool {
		return strings.Contains(logs.String(), "station registry reload failed")
	})
	if src.Current() != before || station(src, "A") == nil {
		t.Fatal("the loaded set was dropped after a failed reload")
	}

	if _, err := pool.Exec(ctx, "ALTER TABLE station_keys_away RENAME TO station_keys"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, hualien("B"))
	poll.Until(t, waitFor, "B in the registry once reloads work again", func() bool { return station(src, "B") != nil })
}

func TestNewSourceNeedsItsFirstSnapshot(t *testing.T) {
	t.Parallel()
	_, err := metadb.NewSource(context.Background(), newPool(t), discardLog()) // not migrated
	if !errors.Is(err, metadb.ErrDatabase) {
		t.Fatalf("err = %v, want ErrDatabase", err)
	}
}

func TestSourceRunRefusesZeroInterval(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	src, err := metadb.NewSource(context.Background(), pool, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(context.Background(), 0); err == nil {
		t.Fatal("Run accepted interval 0")
	}
}

// syncBuffer is a bytes.Buffer the Source's goroutine may log to while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

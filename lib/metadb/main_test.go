package metadb_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/lib/metadb"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// waitFor bounds every poll in these tests; generous, since it only matters
// when a test is failing.
const waitFor = 15 * time.Second

// newPool returns a pool on a fresh, empty database of the shared server.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, pgtest.Shared(t).NewDatabase(t))
}

func poolOn(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4 // many tests run at once against one server
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newStore returns a store on a fresh, migrated database, and its pool.
func newStore(t testing.TB) (*metadb.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t)
	if _, err := metadb.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return metadb.NewStore(pool), pool
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func key(b byte, n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

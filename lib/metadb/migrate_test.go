package metadb_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/lib/metadb"
)

func allVersions() []int {
	var vs []int
	for v := 1; v <= metadb.LatestVersion(); v++ {
		vs = append(vs, v)
	}
	return vs
}

func TestMigrateFreshThenIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if metadb.LatestVersion() < 2 {
		t.Fatalf("LatestVersion = %d, want at least the 2 shipped migrations", metadb.LatestVersion())
	}

	applied, err := metadb.Migrate(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, allVersions()) {
		t.Fatalf("fresh database: applied %v, want %v", applied, allVersions())
	}
	var tables int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_name IN ('stations', 'station_keys', 'schema_migrations')`).Scan(&tables)
	if err != nil || tables != 3 {
		t.Fatalf("tables = %d, %v; want 3", tables, err)
	}

	applied, err = metadb.Migrate(ctx, pool)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second run: applied %v, err %v; want nothing", applied, err)
	}
	var rows, maxVersion int
	if err := pool.QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&rows, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if rows != metadb.LatestVersion() || maxVersion != metadb.LatestVersion() {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d", rows, maxVersion, metadb.LatestVersion())
	}
}

func TestMigrateConcurrentStarters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	// A pool each: services starting at the same time.
	pools := make([]*pgxpool.Pool, 4)
	for i := range pools {
		pools[i] = poolOn(t, dsn)
	}
	results := make([][]int, len(pools))
	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i := range pools {
		wg.Go(func() {
			results[i], errs[i] = metadb.Migrate(ctx, pools[i])
		})
	}
	wg.Wait()
	var all []int
	for i := range pools {
		if errs[i] != nil {
			t.Fatalf("starter %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	slices.Sort(all)
	if !slices.Equal(all, allVersions()) {
		t.Fatalf("together the starters applied %v, want each of %v exactly once", all, allVersions())
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newStore(t)
	future := metadb.LatestVersion() + 1
	if _, err := pool.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", future); err != nil {
		t.Fatal(err)
	}
	applied, err := metadb.Migrate(ctx, pool)
	if !errors.Is(err, metadb.ErrSchemaTooNew) || len(applied) != 0 {
		t.Fatalf("applied %v, err %v; want ErrSchemaTooNew", applied, err)
	}
	if !strings.Contains(err.Error(), "newer shindo") {
		t.Errorf("error does not say what to do: %v", err)
	}
	// The lock was released: another run gets as far as the same refusal.
	if _, err := metadb.Migrate(ctx, pool); !errors.Is(err, metadb.ErrSchemaTooNew) {
		t.Fatalf("second run: %v", err)
	}
}

func TestMigrateUnreachable(t *testing.T) {
	t.Parallel()
	pool := poolOn(t, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	_, err := metadb.Migrate(context.Background(), pool)
	if !errors.Is(err, metadb.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

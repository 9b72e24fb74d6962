package metadb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/pgtest"
)

func TestEmbeddedMigrations(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || LatestVersion() != len(ms) {
		t.Fatalf("%d migrations, LatestVersion %d", len(ms), LatestVersion())
	}
}

// Errors PostgreSQL really returns come out as domain errors, with no
// driver type left inside.
func TestTranslateServerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO stations (id, lat, lon) VALUES ('A', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sql  string
		want error
	}{
		{`INSERT INTO stations (id, lat, lon) VALUES ('A', 0, 0)`, ErrExists},
		{`INSERT INTO stations (id, lat, lon) VALUES ('B', 91, 0)`, ErrInvalid},
		{`INSERT INTO stations (id, lat, lon, code) VALUES ('B', 0, 0, 3000000000)`, ErrInvalid},
		{`INSERT INTO station_keys (station_id, key_id, secret) VALUES ('nope', 1, repeat('k', 16)::bytea)`, ErrNotFound},
		{`SELECT 1/0`, ErrInvalid},
		{`SELECT * FROM no_such_table`, ErrDatabase},
	}
	for _, tt := range tests {
		_, err := pool.Exec(ctx, tt.sql)
		got := translate(err)
		var pgErr *pgconn.PgError
		if !errors.Is(got, tt.want) || errors.As(got, &pgErr) {
			t.Errorf("%s: %v (%T), want %v without the driver's error", tt.sql, got, got, tt.want)
		}
		// What a client may read names no table, constraint or SQLSTATE;
		// the database's words stay in Detail, for logs.
		for _, word := range []string{"stations", "station_keys", "SQLSTATE", "check", "constraint", "no_such_table"} {
			if tt.want != ErrDatabase && strings.Contains(got.Error(), word) {
				t.Errorf("%s: %q shows the database's %q", tt.sql, got, word)
			}
		}
		if tt.want != ErrDatabase && Detail(got) == "" {
			t.Errorf("%s: no detail kept for the logs", tt.sql)
		}
	}
}

func TestTranslateKeepsOwnAndContextErrors(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("inside: %w", ErrRetired),
		fmt.Errorf("inside: %w", ErrNotFound),
	} {
		if got := translate(err); got != err {
			t.Errorf("translate(%v) = %v, want it unchanged", err, got)
		}
	}
	if got := translate(fmt.Errorf("query: %w", context.DeadlineExceeded)); got != context.DeadlineExceeded {
		t.Errorf("deadline: %v", got)
	}
	if got := translate(&pgconn.PgError{Code: "57P01", Message: "terminating connection"}); !errors.Is(got, ErrUnavailable) {
		t.Errorf("admin shutdown: %v, want ErrUnavailable", got)
	}
}

package metadb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockKey names the session-level advisory lock that serializes
// Migrate across every process starting against the same database. Its
// value is arbitrary but fixed forever: "shindo" in ASCII, then 1.
const migrateLockKey int64 = 0x7368696e646f0001

// lockReleaseTimeout bounds releasing the lock, which happens after the
// caller's context may have ended.
const lockReleaseTimeout = 5 * time.Second

// ErrSchemaTooNew is returned by Migrate when the database has a schema
// version this build does not know: a newer build migrated it, and running
// older code against it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this build")

type migration struct {
	version int
	name    string // file name, for errors
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// loadMigrations reads the embedded migrations in version order. Versions
// must run 1, 2, 3… without gaps, so that "at version N" says exactly what
// a database contains.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_words.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions run from 1 without gaps)", m.name, m.version, i+1)
		}
	}
	return ms, nil
}

// LatestVersion returns the schema version this build migrates to.
func LatestVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate brings the database's schema up to LatestVersion and returns the
// versions it applied, in order; none when the schema was already current.
// Each version is applied in its own transaction together with its row in
// schema_migrations, so a failure leaves the database at the last complete
// version. Concurrent callers (several services starting at once) wait for
// each other on an advisory lock; the later ones find nothing to do. It
// fails with ErrSchemaTooNew if the database is ahead of this build.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (applied []int, err error) {
	return migrateTo(ctx, pool, LatestVersion())
}

// migrateTo is Migrate up to version upTo: tests of a migration put rows
// into the schema before it.
func migrateTo(ctx context.Context, pool *pgxpool.Pool, upTo int) (applied []int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	ms = ms[:min(upTo, len(ms))]
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", translate(err))
	}
	defer conn.Release()
	// A session lock, held across the transactions, on this one connection.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return nil, fmt.Errorf("migrate: take the migration lock: %w", translate(err))
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockReleaseTimeout)
		defer cancel()
		if _, uerr := conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1)", migrateLockKey); uerr != nil {
			// Closing the session releases the lock; the pool then discards
			// the closed connection instead of lending it out still locked.
			conn.Conn().Close(unlockCtx)
		}
	}()

	// Under the lock: CREATE TABLE IF NOT EXISTS is not safe against a
	// concurrent identical statement.
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", translate(err))
	}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("migrate: read schema_migrations: %w", translate(err))
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("migrate: read schema_migrations: %w", translate(err))
	}
	have := make(map[int]bool, len(done))
	for _, v := range done {
		if int(v) > len(ms) {
			return nil, fmt.Errorf("%w: the database is at version %d, this build knows up to %d; run a newer shindo",
				ErrSchemaTooNew, done[len(done)-1], len(ms))
		}
		have[int(v)] = true
	}
	for _, m := range ms {
		if have[m.version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// No arguments: pgx sends the file in the simple protocol, which
			// runs several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: apply %s: %w", m.name, translate(err))
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

package metadb

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NewReplicatedStore returns a Store that writes through primary (the
// current primary, e.g. behind HAProxy) and reads from local, the
// PostgreSQL member of the store's own site, which may be a standby: a
// read then costs no trip to another site, and reads keep working while
// a failover elects a new primary. A read local cannot serve — the member
// is down, restarting or unreachable — goes to primary instead. A standby
// in synchronous mode applies a commit a moment after acknowledging it,
// so a read straight after a write may not see it yet (a client that must
// read its own write reads it at the primary: the write's answer holds it).
func NewReplicatedStore(primary, local *pgxpool.Pool) *Store {
	return &Store{pool: primary, reads: fallback{local: local, primary: primary}}
}

// reader returns the pool or the replicated pair reads go to.
func (s *Store) reader() rowQuerier {
	if s.reads != nil {
		return s.reads
	}
	return s.pool
}

// fallback reads from local, and from primary when local is unreachable.
type fallback struct{ local, primary *pgxpool.Pool }

// unreachable reports whether err means the member could not serve at all
// (rather than that the query failed or the caller gave up).
func unreachable(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(translate(err), ErrUnavailable)
}

func (f fallback) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := f.local.Query(ctx, sql, args...)
	if unreachable(ctx, err) {
		return f.primary.Query(ctx, sql, args...)
	}
	return rows, err
}

func (f fallback) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return fallbackRow{f: f, ctx: ctx, sql: sql, args: args}
}

// fallbackRow runs its query when scanned, as pgx's rows do.
type fallbackRow struct {
	f    fallback
	ctx  context.Context
	sql  string
	args []any
}

func (r fallbackRow) Scan(dest ...any) error {
	err := r.f.local.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	if unreachable(r.ctx, err) {
		return r.f.primary.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	}
	return err
}

package metadb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Domain errors, the same for every kind of record the store keeps
// (stations, reports, detections, clients): their texts name no kind, and
// callers say which record they asked for. Every error from this package
// that is not a context error wraps one of them (or ErrSchemaTooNew) with
// detail a client may read; driver errors never escape, and what the
// database said is kept for logs only (Detail), so callers match with
// errors.Is and never import pgx to do so.
var (
	// ErrNotFound: no record has that ID.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that ID exists already (retired stations
	// too: IDs are never reused, so old data never mixes with a new
	// station's).
	ErrExists = errors.New("already exists")
	// ErrRetired: the station is retired and cannot change any more.
	ErrRetired = errors.New("retired")
	// ErrInvalid: a value is out of range or malformed.
	ErrInvalid = errors.New("invalid value")
	// ErrUnavailable: the database could not be reached or could not
	// serve the request now (connection lost, shutting down, overloaded,
	// serialization failure); the same call may succeed later.
	ErrUnavailable = errors.New("metadata database unavailable")
	// ErrDatabase: the database failed in a way a retry will not fix.
	ErrDatabase = errors.New("metadata database error")
	// ErrConflict: a record with that ID exists with different content
	// (a report posted twice under one ID with different values).
	ErrConflict = errors.New("conflicting content")
)

// translate turns a driver error into a domain error. Only the message
// text survives, for logs: the driver's error types do not.
func translate(err error) error {
	if err == nil {
		return nil
	}
	for _, domain := range []error{ErrNotFound, ErrExists, ErrRetired, ErrInvalid, ErrUnavailable, ErrDatabase, ErrConflict, ErrSchemaTooNew} {
		if errors.Is(err, domain) {
			return err // ours already, e.g. from inside a transaction
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(err, context.Canceled) {
			return context.Canceled
		}
		return context.DeadlineExceeded
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		// Dial errors, broken connections, a closed pool.
		return fmt.Errorf("%w: %s", ErrUnavailable, err.Error())
	}
	switch code := pgErr.Code; {
	case code == "23505": // unique_violation
		return &refused{ErrExists, ErrExists.Error(), "unique " + pgErr.ConstraintName}
	case code == "23503": // foreign_key_violation: the station went away
		return &refused{ErrNotFound, ErrNotFound.Error(), "foreign key " + pgErr.ConstraintName}
	case code == "23514": // check_violation
		return &refused{ErrInvalid, "invalid value: a value is out of range", "check " + pgErr.ConstraintName}
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"):
		// data_exception (bad encoding, out of range) and other integrity
		// violations: the values given were wrong.
		return &refused{ErrInvalid, "invalid value: a value is malformed or out of range", pgErr.Message + " (SQLSTATE " + code + ")"}
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),    // insufficient resources
		strings.HasPrefix(code, "57"),    // operator intervention: shutdown, cancel
		code == "40001", code == "40P01", // serialization failure, deadlock
		code == "25006": // read_only_sql_transaction: reached a standby mid-failover
		return fmt.Errorf("%w: %s (SQLSTATE %s)", ErrUnavailable, pgErr.Message, code)
	default:
		return fmt.Errorf("%w: %s (SQLSTATE %s)", ErrDatabase, pgErr.Message, code)
	}
}

// refused is a domain error for something the database itself refused:
// its text is for clients, what the database said (a constraint's name, its
// message) for logs only.
type refused struct {
	domain error
	text   string
	detail string
}

func (e *refused) Error() string        { return e.text }
func (e *refused) Is(target error) bool { return target == e.domain }

// Detail returns what the database said about an error it refused, for
// logs; "" when err is not one.
func Detail(err error) string {
	var r *refused
	if errors.As(err, &r) {
		return r.detail
	}
	return ""
}

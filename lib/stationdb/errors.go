package stationdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Domain errors. Every error from this package that is not a context error
// wraps one of them (or ErrSchemaTooNew) with detail; driver errors never
// escape, so callers match with errors.Is and never import pgx to do so.
var (
	// ErrNotFound: no station has that ID.
	ErrNotFound = errors.New("station not found")
	// ErrExists: a station with that ID exists already (retired ones too:
	// IDs are never reused, so old data never mixes with a new station's).
	ErrExists = errors.New("station already exists")
	// ErrRetired: the station is retired and cannot change any more.
	ErrRetired = errors.New("station retired")
	// ErrInvalid: a value is out of range or malformed.
	ErrInvalid = errors.New("invalid station")
	// ErrUnavailable: the database could not be reached or could not
	// serve the request now (connection lost, shutting down, overloaded,
	// serialization failure); the same call may succeed later.
	ErrUnavailable = errors.New("station database unavailable")
	// ErrDatabase: the database failed in a way a retry will not fix.
	ErrDatabase = errors.New("station database error")
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
		return fmt.Errorf("%w (%s)", ErrExists, pgErr.ConstraintName)
	case code == "23503": // foreign_key_violation: the station went away
		return fmt.Errorf("%w (%s)", ErrNotFound, pgErr.ConstraintName)
	case code == "23514": // check_violation
		return fmt.Errorf("%w: violates %s", ErrInvalid, pgErr.ConstraintName)
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"):
		// data_exception (bad encoding, out of range) and other integrity
		// violations: the values given were wrong.
		return fmt.Errorf("%w: %s", ErrInvalid, pgErr.Message)
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

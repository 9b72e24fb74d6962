package storeerr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/stationdb"
)

// TestStatus: each store error gets its code and a message naming the
// record; an unexpected error is internal, logged, and its detail kept
// from the client.
func TestStatus(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	wrap := func(e error) error { return fmt.Errorf("%w: detail", e) }
	for _, tt := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{wrap(stationdb.ErrNotFound), codes.NotFound, "report not found"},
		{wrap(stationdb.ErrConflict), codes.AlreadyExists, "report exists with different content"},
		{wrap(stationdb.ErrExists), codes.AlreadyExists, "report already exists"},
		{wrap(stationdb.ErrRetired), codes.FailedPrecondition, "report is retired"},
		{wrap(stationdb.ErrInvalid), codes.InvalidArgument, "detail"},
		{wrap(stationdb.ErrUnavailable), codes.Unavailable, "retry"},
		{context.DeadlineExceeded, codes.Unavailable, "retry"},
		{context.Canceled, codes.Canceled, "canceled"},
		{errors.New("disk on fire"), codes.Internal, "internal error"},
	} {
		st, _ := status.FromError(Status(context.Background(), log, tt.err, "report"))
		if st.Code() != tt.code || !strings.Contains(st.Message(), tt.msg) {
			t.Errorf("%v: %s %q, want %s %q", tt.err, st.Code(), st.Message(), tt.code, tt.msg)
		}
		if tt.code == codes.Internal && strings.Contains(st.Message(), "fire") {
			t.Errorf("internal detail leaked: %q", st.Message())
		}
	}
	if !strings.Contains(logged.String(), "disk on fire") || strings.Count(logged.String(), "\n") != 1 {
		t.Errorf("log: %q, want the one internal error", logged.String())
	}
}

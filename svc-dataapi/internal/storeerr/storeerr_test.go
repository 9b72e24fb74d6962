package storeerr

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/metadb"
)

// TestStatusNamesTheRecord: a client reads the kind of record it asked
// for, never the store's words (an invalid report was "invalid station").
func TestStatusNamesTheRecord(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		err  error
		what string
		code codes.Code
		msg  string
	}{
		{fmt.Errorf("%w: empty report id", metadb.ErrInvalid), "report", codes.InvalidArgument, "invalid report: empty report id"},
		{metadb.ErrNotFound, "detection", codes.NotFound, "detection not found"},
		{fmt.Errorf("%w: key abc", metadb.ErrExists), "client", codes.AlreadyExists, "client already exists"},
		{fmt.Errorf("%w: dial tcp: refused", metadb.ErrUnavailable), "station", codes.Unavailable, "metadata database unavailable, retry"},
		{fmt.Errorf("%w: relation x does not exist", metadb.ErrDatabase), "report", codes.Internal, "internal error"},
	} {
		st := status.Convert(Status(context.Background(), log, c.err, c.what))
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%v as a %s: %s %q, want %s %q", c.err, c.what, st.Code(), st.Message(), c.code, c.msg)
		}
	}
}

// Package storeerr turns the metadata store's errors into the gRPC
// statuses the data API answers with (and the gateway maps to HTTP): the
// store's domain errors become the client's fault or a retry hint; anything
// else is internal, and its detail goes to the log, not to the client.
package storeerr

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/metadb"
)

// Status returns the status for err from the store, what naming the kind
// of record ("station", "report", …) in the message.
func Status(ctx context.Context, log *slog.Logger, err error, what string) error {
	switch {
	case errors.Is(err, metadb.ErrNotFound):
		return status.Error(codes.NotFound, what+" not found")
	case errors.Is(err, metadb.ErrConflict):
		return status.Error(codes.AlreadyExists, what+" exists with different content")
	case errors.Is(err, metadb.ErrExists):
		return status.Error(codes.AlreadyExists, what+" already exists")
	case errors.Is(err, metadb.ErrRetired):
		return status.Error(codes.FailedPrecondition, what+" is retired")
	case errors.Is(err, metadb.ErrInvalid):
		if d := metadb.Detail(err); d != "" {
			log.InfoContext(ctx, what+" refused by the database", slog.String("detail", d))
		}
		// "invalid value: …" becomes "invalid report: …".
		return status.Error(codes.InvalidArgument, "invalid "+what+strings.TrimPrefix(err.Error(), "invalid value"))
	case errors.Is(err, metadb.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.Unavailable, "metadata database unavailable, retry")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	default:
		log.ErrorContext(ctx, what+" store failed", slog.Any("error", err))
		return status.Error(codes.Internal, "internal error")
	}
}

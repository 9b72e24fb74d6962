// Package batchrecv is the receiving end of svc-ingest's batch streams
// (RTSService.Ingest, WaveformService.Ingest): it applies each batch's
// records in order and acks the batch only after all of them are applied,
// so the sender may drop it. Batches can arrive twice after a reconnect;
// apply must be idempotent.
package batchrecv

import (
	"errors"
	"io"

	"google.golang.org/grpc"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// Request is a batch message of any of the Ingest streams.
type Request interface {
	GetBatchId() uint64
	GetRecords() []*ingestv1.Record
}

// Serve receives batches until the sender closes the stream.
func Serve[Req, Resp any, PReq interface {
	*Req
	Request
}](stream grpc.BidiStreamingServer[Req, Resp], apply func(*ingestv1.Record), ack func(batchID uint64) *Resp) error {
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		req := PReq(msg)
		for _, rec := range req.GetRecords() {
			apply(rec)
		}
		if err := stream.Send(ack(req.GetBatchId())); err != nil {
			return err
		}
	}
}

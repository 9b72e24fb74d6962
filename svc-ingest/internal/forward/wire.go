package forward

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"shindo.dev/svc-ingest/internal/recordwire"
)

// PassThrough is the call option of the streams SendBatch sends on: the
// proto codec, except that a batch already in its wire form goes out as
// it is.
func PassThrough() grpc.CallOption {
	return grpc.ForceCodecV2(passThrough{encoding.GetCodecV2(protocodec.Name)})
}

// SendBatch sends journal records, as they are, as an IngestRequest of
// rts.v1 or waveform.v1 (recordwire.AppendBatch) on a stream opened with
// PassThrough; on any other stream it fails.
func SendBatch(s grpc.ClientStream, batchID uint64, records [][]byte, caughtUp bool) error {
	b := make([]byte, 0, recordwire.BatchSize(batchID, records, caughtUp))
	return s.SendMsg(rawBatch(recordwire.AppendBatch(b, batchID, records, caughtUp)))
}

// rawBatch is a message already in its wire form.
type rawBatch []byte

type passThrough struct{ encoding.CodecV2 }

func (c passThrough) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(rawBatch); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

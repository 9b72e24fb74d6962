package ingest

import (
	"context"
	"log/slog"

	"google.golang.org/protobuf/encoding/protowire"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/links"
	"shindo.dev/svc-ingest/internal/verify"
)

// intake is the accept path shared by the UDP and WebSocket listeners:
// each datagram goes through the gate; the new packets of a batch are
// appended to the journal together, with one sync, and only then acked.
type intake struct {
	site       string
	gate       *verify.Gate
	journal    *journal.Journal
	links      *links.Table
	counts     *packetCounter
	log        *slog.Logger
	overloaded func() bool // a downstream service is too far behind
}

// encodeRecord serializes an ingestv1.Record around the packet's own bytes:
// an embedded message is its serialization, so the verified packet needs
// no second encoding. The result decodes as the Record proto.Marshal would
// produce.
func encodeRecord(packet []byte, recvAtMs int64, site string, tr ingestv1.Transport) []byte {
	b := make([]byte, 0, len(packet)+len(site)+24)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, packet)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(recvAtMs))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, site)
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(tr))
}

// handle implements listen.Handler.
func (in *intake) handle(batch [][]byte, tr ingestv1.Transport) func() [][]byte {
	acks := make([][]byte, len(batch))
	outs := make([]verify.Outcome, len(batch))
	var payloads [][]byte
	var toRecord []int
	shedding := in.overloaded()
	for i, b := range batch {
		o := in.gate.Check(b)
		outs[i] = o
		switch {
		case o.Result == verify.Duplicate:
			acks[i] = o.Ack
		case o.Result != verify.Accepted:
		case o.Packet.GetProbe() != nil:
			// Probes only measure the path: nothing to keep.
			in.gate.Commit(&outs[i])
			acks[i] = outs[i].Ack
		case shedding:
			// Unacked, the station retries, over the other uplink too.
			outs[i].Result = verify.Overloaded
		default:
			payloads = append(payloads, encodeRecord(o.Raw, o.RecvAt.UnixMilli(), in.site, tr))
			toRecord = append(toRecord, i)
		}
	}
	var pending *journal.Pending
	var err error
	if len(payloads) > 0 {
		pending, err = in.journal.Begin(context.Background(), payloads...)
	}
	return func() [][]byte {
		if pending != nil {
			_, err = pending.Wait()
		}
		if err != nil {
			in.log.Error("journal append failed, packets not acked", slog.Int("packets", len(payloads)), slog.Any("error", err))
			for _, i := range toRecord {
				outs[i].Result = verify.Overloaded
			}
		} else {
			for _, i := range toRecord {
				in.gate.Commit(&outs[i])
				acks[i] = outs[i].Ack
			}
		}
		for i := range outs {
			o := &outs[i]
			in.counts.inc(tr, o.Result)
			if o.Result == verify.Accepted {
				in.links.Observe(o.Packet.GetStationId(), o.Packet.GetSeq(), tr, o.Packet.GetRttUs(), o.RecvAt)
			}
		}
		return acks
	}
}

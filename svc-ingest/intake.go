package ingest

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-ingest/internal/checkpoint"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/links"
	"shindo.dev/svc-ingest/internal/recordwire"
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
	// indexed, if set, learns where each recorded packet sits in the
	// journal (the sync with the peer answers from there).
	indexed func(station string, seq, index uint64)
	// sampler picks the packets that start a trace; nil traces none.
	sampler *packetSampler
	// guard, if set, is entered from a batch's append to the journal
	// until the windows and the index hold it (see checkpoint.Guard).
	guard *checkpoint.Guard
}

// rebuildScan bounds how many of the newest journal records a restart reads
// back to restore the replay windows.
const rebuildScan = 4_000_000

// rebuild restores, after a restart, which seqs this core holds: from
// the checkpoint (cp, if set and usable) and the journal records after it,
// or else from the newest records of the journal. Without it a
// retransmission of a recorded packet would be recorded again, and a
// replay inside the freshness bound would pass. With the sync, the same
// pass tells it where those records are (in.indexed), so it can offer the
// peer what was recorded before.
func (in *intake) rebuild(log *slog.Logger, cp *checkpointer) error {
	start := time.Now()
	n := 0
	next := in.journal.Next()
	from := in.journal.First()
	restored := false
	if cp != nil {
		if at, ok := cp.Load(); ok {
			from, restored = at, true
		}
	}
	// Older records lie below every station's window (4,096 seqs of
	// 1,000 stations).
	if next > rebuildScan && next-rebuildScan > from {
		from = next - rebuildScan
	}
	err := in.journal.Scan(from, func(index uint64, payload []byte) {
		station, seq, ok := recordwire.Peek(payload)
		if !ok {
			return
		}
		in.gate.Record(station, seq, recordwire.RecvAt(payload))
		if in.indexed != nil {
			in.indexed(station, seq, index)
		}
		n++
	})
	if n > 0 || restored {
		log.Info("replay windows restored", slog.Bool("from_checkpoint", restored), slog.Uint64("journal_from", from),
			slog.Int("records_read", n), slog.Bool("sync_indexed", in.indexed != nil), slog.Duration("took", time.Since(start)))
	}
	return err
}

// encodeRecord serializes an ingestv1.Record around the packet's own bytes:
// an embedded message is its serialization, so the verified packet needs
// no second encoding. The result decodes as the Record proto.Marshal would
// produce. traceContext, of a traced packet, goes in the record's
// trace_context map; seed are the station's SEED codes.
func encodeRecord(packet []byte, recvAtMs int64, site string, tr ingestv1.Transport, traceContext map[string]string, seed seedcode.Codes) []byte {
	n := len(packet) + len(site) + len(seed.Network) + len(seed.Station) + len(seed.Location) + 32
	for k, v := range traceContext {
		n += len(k) + len(v) + 8
	}
	b := make([]byte, 0, n)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, packet)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(recvAtMs))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, site)
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(tr))
	// A map field is a repeated entry message of key (1) and value (2).
	for _, k := range slices.Sorted(maps.Keys(traceContext)) {
		v := traceContext[k]
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(k))+protowire.SizeTag(2)+protowire.SizeBytes(len(v))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	// Empty strings are left out, as proto3 leaves out defaults.
	for _, f := range []struct {
		num protowire.Number
		v   string
	}{{6, seed.Network}, {7, seed.Station}, {8, seed.Location}} {
		if f.v != "" {
			b = protowire.AppendTag(b, f.num, protowire.BytesType)
			b = protowire.AppendString(b, f.v)
		}
	}
	return b
}

// handle implements listen.Handler.
func (in *intake) handle(batch [][]byte, tr ingestv1.Transport) func() [][]byte {
	acks := make([][]byte, len(batch))
	outs := make([]verify.Outcome, len(batch))
	var payloads [][]byte
	var toRecord []int
	var traced []tracedPacket
	shedding := in.overloaded()
	for i, b := range batch {
		in.counts.received(tr, len(b))
		o := in.gate.Check(b)
		outs[i] = o
		switch {
		case o.Result == verify.Duplicate:
			acks[i] = o.Ack
		case o.Result != verify.Accepted:
		case o.Packet.GetProbe() != nil:
			// Probes only measure the path: acked, but neither kept nor
			// marked as held, so the sync between cores never looks for
			// them.
			acks[i] = in.gate.AckOnly(&outs[i])
		case shedding:
			// Unacked, the station retries, over the other uplink too.
			outs[i].Result = verify.Overloaded
		default:
			span, traceContext := in.sampler.start(&outs[i], tr)
			if span != nil {
				traced = append(traced, tracedPacket{i, span})
			}
			payloads = append(payloads, encodeRecord(o.Raw, o.RecvAt.UnixMilli(), in.site, tr, traceContext, o.SEED))
			toRecord = append(toRecord, i)
		}
	}
	var pending *journal.Pending
	var err error
	guarded := in.guard != nil && len(payloads) > 0
	var token uint64
	if guarded {
		token = in.guard.Enter()
	}
	if len(payloads) > 0 {
		pending, err = in.journal.Begin(context.Background(), payloads...)
	}
	return func() [][]byte {
		var first uint64
		if pending != nil {
			first, err = pending.Wait()
		}
		if err != nil {
			in.log.Error("journal append failed, packets not acked", slog.Int("packets", len(payloads)), slog.Any("error", err))
			for _, i := range toRecord {
				outs[i].Result = verify.Overloaded
			}
		} else {
			for k, i := range toRecord {
				in.gate.Commit(&outs[i])
				acks[i] = outs[i].Ack
				if in.indexed != nil {
					in.indexed(outs[i].Packet.GetStationId(), outs[i].Packet.GetSeq(), first+uint64(k))
				}
			}
		}
		if guarded {
			in.guard.Leave(token)
		}
		for i := range outs {
			o := &outs[i]
			in.counts.inc(tr, o.Result)
			if o.Result == verify.Accepted {
				in.links.Observe(o.Packet.GetStationId(), o.Packet.GetSeq(), tr, o.Packet.GetRttUs(), o.RecvAt)
			}
		}
		endTraced(traced, outs)
		return acks
	}
}

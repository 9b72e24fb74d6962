// Package recordwire reads and frames svc-ingest's journal records —
// each a serialized ingest.v1.Record — without decoding them: the restart,
// the sync between cores and the forwarders look at a few fields of
// millions of records, and pass the records on as they are.
package recordwire

import "google.golang.org/protobuf/encoding/protowire"

// RecvAt reads a journal record's receive time (Record.recv_at_ms, field
// 2) without decoding the rest; 0 if it has none.
func RecvAt(rec []byte) int64 {
	for len(rec) > 0 {
		num, typ, n := protowire.ConsumeTag(rec)
		if n < 0 {
			return 0
		}
		rec = rec[n:]
		if num == 2 && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(rec)
			if m < 0 {
				return 0
			}
			return int64(v)
		}
		m := protowire.ConsumeFieldValue(num, typ, rec)
		if m < 0 {
			return 0
		}
		rec = rec[m:]
	}
	return 0
}

// Peek reads the station and seq of a journal record without decoding all
// of it: Record.packet (field 1), then Packet.station_id (1) and seq (2).
func Peek(rec []byte) (station string, seq uint64, ok bool) {
	packet, ok := field(rec, 1)
	if !ok {
		return "", 0, false
	}
	var haveStation, haveSeq bool
	for len(packet) > 0 {
		num, typ, n := protowire.ConsumeTag(packet)
		if n < 0 {
			return "", 0, false
		}
		packet = packet[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(packet)
			if m < 0 {
				return "", 0, false
			}
			station, haveStation = string(v), true
			packet = packet[m:]
		case num == 2 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(packet)
			if m < 0 {
				return "", 0, false
			}
			seq, haveSeq = v, true
			packet = packet[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, packet)
			if m < 0 {
				return "", 0, false
			}
			packet = packet[m:]
		}
		if haveStation && haveSeq {
			return station, seq, true
		}
	}
	return station, seq, haveStation && haveSeq
}

// field returns the bytes of the first occurrence of a length-delimited
// field num.
func field(b []byte, num protowire.Number) ([]byte, bool) {
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return nil, false
		}
		b = b[m:]
		if n == num && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			return v, k >= 0
		}
		k := protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			return nil, false
		}
		b = b[k:]
	}
	return nil, false
}

// Intensity tells whether a journal record holds an intensity frame
// (Record.packet, field 1; Packet.intensity, field 10).
func Intensity(rec []byte) bool {
	packet, ok := field(rec, 1)
	if !ok {
		return false
	}
	_, ok = field(packet, 10)
	return ok
}

// AppendBatch appends to b a batch of journal records in the wire form of
// rts.v1 and waveform.v1 IngestRequest, which share it: batch_id (1), the
// records as they are (2, repeated ingest.v1.Record), and rts.v1's
// caught_up (3) when set. An embedded message is its serialization, so the
// receiver decodes what proto.Marshal of the decoded records would give.
func AppendBatch(b []byte, batchID uint64, records [][]byte, caughtUp bool) []byte {
	if batchID != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, batchID)
	}
	for _, r := range records {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, r)
	}
	if caughtUp {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

// BatchSize is the length AppendBatch adds.
func BatchSize(batchID uint64, records [][]byte, caughtUp bool) int {
	n := 0
	if batchID != 0 {
		n += protowire.SizeTag(1) + protowire.SizeVarint(batchID)
	}
	for _, r := range records {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(r))
	}
	if caughtUp {
		n += protowire.SizeTag(3) + 1
	}
	return n
}

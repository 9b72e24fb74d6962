package ticklog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// Precision of the station values kept, per unit: the decimals the
// compatible JSON prints (lib/compatjson), so a replay renders byte for
// byte what the live stream carried.
const (
	motionScale    = 1000 // pga (gal) and pgv (cm/s): 3 decimals
	intensityScale = 100  // real-time and display intensity: 2 decimals
)

// maxQuantum bounds a quantized value: beyond it a float32 no longer holds
// the value to the last printed decimal. Larger values (never real) are
// kept at the bound.
const maxQuantum = 1 << 23

// quantize rounds v to 1/scale, as the compatible JSON prints it; NaN and
// infinities, which it prints as 0, become 0.
func quantize(v float32, scale float64) int64 {
	f := float64(v) * scale
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int64(math.Round(math.Max(-maxQuantum, math.Min(maxQuantum, f))))
}

func dequantize(q int64, scale float64) float32 { return float32(float64(q) / scale) }

// stationFields is how many fields StationState has; the codec stores every
// one of them, and a test fails when the message grows without the codec.
const stationFields = 7

// The per-station flags byte: bit 0 is alert, bits 1–3 the age (age_ms) in
// ticks. svc-rts only sends ages that are whole ticks below 3 s, so they
// fit; any other age is stored as ageEscape in those bits, followed by the
// age in ms as a varint. The other bits are zero. Blocks written before
// the age was on the wire have bits 1–3 zero, age 0, which is what those
// snapshots carried: they read as they were sent, with no format version.
const (
	flagAlert  = 1
	ageShift   = 1
	ageMask    = 7 << ageShift
	ageEscape  = 7
	flagsKnown = flagAlert | ageMask
)

// stationFlags returns the flags byte of st, and whether its age follows
// as a varint.
func stationFlags(st *rtsv1.StationState) (byte, bool) {
	var flags byte
	if st.GetAlert() {
		flags |= flagAlert
	}
	age := st.GetAgeMs()
	if age%tickMs != 0 || age/tickMs >= ageEscape {
		return flags | ageEscape<<ageShift, true
	}
	return flags | byte(age/tickMs)<<ageShift, false
}

// encodeBlock writes snapshots of increasing ticks, all of one block, as
// the uncompressed block payload:
//
//	varint n, then n varint tick offsets from the first, in ticks
//	varint station count, then each ID (varint length, bytes), sorted
//	per snapshot: varint stations present, then per station the varint gap
//	  to its index in the ID list, a flags byte (alert and age, see
//	  flagAlert; the age as a varint after it when it does not fit) and the
//	  zigzag deltas of pga, pgv, intensity, display intensity against the
//	  same station's previous values in the block; then varint length and
//	  the protobuf of the rest of the snapshot (site, boxes, areas,
//	  detections)
//
// Deltas against the previous tick are small numbers for quiet stations,
// which is what makes the archive compact once compressed.
func encodeBlock(snaps []*rtsv1.Snapshot) ([]byte, error) {
	if len(snaps) == 0 {
		return nil, errors.New("empty block")
	}
	first := snaps[0].GetTimeMs()
	b := binary.AppendUvarint(nil, uint64(len(snaps)))
	for _, s := range snaps {
		b = binary.AppendUvarint(b, uint64((s.GetTimeMs()-first)/tickMs))
	}
	var ids []string
	seen := map[string]bool{}
	for _, s := range snaps {
		for _, st := range s.GetStations() {
			if !seen[st.GetStationId()] {
				seen[st.GetStationId()] = true
				ids = append(ids, st.GetStationId())
			}
		}
	}
	slices.Sort(ids)
	index := make(map[string]int, len(ids))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for i, id := range ids {
		index[id] = i
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	prev := make([][4]int64, len(ids))
	for _, s := range snaps {
		stations := s.GetStations()
		b = binary.AppendUvarint(b, uint64(len(stations)))
		last := -1
		for _, st := range stations {
			i := index[st.GetStationId()]
			if i <= last {
				return nil, fmt.Errorf("tick %d: stations not in ID order", s.GetTimeMs())
			}
			b = binary.AppendUvarint(b, uint64(i-last-1))
			last = i
			flags, escaped := stationFlags(st)
			b = append(b, flags)
			if escaped {
				b = binary.AppendUvarint(b, uint64(st.GetAgeMs()))
			}
			q := [4]int64{
				quantize(st.GetPga(), motionScale), quantize(st.GetPgv(), motionScale),
				quantize(st.GetIntensity(), intensityScale), quantize(st.GetDisplayIntensity(), intensityScale),
			}
			for k := range q {
				b = binary.AppendVarint(b, q[k]-prev[i][k])
			}
			prev[i] = q
		}
		rest, err := proto.MarshalOptions{Deterministic: true}.Marshal(&rtsv1.Snapshot{
			Site: s.GetSite(), Boxes: s.GetBoxes(), Areas: s.GetAreas(), Detections: s.GetDetections(),
		})
		if err != nil {
			return nil, fmt.Errorf("tick %d: %w", s.GetTimeMs(), err)
		}
		b = binary.AppendUvarint(b, uint64(len(rest)))
		b = append(b, rest...)
	}
	return b, nil
}

// errCorrupt is a block payload that does not decode.
var errCorrupt = errors.New("corrupt block")

// reader walks a block payload; any read past its end or out of range sets
// err, after which reads return zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// Bounds on what a block may claim, so a damaged one cannot make the
// decoder allocate without limit.
const (
	maxBlockStations = 1 << 20
	maxIDLen         = 256
)

// decodeBlock reverses encodeBlock; first is the block's first tick.
func decodeBlock(payload []byte, first int64) ([]*rtsv1.Snapshot, error) {
	br, err := newBlockReader(payload, first)
	if err != nil {
		return nil, err
	}
	out := make([]*rtsv1.Snapshot, 0, len(br.offsets))
	for range br.offsets {
		s, err := br.walk(true)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// blockReader decodes a block payload tick by tick. A tick's values are
// deltas against the ticks before it, so reaching tick k walks ticks 0 to
// k-1; the reader keeps its place, and a replay client asking for the
// next tick pays for one tick, not for the block. Not safe for concurrent
// use.
type blockReader struct {
	payload []byte
	first   int64
	offsets []int64  // of each tick from first, in ticks
	ids     []string // shared by every snapshot built
	body    []byte   // the payload after the header: tick 0
	r       reader   // at tick next
	next    int
	prev    [][4]int64 // every station's values as of tick next-1
}

// newBlockReader reads a payload's header.
func newBlockReader(payload []byte, first int64) (*blockReader, error) {
	r := reader{b: payload}
	n := r.uvarint(maxBlockTicks)
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = int64(r.uvarint(math.MaxInt32))
		if i > 0 && offsets[i] <= offsets[i-1] && r.err == nil {
			r.err = errCorrupt // ticks increase in a block: at finds them by bisection
		}
	}
	ids := make([]string, r.uvarint(maxBlockStations))
	for i := range ids {
		ids[i] = string(r.bytes(r.uvarint(maxIDLen)))
	}
	if r.err != nil {
		return nil, r.err
	}
	br := &blockReader{payload: payload, first: first, offsets: offsets, ids: ids, body: r.b,
		prev: make([][4]int64, len(ids))}
	br.rewind()
	return br, nil
}

func (br *blockReader) rewind() {
	br.r, br.next = reader{b: br.body}, 0
	clear(br.prev)
}

// size is about what the reader holds in memory.
func (br *blockReader) size() int {
	return len(br.payload) + len(br.ids)*(16+32) + len(br.offsets)*8
}

// at returns the snapshot of tick t; a tick the block does not hold is
// ErrNotFound.
func (br *blockReader) at(t int64) (*rtsv1.Snapshot, error) {
	if t < br.first || (t-br.first)%tickMs != 0 {
		return nil, ErrNotFound
	}
	k, ok := slices.BinarySearch(br.offsets, (t-br.first)/tickMs)
	if !ok {
		return nil, ErrNotFound
	}
	if k < br.next {
		br.rewind()
	}
	for br.next < k {
		if _, err := br.walk(false); err != nil {
			br.rewind()
			return nil, err
		}
	}
	s, err := br.walk(true)
	if err != nil {
		br.rewind()
	}
	return s, err
}

// walk reads tick next, building its snapshot when build is set.
func (br *blockReader) walk(build bool) (*rtsv1.Snapshot, error) {
	if br.next >= len(br.offsets) {
		return nil, errCorrupt
	}
	r, ids, prev := &br.r, br.ids, br.prev
	count := r.uvarint(uint64(len(ids)))
	var stations []*rtsv1.StationState
	if build {
		stations = make([]*rtsv1.StationState, 0, count)
	}
	i := -1
	for range count {
		i += int(r.uvarint(uint64(len(ids)))) + 1
		flags := r.bytes(1)
		if r.err != nil || i >= len(ids) || flags[0]&^flagsKnown != 0 {
			return nil, errCorrupt
		}
		age := uint64((flags[0]&ageMask)>>ageShift) * tickMs
		if age == ageEscape*tickMs {
			age = r.uvarint(math.MaxUint32)
		}
		for m := range prev[i] {
			prev[i][m] += r.varint()
		}
		if !build {
			continue
		}
		q := prev[i]
		stations = append(stations, &rtsv1.StationState{
			StationId: ids[i], Alert: flags[0]&flagAlert != 0, AgeMs: uint32(age),
			Pga: dequantize(q[0], motionScale), Pgv: dequantize(q[1], motionScale),
			Intensity: dequantize(q[2], intensityScale), DisplayIntensity: dequantize(q[3], intensityScale),
		})
	}
	rest := r.bytes(r.uvarint(uint64(len(br.payload))))
	if r.err != nil {
		return nil, r.err
	}
	k := br.next
	br.next++
	if !build {
		return nil, nil
	}
	s := &rtsv1.Snapshot{}
	if err := proto.Unmarshal(rest, s); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	s.TimeMs = br.first + br.offsets[k]*tickMs
	if len(stations) > 0 {
		s.Stations = stations
	}
	return s, nil
}

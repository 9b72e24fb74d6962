// Package checkpoint keeps what a restarted ingest would otherwise read
// back from its journal — which seqs each station has recorded (the replay
// windows) and where they lie in the journal (the sync's index) — in one
// file, with the journal index it covers. A restart loads it and reads on
// from that index only: the records of the last seconds, not the newest
// 4 million.
//
// The file is replaced whole (lib/atomicfile) and ends with a CRC-32C of
// all before it; it also names the checksum of the last record it covers,
// so a journal replaced or cut back since is noticed and the file ignored.
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"shindo.dev/svc-ingest/internal/replay"
)

// Guard makes a checkpoint whole without holding stations' packets back.
// A batch of packets enters it before its journal append and leaves once
// its seqs are in the windows and its indexes in the sync's (Enter,
// Leave); the sync's recording of what the peer sent, which marks seqs
// before its append and takes them back if the append fails, holds it
// (Hold, Release). Quiesce reads the journal's end while no recording of
// the peer's is under way, then waits for the batches that entered before
// that — not for those after, whose records lie above it — and copies.
type Guard struct {
	serial  sync.Mutex   // one Quiesce at a time
	held    sync.RWMutex // the peer's recordings
	mu      sync.Mutex
	drained *sync.Cond
	epoch   uint64
	active  [2]int // batches inside, by epoch's parity
}

// Enter starts a batch, before its records are handed to the journal; its
// token goes to Leave. It never waits.
func (g *Guard) Enter() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.epoch
	g.active[e&1]++
	return e
}

// Leave ends a batch: once the windows and the index hold what it
// appended, or were given nothing after a failed append. Another goroutine
// than Enter's may call it.
func (g *Guard) Leave(token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active[token&1]--
	if g.active[token&1] == 0 && g.drained != nil {
		g.drained.Broadcast()
	}
}

// Hold starts a recording of what the peer sent; Release ends it.
func (g *Guard) Hold()    { g.held.RLock() }
func (g *Guard) Release() { g.held.RUnlock() }

// Quiesce calls mark, which reads the journal's end, then waits until
// every batch that entered before it has left, then calls copy; no
// recording of the peer's runs meanwhile. Whatever copy reads holds every
// record below the end mark read; it may hold later ones too.
func (g *Guard) Quiesce(mark, copy func()) {
	g.serial.Lock()
	defer g.serial.Unlock()
	g.held.Lock()
	defer g.held.Unlock()
	// A batch that appended below the mark entered before it, so in the
	// epoch being closed; one entering after appends above it.
	mark()
	g.mu.Lock()
	if g.drained == nil {
		g.drained = sync.NewCond(&g.mu)
	}
	old := g.epoch
	g.epoch++
	for g.active[old&1] > 0 {
		g.drained.Wait()
	}
	g.mu.Unlock()
	copy()
}

// Blocks is one station's sync index: for each slot of a ring of 64-seq
// blocks, the block (seq/64 + 1, 0 for none) and the journal index of its
// first record.
type Blocks struct {
	Block, First []uint64
}

// State is a checkpoint.
type State struct {
	// Next is the journal index the checkpoint covers up to: every record
	// below it is in Windows and Index.
	Next uint64
	// Mark is the CRC-32C of record Next-1's payload (0 when Next is 0).
	Mark uint32
	// Words is the size of each window's bitmap, in 64-bit words.
	Words   int
	Windows map[string]replay.State
	// Slots is the length of each station's Blocks (0 with no sync).
	Slots int
	Index map[string]Blocks
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum is the checksum Mark holds.
func Sum(payload []byte) uint32 { return crc32.Checksum(payload, castagnoli) }

const magic = "shindo-ingest-checkpoint-1\n"

// Bounds a decoder holds a file to, so a damaged length cannot make it
// allocate without end: a station ID is a registry key (short), a window
// at most a million seqs, a sync ring at most 65,536 blocks.
const (
	maxID    = 256
	maxWords = 1 << 14
	maxSlots = 1 << 16
)

// Encode serializes s. Stations are written in no particular order.
func Encode(s State) []byte {
	b := []byte(magic)
	b = binary.AppendUvarint(b, s.Next)
	b = binary.LittleEndian.AppendUint32(b, s.Mark)
	b = binary.AppendUvarint(b, uint64(s.Words))
	b = binary.AppendUvarint(b, uint64(len(s.Windows)))
	for id, w := range s.Windows {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
		b = binary.AppendUvarint(b, w.Top)
		b = binary.AppendVarint(b, w.ResetAt)
		for _, word := range w.Bits {
			b = binary.LittleEndian.AppendUint64(b, word)
		}
	}
	b = binary.AppendUvarint(b, uint64(s.Slots))
	b = binary.AppendUvarint(b, uint64(len(s.Index)))
	for id, ix := range s.Index {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
		for i := range ix.Block {
			b = binary.AppendUvarint(b, ix.Block[i])
			b = binary.AppendUvarint(b, ix.First[i])
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ErrDamaged is returned for a file that is not a whole checkpoint.
var ErrDamaged = errors.New("checkpoint: damaged or not a checkpoint")

// Decode parses a checkpoint Encode wrote. Every size is checked against
// the bounds above and what is left of b before anything is allocated for
// it, and Encode's layout is asked for exactly.
func Decode(b []byte) (State, error) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return State{}, ErrDamaged
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return State{}, fmt.Errorf("%w: checksum", ErrDamaged)
	}
	d := decoder{b: body[len(magic):]}
	var s State
	s.Next = d.uvarint()
	s.Mark = d.uint32()
	s.Words = d.count(maxWords, 0)
	n := d.count(len(d.b), 1)
	s.Windows = make(map[string]replay.State, n)
	for range n {
		id := d.id()
		w := replay.State{Top: d.uvarint(), ResetAt: d.varint()}
		if d.err == nil && len(d.b) < 8*s.Words {
			d.err = ErrDamaged
		}
		if d.err != nil {
			return State{}, d.err
		}
		w.Bits = make([]uint64, s.Words)
		for i := range w.Bits {
			w.Bits[i] = binary.LittleEndian.Uint64(d.b[8*i:])
		}
		d.b = d.b[8*s.Words:]
		s.Windows[id] = w
	}
	s.Slots = d.count(maxSlots, 0)
	n = d.count(len(d.b), 1)
	s.Index = make(map[string]Blocks, n)
	for range n {
		id := d.id()
		// Each slot takes two bytes at least.
		if d.err == nil && len(d.b) < 2*s.Slots {
			d.err = ErrDamaged
		}
		if d.err != nil {
			return State{}, d.err
		}
		ix := Blocks{Block: make([]uint64, s.Slots), First: make([]uint64, s.Slots)}
		for i := range s.Slots {
			ix.Block[i], ix.First[i] = d.uvarint(), d.uvarint()
		}
		s.Index[id] = ix
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the end", ErrDamaged, len(d.b))
	}
	if d.err != nil {
		return State{}, d.err
	}
	return s, nil
}

// decoder reads Encode's fields; the first error sticks and every later
// read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrDamaged
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = ErrDamaged
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	if d.err == nil && len(d.b) < 4 {
		d.err = ErrDamaged
	}
	if d.err != nil {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// count reads a count of at most limit, each of whose items takes at
// least per bytes of what is left.
func (d *decoder) count(limit, per int) int {
	v := d.uvarint()
	if d.err == nil && (v > uint64(limit) || per > 0 && v > uint64(len(d.b)/per)) {
		d.err = fmt.Errorf("%w: count %d out of bounds", ErrDamaged, v)
	}
	if d.err != nil {
		return 0
	}
	return int(v)
}

func (d *decoder) id() string {
	n := d.count(maxID, 1)
	if d.err != nil {
		return ""
	}
	if n == 0 {
		d.err = fmt.Errorf("%w: empty station", ErrDamaged)
		return ""
	}
	id := string(d.b[:n])
	d.b = d.b[n:]
	return id
}

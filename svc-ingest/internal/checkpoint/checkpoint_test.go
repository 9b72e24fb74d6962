package checkpoint

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"shindo.dev/svc-ingest/internal/replay"
)

func sample() State {
	return State{
		Next: 4_000_123, Mark: Sum([]byte("the last record")), Words: 2,
		Windows: map[string]replay.State{
			"S1":       {Top: 9000, ResetAt: 0, Bits: []uint64{0xffff_0000_ffff_0001, 1}},
			"A-000123": {Top: 1 << 40, ResetAt: 1_764_800_000_000, Bits: []uint64{0, 1 << 63}},
		},
		Slots: 3,
		Index: map[string]Blocks{
			"S1":       {Block: []uint64{141, 0, 140}, First: []uint64{3_999_000, 0, 3_998_000}},
			"A-000123": {Block: []uint64{0, 0, 0}, First: []uint64{0, 0, 0}},
		},
	}
}

// TestRoundTrip: what Encode writes, Decode gives back, with and without
// the sync's index and with no station at all.
func TestRoundTrip(t *testing.T) {
	noSync := sample()
	noSync.Slots, noSync.Index = 0, map[string]Blocks{}
	empty := State{Words: 64, Windows: map[string]replay.State{}, Index: map[string]Blocks{}}
	for name, s := range map[string]State{"whole": sample(), "without sync": noSync, "empty": empty} {
		got, err := Decode(Encode(s))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("%s: decoded\n %+v\nwant\n %+v", name, got, s)
		}
	}
}

// TestDamageIsNoticed: any byte changed, any tail cut off, is refused.
func TestDamageIsNoticed(t *testing.T) {
	b := Encode(sample())
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if _, err := Decode(c); !errors.Is(err, ErrDamaged) {
			t.Fatalf("byte %d changed: %v, want ErrDamaged", i, err)
		}
	}
	for n := range len(b) {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrDamaged) {
			t.Fatalf("cut to %d bytes: %v, want ErrDamaged", n, err)
		}
	}
}

// FuzzDecode: a file of any content is decoded or refused, never a
// panic, and what decodes encodes to a file that decodes the same. Each
// input is tried as it is and with its checksum made right, so the fuzzer
// reaches the fields behind the checksum.
func FuzzDecode(f *testing.F) {
	body := func(s State) []byte { b := Encode(s); return b[:len(b)-4] }
	f.Add(body(sample()))
	f.Add(body(State{Windows: map[string]replay.State{}, Index: map[string]Blocks{}}))
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		summed := binary.LittleEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, castagnoli))
		for _, in := range [][]byte{b, summed} {
			s, err := Decode(in)
			if err != nil {
				continue
			}
			again, err := Decode(Encode(s))
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("re-encoded checkpoint decodes to %+v (%v), want %+v", again, err, s)
			}
		}
	})
}

// TestQuiesceHoldsNoBatchBack: a snapshot waits for the batch that was
// inside when it read the journal's end, not for one that entered after,
// and never keeps a new batch from entering; a recording of the peer's
// waits for it.
func TestQuiesceHoldsNoBatchBack(t *testing.T) {
	var g Guard
	before := g.Enter()
	copied := make(chan struct{})
	marked := make(chan struct{})
	go g.Quiesce(func() { close(marked) }, func() { close(copied) })
	<-marked
	// A batch entering between the mark and the epoch's close is waited
	// for too (it might have appended below the mark); this one enters
	// after.
	for flipped := false; !flipped; {
		g.mu.Lock()
		flipped = g.epoch == 1
		g.mu.Unlock()
	}
	entered := make(chan uint64)
	go func() { entered <- g.Enter() }()
	var after uint64
	select {
	case after = <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("a batch could not enter while a snapshot waited")
	}
	held := make(chan struct{})
	go func() { g.Hold(); close(held); g.Release() }()
	select {
	case <-copied:
		t.Fatal("the snapshot copied before the batch inside at its mark left")
	case <-held:
		t.Fatal("the peer's recording ran during the snapshot")
	case <-time.After(100 * time.Millisecond):
	}
	g.Leave(before)
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		t.Fatal("the snapshot waited for a batch that entered after its mark")
	}
	<-held
	g.Leave(after)
	// And the next snapshot waits for none.
	done := make(chan struct{})
	go g.Quiesce(func() {}, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a snapshot with no batch inside waited")
	}
}

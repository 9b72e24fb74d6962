// Package replay is a per-key anti-replay window, in the
// manner of IPsec's (RFC 4303 §3.4.3): the highest accepted seq plus a bitmap
// of the Size seqs below it. A seq above the window is new; inside it, the
// bitmap tells new from already accepted; below it, the packet is a replay.
package replay

import (
	"fmt"
	"slices"
	"sync"
)

// Verdict is the outcome of checking a seq.
type Verdict int

// Verdicts.
const (
	New       Verdict = iota // never accepted: process it
	Duplicate                // accepted before: ack again, do not process
	TooOld                   // below the window: reject without an ack
)

// Window tracks accepted seqs of one station. It is safe for concurrent use.
type Window struct {
	mu      sync.Mutex
	size    uint64
	top     uint64   // highest accepted seq; 0 before any
	bits    []uint64 // bit (top - seq) set when seq was accepted
	resetAt int64    // the station's counter reset this window follows (Unix ms)
}

// NewWindow returns a window remembering the size seqs below the highest
// accepted one; size is rounded up to a multiple of 64.
func NewWindow(size int) *Window {
	words := max((size+63)/64, 1)
	return &Window{size: uint64(words * 64), bits: make([]uint64, words)}
}

// Check classifies seq without recording it.
func (w *Window) Check(seq uint64) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.check(seq)
}

func (w *Window) check(seq uint64) Verdict {
	switch {
	case seq > w.top:
		return New
	case w.top-seq >= w.size:
		return TooOld
	case w.bit(w.top - seq):
		return Duplicate
	default:
		return New
	}
}

// Reset forgets every seq, for a station whose counter restarted at
// Unix ms at (an admin says so); a reset not later than the last is
// ignored. It reports whether the window was reset.
func (w *Window) Reset(at int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at <= w.resetAt {
		return false
	}
	w.top, w.resetAt = 0, at
	clear(w.bits)
	return true
}

// Top is the highest seq accepted, 0 before any.
func (w *Window) Top() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.top
}

// Accept records seq as accepted and returns the verdict it had before, so
// that of two concurrent deliveries of one seq exactly one sees New.
func (w *Window) Accept(seq uint64) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.check(seq)
	if v != New {
		return v
	}
	if seq > w.top {
		w.shift(seq - w.top)
		w.top = seq
	}
	w.set(w.top - seq)
	return New
}

// Holdings returns the highest accepted seq and a bitmap of the n seqs from
// it downwards (n rounded up to a multiple of 8, at most the window): bit i,
// least significant bit of byte 0 first, is set when seq top−i was
// accepted.
func (w *Window) Holdings(n int) (top uint64, held []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n = min((n+7)/8*8, int(w.size))
	held = make([]byte, n/8)
	for i := range n {
		if w.bit(uint64(i)) {
			held[i/8] |= 1 << (i % 8)
		}
	}
	return w.top, held
}

// Holds reports whether a holdings bitmap (see Holdings) includes seq;
// seqs outside it count as not held.
func Holds(top uint64, held []byte, seq uint64) bool {
	if top == 0 || seq > top || top-seq >= uint64(len(held))*8 {
		return false
	}
	i := top - seq
	return held[i/8]&(1<<(i%8)) != 0
}

// Forget un-records seq, so a later delivery counts as new again; ingest
// uses it when an accepted packet could not be handed on and was not acked.
func (w *Window) Forget(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.top && w.top-seq < w.size {
		off := w.top - seq
		w.bits[off/64] &^= 1 << (off % 64)
	}
}

func (w *Window) bit(off uint64) bool { return w.bits[off/64]&(1<<(off%64)) != 0 }
func (w *Window) set(off uint64)      { w.bits[off/64] |= 1 << (off % 64) }

// shift moves the bitmap n places further from the top.
func (w *Window) shift(n uint64) {
	if n >= w.size {
		clear(w.bits)
		return
	}
	words, rem := n/64, n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if src := i - int(words); src >= 0 {
			v = w.bits[src] << rem
			if rem != 0 && src-1 >= 0 {
				v |= w.bits[src-1] >> (64 - rem)
			}
		}
		w.bits[i] = v
	}
}

// Set holds one window per station.
type Set struct {
	size int
	mu   sync.RWMutex
	m    map[string]*Window
}

// NewSet returns an empty set of windows of size.
func NewSet(size int) *Set { return &Set{size: size, m: map[string]*Window{}} }

// For returns the station's window, creating it on first use.
func (s *Set) For(station string) *Window {
	s.mu.RLock()
	w := s.m[station]
	s.mu.RUnlock()
	if w != nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w = s.m[station]; w == nil {
		w = NewWindow(s.size)
		s.m[station] = w
	}
	return w
}

// State is a window's content, for keeping it across a restart.
type State struct {
	Top     uint64   // highest accepted seq
	ResetAt int64    // the counter reset the window follows (Unix ms)
	Bits    []uint64 // bit (Top - seq) set when seq was accepted
}

// States returns a copy of every station's window.
func (s *Set) States() map[string]State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]State, len(s.m))
	for id, w := range s.m {
		w.mu.Lock()
		out[id] = State{Top: w.top, ResetAt: w.resetAt, Bits: slices.Clone(w.bits)}
		w.mu.Unlock()
	}
	return out
}

// Words is how many 64-bit words of Bits a State of this set has.
func (s *Set) Words() int { return len(NewWindow(s.size).bits) }

// Restore replaces the set's windows with states (from States, before a
// restart). A state whose bitmap is not of this set's size is refused
// whole: the window's size was changed in between.
func (s *Set) Restore(states map[string]State) error {
	words := s.Words()
	m := make(map[string]*Window, len(states))
	for id, st := range states {
		if len(st.Bits) != words {
			return fmt.Errorf("replay: window of %s holds %d seqs, want %d", id, len(st.Bits)*64, words*64)
		}
		w := NewWindow(s.size)
		w.top, w.resetAt = st.Top, st.ResetAt
		copy(w.bits, st.Bits)
		m[id] = w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = m
	return nil
}

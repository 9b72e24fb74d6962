package replay

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func TestWindowSequence(t *testing.T) {
	t.Parallel()
	w := NewWindow(128)
	steps := []struct {
		seq    uint64
		accept bool
		want   Verdict
	}{
		{100, true, New},
		{100, true, Duplicate},
		{99, true, New},
		{101, false, New}, // Check only
		{101, true, New},
		{101, true, Duplicate},
		{99, false, Duplicate},
		{300, true, New},    // jump: window now (172, 300]
		{173, true, New},    // inside, never seen
		{172, true, TooOld}, // exactly size below top
		{101, true, TooOld},
		{300, false, Duplicate},
		{1 << 40, true, New}, // huge jump clears everything
		{300, true, TooOld},
	}
	for i, s := range steps {
		var got Verdict
		if s.accept {
			got = w.Accept(s.seq)
		} else {
			got = w.Check(s.seq)
		}
		if got != s.want {
			t.Fatalf("step %d seq %d: got %v, want %v", i, s.seq, got, s.want)
		}
	}
}

// TestWindowMatchesModel compares the bitmap against a plain map of accepted
// seqs on random traffic with reordering and duplicates.
func TestWindowMatchesModel(t *testing.T) {
	t.Parallel()
	const size = 256
	w := NewWindow(size)
	seen := map[uint64]bool{}
	var top uint64
	r := rand.New(rand.NewPCG(1, 2))
	base := uint64(1000)
	for range 200_000 {
		base += uint64(r.IntN(3))
		seq := base - uint64(r.IntN(400)) + uint64(r.IntN(70))
		want := New
		switch {
		case seq <= top && top-seq >= size:
			want = TooOld
		case seen[seq]:
			want = Duplicate
		}
		if got := w.Accept(seq); got != want {
			t.Fatalf("seq %d (top %d): got %v, want %v", seq, top, got, want)
		}
		if want == New {
			seen[seq] = true
			top = max(top, seq)
		}
	}
}

func TestConcurrentDeliveryAcceptsOnce(t *testing.T) {
	t.Parallel()
	set := NewSet(1024)
	var news atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for seq := uint64(1); seq <= 5000; seq++ {
				if set.For("S1").Accept(seq) == New {
					news.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if news.Load() != 5000 {
		t.Fatalf("%d seqs accepted as new, want 5000", news.Load())
	}
}

func BenchmarkAccept(b *testing.B) {
	w := NewWindow(1024)
	seq := uint64(0)
	for b.Loop() {
		seq++
		w.Accept(seq)
	}
}

func TestForget(t *testing.T) {
	t.Parallel()
	w := NewWindow(64)
	w.Accept(10)
	w.Forget(10)
	if got := w.Accept(10); got != New {
		t.Fatalf("after Forget: %v", got)
	}
	w.Forget(1 << 20) // above the window: no effect, no panic
	if got := w.Check(10); got != Duplicate {
		t.Fatalf("after unrelated Forget: %v", got)
	}
}

func TestHoldings(t *testing.T) {
	t.Parallel()
	w := NewWindow(256)
	for _, s := range []uint64{100, 98, 97, 90, 37, 36} { // 36 is 64 below the top: outside
		w.Accept(s)
	}
	top, held := w.Holdings(64)
	if top != 100 || len(held) != 8 {
		t.Fatalf("top %d, %d bytes", top, len(held))
	}
	for seq := uint64(30); seq <= 101; seq++ {
		want := seq == 100 || seq == 98 || seq == 97 || seq == 90 || seq == 37
		if got := Holds(top, held, seq); got != want {
			t.Errorf("seq %d: holds %v, want %v", seq, got, want)
		}
	}
	if Holds(0, nil, 1) {
		t.Error("empty holdings hold something")
	}
	if _, h := w.Holdings(100_000); len(h) != 256/8 {
		t.Errorf("holdings beyond the window: %d bytes", len(h))
	}
}

// TestStatesRestore: a set restored from another's states answers every
// check as the other does, and states of another window size are refused
// whole.
func TestStatesRestore(t *testing.T) {
	a := NewSet(256)
	for _, seq := range []uint64{1, 2, 3, 70, 200, 300, 301, 555} {
		a.For("S1").Accept(seq)
	}
	a.For("S2").Reset(1234)
	a.For("S2").Accept(9)
	b := NewSet(256)
	b.For("S3").Accept(1) // forgotten by the restore
	if err := b.Restore(a.States()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"S1", "S2", "S3"} {
		for seq := range uint64(600) {
			if got, want := b.For(id).Check(seq), a.For(id).Check(seq); got != want {
				t.Fatalf("%s seq %d: restored set says %v, the original %v", id, seq, got, want)
			}
		}
	}
	if b.For("S2").Reset(1234) {
		t.Error("the restored window forgot the counter reset it follows")
	}
	if err := NewSet(512).Restore(a.States()); err == nil {
		t.Error("states of 256-seq windows restored into a set of 512-seq windows")
	}
}

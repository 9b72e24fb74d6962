package fanout

import (
	"sync"
	"testing"
)

func TestPublishFilterDrop(t *testing.T) {
	t.Parallel()
	h := New[int](0)
	fast, _, has, ok := h.Subscribe(2, nil)
	if !ok || has {
		t.Fatalf("subscribe: ok %v, latest present %v", ok, has)
	}
	slow, _, _, _ := h.Subscribe(2, nil)
	evens, _, _, _ := h.Subscribe(2, func(v int) bool { return v%2 == 0 })
	for v := 1; v <= 5; v++ {
		h.Publish(v)
		if got := <-fast.C; got != v {
			t.Fatalf("fast got %d, want %d", got, v)
		}
	}
	select {
	case <-slow.Dropped:
	default:
		t.Fatal("slow subscriber not dropped")
	}
	if got := []int{<-evens.C, <-evens.C}; got[0] != 2 || got[1] != 4 {
		t.Fatalf("evens got %v", got)
	}
	select {
	case <-evens.Dropped:
		t.Fatal("filtered subscriber dropped although it had room")
	default:
	}
	if n, dropped := h.Stats(); n != 2 || dropped != 1 {
		t.Fatalf("stats %d %d", n, dropped)
	}
	_, latest, has, _ := h.Subscribe(1, nil)
	if !has || latest != 5 {
		t.Fatalf("latest %d %v", latest, has)
	}
	h.Unsubscribe(slow) // after a drop: no effect
	h.Unsubscribe(fast)
	if n, _ := h.Stats(); n != 2 {
		t.Fatalf("%d subscribers after unsubscribe", n)
	}
}

func TestMaxSubscribers(t *testing.T) {
	t.Parallel()
	h := New[string](1)
	if _, _, _, ok := h.Subscribe(1, nil); !ok {
		t.Fatal("first refused")
	}
	if _, _, _, ok := h.Subscribe(1, nil); ok {
		t.Fatal("second accepted beyond the limit")
	}
}

// TestConcurrent: four publishers and eight readers at once (run it with
// -race). Every reader with room for all the values gets each one exactly
// once, each publisher's in the order it published them; a reader that
// never reads is dropped, counted, and never holds a publisher up.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const publishers, perPublisher, readers = 4, 500, 8
	h := New[int](0)
	stuck, _, _, _ := h.Subscribe(1, nil) // never reads
	got := make([][]int, readers)
	var wg sync.WaitGroup
	for r := range readers {
		s, _, _, _ := h.Subscribe(publishers*perPublisher, nil)
		wg.Go(func() {
			defer h.Unsubscribe(s)
			for range publishers * perPublisher {
				select {
				case v := <-s.C:
					got[r] = append(got[r], v)
				case <-s.Dropped:
					return
				}
			}
		})
	}
	var pub sync.WaitGroup
	for p := range publishers {
		pub.Go(func() {
			for i := range perPublisher {
				h.Publish(p*perPublisher + i)
			}
		})
	}
	pub.Wait()
	wg.Wait()
	for r, vs := range got {
		if len(vs) != publishers*perPublisher {
			t.Fatalf("reader %d got %d values, want %d", r, len(vs), publishers*perPublisher)
		}
		next := make([]int, publishers) // the next value expected of each publisher
		for _, v := range vs {
			p, i := v/perPublisher, v%perPublisher
			if i != next[p] {
				t.Fatalf("reader %d: publisher %d's value %d after %d", r, p, i, next[p]-1)
			}
			next[p]++
		}
	}
	select {
	case <-stuck.Dropped:
	default:
		t.Fatal("the reader that never reads was not dropped")
	}
	if n, dropped := h.Stats(); n != 0 || dropped != 1 {
		t.Fatalf("%d subscribers left, %d dropped; want 0 and 1", n, dropped)
	}
}

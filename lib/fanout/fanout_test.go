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

func TestConcurrent(t *testing.T) {
	t.Parallel()
	h := New[int](0)
	var wg sync.WaitGroup
	for range 8 {
		s, _, _, _ := h.Subscribe(1000, nil)
		wg.Go(func() {
			defer h.Unsubscribe(s)
			for range 100 {
				select {
				case <-s.C:
				case <-s.Dropped:
					return
				}
			}
		})
	}
	for v := range 1000 {
		h.Publish(v)
	}
	wg.Wait()
}

package live

import (
	"testing"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

func TestRoutesAndDropsSlowSubscribers(t *testing.T) {
	t.Parallel()
	h := NewHub()
	fast := h.Subscribe([]string{"A"})
	slow := h.Subscribe([]string{"A", "B"})
	other := h.Subscribe([]string{"C"})
	for i := range Buffer + 1 {
		h.Publish(&waveformv1.Chunk{StationId: "A", FirstSampleMs: int64(i)})
		<-fast.C // fast keeps up
	}
	select {
	case <-slow.Dropped:
	default:
		t.Fatal("slow subscriber not dropped")
	}
	select {
	case <-fast.Dropped:
		t.Fatal("fast subscriber dropped")
	case <-other.C:
		t.Fatal("chunk of A reached a subscriber of C")
	default:
	}
	if subs, dropped := h.Count(); subs != 2 || dropped != 1 {
		t.Fatalf("subs %d dropped %d", subs, dropped)
	}
	h.Unsubscribe(fast)
	if subs, _ := h.Count(); subs != 1 {
		t.Fatalf("subs %d after unsubscribe", subs)
	}
}

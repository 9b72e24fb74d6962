package watch

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/poll"
	datav1 "shindo.dev/gen/shindo/data/v1"
)

// TestHubBounds: no watch before the state was read, none past the limit;
// a watcher that falls more than its buffer behind is dropped with
// ResourceExhausted while another keeps every change; a watcher that
// leaves frees its place.
func TestHubBounds(t *testing.T) {
	t.Parallel()
	h := newHub("reports", &datav1.WatchReportsResponse{}, 2, 2, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := h.subscribe(); status.Code(err) != codes.Unavailable {
		t.Fatalf("before the first read: %v", err)
	}
	h.publish(&datav1.WatchReportsResponse{Initial: true}, nil, false)

	// The slow watcher takes the state, then stops at the first change.
	release := make(chan struct{})
	slowDone := make(chan error, 1)
	var slowSent int
	go func() {
		slowDone <- h.serve(ctx, func(*datav1.WatchReportsResponse) error {
			if slowSent++; slowSent > 1 {
				<-release
			}
			return nil
		})
	}()
	fast := make(chan *datav1.WatchReportsResponse, 16)
	fastCtx, leave := context.WithCancel(ctx)
	fastDone := make(chan error, 1)
	go func() {
		fastDone <- h.serve(fastCtx, func(m *datav1.WatchReportsResponse) error { fast <- m; return nil })
	}()
	waitWatchers(t, h, 2)
	if _, _, err := h.subscribe(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third watcher of 2: %v", err)
	}
	<-fast // the state

	// One change blocks the slow watcher's send, two fill its buffer, the
	// fourth drops it; the fast watcher gets each.
	for i := range 4 {
		id := string(rune('A' + i))
		h.publish(&datav1.WatchReportsResponse{Initial: true}, &datav1.WatchReportsResponse{Reports: []*datav1.Report{{Id: id}}}, true)
		select {
		case m := <-fast:
			if got := m.GetReports()[0].GetId(); got != id {
				t.Fatalf("fast watcher got %s, want %s", got, id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("fast watcher missed change %s", id)
		}
		if i == 0 {
			poll.Until(t, 5*time.Second, "the slow watcher took the first change", func() bool { return queued(h) == 0 })
		}
	}
	close(release)
	if err := <-slowDone; status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slow watcher ended with %v, want ResourceExhausted", err)
	}
	leave()
	if err := <-fastDone; status.Code(err) != codes.Canceled {
		t.Fatalf("watcher that left: %v", err)
	}
	waitWatchers(t, h, 0)
}

func waitWatchers(t *testing.T, h *hub[*datav1.WatchReportsResponse], n int) {
	t.Helper()
	got := 0
	if !poll.Within(5*time.Second, func() bool {
		h.mu.Lock()
		got = len(h.watchers)
		h.mu.Unlock()
		return got == n
	}) {
		t.Fatalf("%d watchers, want %d", got, n)
	}
}

// queued is how many changes the watchers have yet to take.
func queued(h *hub[*datav1.WatchReportsResponse]) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for w := range h.watchers {
		n += len(w.ch)
	}
	return n
}

// TestHubHeartbeat: a watcher of a quiet core hears an empty message every
// heartbeat, so it can tell a core gone silent from a quiet one.
func TestHubHeartbeat(t *testing.T) {
	t.Parallel()
	h := newHub("stations", &datav1.WatchStationsResponse{}, 1, 1, 10*time.Millisecond)
	h.publish(&datav1.WatchStationsResponse{Initial: true, Stations: []*datav1.Station{{Id: "A"}}}, nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan *datav1.WatchStationsResponse, 8)
	done := make(chan error, 1)
	go func() {
		done <- h.serve(ctx, func(m *datav1.WatchStationsResponse) error {
			select {
			case got <- m:
			default:
			}
			return nil
		})
	}()
	if m := <-got; !m.GetInitial() || len(m.GetStations()) != 1 {
		t.Fatalf("first message %v", m)
	}
	for range 2 {
		select {
		case m := <-got:
			if m.GetInitial() || len(m.GetStations())+len(m.GetRemovedIds()) != 0 {
				t.Fatalf("heartbeat %v, want an empty message", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	cancel()
	<-done
}

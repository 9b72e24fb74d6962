package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSubscribeLimit: notification subscriptions draw on their address's
// bucket (IPv6 by /64), then on the edge's; refusals are 429 with
// Retry-After, counted by bucket.
func TestSubscribeLimit(t *testing.T) {
	t.Parallel()
	l := newSubscribeLimit(0.001, 3, 0.001, 5)
	try := func(remote string) int {
		r := httptest.NewRequest("GET", "/v1/stream?topics=notify&client=abcdefghijklmnop", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		if l.admit(w, r) {
			return 200
		}
		if w.Code != 429 || w.Header().Get("Retry-After") == "" {
			t.Fatalf("refusal %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
		}
		return w.Code
	}
	served := func(remote string, n int) (ok int) {
		for range n {
			if try(remote) == 200 {
				ok++
			}
		}
		return ok
	}
	if ok := served("192.0.2.1:5000", 6); ok != 3 {
		t.Fatalf("one address with a burst of 3: %d served", ok)
	}
	// Two addresses of one /64 are one client: 2 of its 3 go through,
	// and the edge's burst of 5 is spent.
	if a, b := served("[2001:db8::1]:5000", 1), served("[2001:db8::2]:5001", 3); a+b != 2 {
		t.Fatalf("one /64 once the edge has 2 left: %d+%d served", a, b)
	}
	if ok := served("198.51.100.7:5000", 2); ok != 0 {
		t.Fatalf("past the edge's burst: %d served", ok)
	}
	// 3 refusals of 192.0.2.1, 1 of the /64 (its 4th try); 1 of the /64
	// and 2 of 198.51.100.7 by the edge.
	if got := testutil.ToFloat64(l.refused.WithLabelValues("address")); got != 4 {
		t.Errorf("refused by address: %v, want 4", got)
	}
	if got := testutil.ToFloat64(l.refused.WithLabelValues("edge")); got != 3 {
		t.Errorf("refused by the edge: %v, want 3", got)
	}

	// With the edge unbounded, the /64 has a burst of its own.
	l = newSubscribeLimit(0.001, 3, 0, 1)
	if a, b := served("[2001:db8::1]:5000", 2), served("[2001:db8::ffff]:5001", 2); a+b != 3 {
		t.Fatalf("one /64 with a burst of 3: %d+%d served", a, b)
	}
	if ok := served("[2001:db8:0:1::1]:5000", 3); ok != 3 {
		t.Fatalf("the next /64: %d served", ok)
	}
}

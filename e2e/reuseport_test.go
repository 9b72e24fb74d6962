package e2e

import (
	"context"
	"testing"
	"time"
)

// TestEdgeProcessesShareAnAddress: two edge processes of one site on one
// address (-http-reuse-port) both take connections, and a client that
// reconnects with Last-Event-ID resumes without a gap or a repeat
// whichever of them it lands on — their event IDs come from the data.
func TestEdgeProcessesShareAnAddress(t *testing.T) {
	d := startDev(t, "-stations", "3")
	addr, _, admins := startSharedEdges(t, d, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Sixteen reconnects, each a new connection (the earlier ones stay open,
	// so each is placed by the kernel afresh), each resuming after the
	// last event the one before it got.
	const rounds = 16
	last := ""
	for round := range rounds {
		url := "http://" + addr + "/v1/stream?topics=rts"
		if last != "" {
			url += "&last_event_id=" + last
		}
		c := collect(openSSE(ctx, t, url))
		c.waitLast(t, 2)
		evs := c.snapshot()
		if last != "" && idTick(t, evs[0].id) != idTick(t, last)+500 {
			t.Fatalf("round %d: resumed after %s at %s", round, last, evs[0].id)
		}
		for i := 1; i < len(evs); i++ {
			if idTick(t, evs[i].id) != idTick(t, evs[i-1].id)+500 {
				t.Fatalf("round %d: %s after %s", round, evs[i].id, evs[i-1].id)
			}
		}
		last = evs[len(evs)-1].id
		// A tick or two go by between connections, which the next must
		// resume across: the gap is the case under test.
		time.Sleep(700 * time.Millisecond) //nolint:forbidigo // the gap between connections, not a wait
	}

	// Both processes hold some of the connections: all sixteen on one has
	// odds of 1 in 32,768.
	var held []float64
	for _, a := range admins {
		_, page := httpGet(t, a+"/metrics")
		held = append(held, metricValue(page, "shindo_edge_sse_clients"))
	}
	if held[0]+held[1] != rounds || held[0] == 0 || held[1] == 0 {
		t.Fatalf("the processes hold %v of %d connections", held, rounds)
	}
	t.Logf("connections per process: %v", held)
}

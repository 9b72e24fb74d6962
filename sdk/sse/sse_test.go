package sse

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// entrance serves events numbered from the Last-Event-ID it is given, and
// drops the connection after n of them.
func entrance(t *testing.T, name string, n int, lastIDs *[]string, mu *sync.Mutex) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*lastIDs = append(*lastIDs, name+":"+r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 20\n\n: hello\n\n")
		start := 0
		fmt.Sscan(r.Header.Get("Last-Event-ID"), &start)
		for i := start + 1; i <= start+n; i++ {
			fmt.Fprintf(w, "id: %d\nevent: tick\ndata: {\"n\":%d}\n\n", i, i)
		}
		w.(http.Flusher).Flush()
	}))
	t.Cleanup(s.Close)
	return s
}

func TestReconnectsWithLastEventIDThenSwitchesAfterThreeFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	a := entrance(t, "A", 2, &seen, &mu)
	b := entrance(t, "B", 2, &seen, &mu)

	var states []State
	events := make(chan Event, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go Stream(ctx, Options{
		Entrances: []string{a.URL, b.URL}, Path: "/v1/stream", Retry: time.Hour,
		OnState: func(s State) { mu.Lock(); states = append(states, s); mu.Unlock() },
	}, events)

	var got []Event
	for len(got) < 4 {
		got = append(got, <-events)
	}
	// A served 1–2, dropped; the reconnect to A asked for more after 2.
	if got[0].Entry != a.URL || got[1].Data != `{"n":2}` || got[2].Entry != a.URL || got[2].ID != "3" {
		t.Fatalf("events %+v", got)
	}
	// A goes down: three failed reconnects, then B, resuming after the
	// last event seen.
	addr := a.Listener.Addr().String()
	a.CloseClientConnections()
	a.Close()
	hold, err := net.Listen("tcp", addr) // refuse nothing: accept and close, as a dead server's host might
	if err == nil {
		go func() {
			for {
				c, err := hold.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		defer hold.Close()
	}
	var fromB Event
	for fromB.Entry != b.URL {
		fromB = <-events
	}
	mu.Lock()
	defer mu.Unlock()
	failures := 0
	for _, s := range states {
		if s.Entrance == a.URL && s.Failures > 0 {
			failures = s.Failures
		}
	}
	if failures != 3 {
		t.Fatalf("switched after %d failed reconnects, want 3 (states %+v)", failures, states)
	}
	last := seen[len(seen)-1]
	if last != "B:4" {
		t.Fatalf("B was asked with %q, want Last-Event-ID 4", last)
	}
	if fromB.ID != "5" {
		t.Fatalf("first event from B %+v", fromB)
	}
}

func TestNoEntrance(t *testing.T) {
	t.Parallel()
	if err := Stream(context.Background(), Options{}, make(chan Event)); err == nil {
		t.Fatal("no error without entrances")
	}
}

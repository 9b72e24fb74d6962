package sse

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// FuzzParser: any stream the client is sent gives events as the HTML
// standard's EventSource would, each dispatched by a blank line, ids
// without NUL, data within maxEvent, and a retry within maxRetry, never a
// panic; a stream of well-formed events comes back as sent.
func FuzzParser(f *testing.F) {
	f.Add("retry: 20\n\n: hello\n\nevent: tick\nid: 1-0\ndata: {\"a\":1}\ndata: x\n\n")
	f.Add("data\n\ndata:\n\nevent:\n\n")
	f.Add("id: a\x00b\ndata: y\n\nretry: 99999999999999999999\nretry: 9223372036854775807\nretry: -5\n\n")
	f.Add("\n\n\n:comment only\nfield without colon\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		var p parser
		blank := 0
		for _, l := range strings.Split(stream, "\n") {
			ev, ok, err := p.line(l)
			if l == "" {
				blank++
			}
			if err != nil {
				return
			}
			if ok && l != "" {
				t.Fatalf("event %+v dispatched by %q", ev, l)
			}
			if strings.ContainsRune(ev.ID, 0) || len(ev.Data) > maxEvent {
				t.Fatalf("event %+v", ev)
			}
			if p.retry < 0 || p.retry > maxRetry {
				t.Fatalf("retry %v", p.retry)
			}
		}

		// As sent: events made of the fuzzed text's lines, each a field
		// value free of line ends.
		var sent []Event
		var b strings.Builder
		for i, v := range strings.Split(stream, "\n") {
			if strings.ContainsRune(v, '\r') {
				continue
			}
			ev := Event{Name: fmt.Sprint("e", i), Data: v}
			sent = append(sent, ev)
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.Name, ev.Data)
		}
		var got []Event
		p = parser{}
		for _, l := range strings.Split(b.String(), "\n") {
			if ev, ok, err := p.line(l); err != nil {
				t.Fatal(err)
			} else if ok {
				got = append(got, ev)
			}
		}
		if len(got) != len(sent) {
			t.Fatalf("%d events, sent %d", len(got), len(sent))
		}
		for i := range got {
			if got[i] != sent[i] {
				t.Fatalf("event %d: %+v, sent %+v", i, got[i], sent[i])
			}
		}
	})
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shindo.dev/devkit/faultproxy"
	"shindo.dev/sdk"
	"shindo.dev/sdk/sse"
)

// TestSDKAgainstRealServers runs the Go SDK against the running topology
// with failures injected in front of the real edges:
//   - the data API client passes over a refused connection, a timeout
//     (a blackholed path) and a 503 to the working edge, and stays there on
//     404 and 400;
//   - the SSE client, its edge killed, reconnects to it, switches to the
//     other edge after exactly three failed reconnects, and resumes there
//     with Last-Event-ID without losing a tick.
func TestSDKAgainstRealServers(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	khh := d.endpoints.get(t, "KHH-1", "edge", "http")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The failures, each in front of a real edge.
	refused := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	tpeURL, _ := url.Parse(tpe)
	hole, err := faultproxy.ListenTCP("127.0.0.1:0", tpeURL.Host, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	hole.SetBoth(faultproxy.Impairment{Blackhole: true})
	var unavailable atomic.Int64
	overloaded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An entrance answering 503, as an overloaded one does.
		unavailable.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
	}))
	defer overloaded.Close()

	client, err := sdk.New([]string{refused, "http://" + hole.Addr().String(), overloaded.URL, khh},
		sdk.WithHTTPClient(&http.Client{Timeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Stations []struct{ ID string }
	}
	if err := client.Get(ctx, "/v1/stations", &list); err != nil {
		t.Fatalf("GET /v1/stations through the failures: %v", err)
	}
	if client.Base() != khh || len(list.Stations) != 1 {
		t.Fatalf("served by %s with %d stations, want %s", client.Base(), len(list.Stations), khh)
	}
	if hole.Stats().Accepted == 0 || unavailable.Load() == 0 {
		t.Fatalf("the timeout (%d connections) and the 503 (%d answers) were not met on the way", hole.Stats().Accepted, unavailable.Load())
	}
	for path, code := range map[string]int{"/v1/stations/NOPE": http.StatusNotFound, "/v1/stations?net=" + strings.Repeat("x", 40): http.StatusBadRequest} {
		err := client.Get(ctx, path, nil)
		var se *sdk.StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Fatalf("GET %s: %v, want %d", path, err, code)
		}
		if client.Base() != khh {
			t.Fatalf("a %d switched the base URL to %s", code, client.Base())
		}
	}

	// SSE: TPE-1 first; it dies.
	var mu sync.Mutex
	var states []sse.State
	events := make(chan sse.Event, 256)
	go sse.Stream(ctx, sse.Options{Entrances: []string{tpe, khh}, Path: "/v1/stream?topics=rts",
		OnState: func(s sse.State) {
			mu.Lock()
			states = append(states, s)
			mu.Unlock()
		}}, events)
	var ticks []int64
	var at []string
	next := func() sse.Event {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.ID == "" || ev.Name != "" {
					continue // the hello
				}
				ms, _, _ := strings.Cut(ev.ID, "-")
				n, _ := strconv.ParseInt(ms, 10, 64)
				ticks, at = append(ticks, n), append(at, ev.Entry)
				return ev
			case <-time.After(30 * time.Second):
				t.Fatal("no event for 30 s")
			}
		}
	}
	for range 4 {
		if ev := next(); ev.Entry != tpe {
			t.Fatalf("first events from %s", ev.Entry)
		}
	}
	killed := time.Now()
	fault(t, d, "kill", "TPE-1-edge")
	for next().Entry != khh {
	}
	switchedAfter := time.Since(killed)
	for range 3 {
		next()
	}

	mu.Lock()
	defer mu.Unlock()
	var failures []int
	switched := false
	for _, s := range states {
		if s.Entrance == tpe && !s.Connected && s.Failures > 0 {
			failures = append(failures, s.Failures)
		}
		if s.Entrance == khh && s.Connected && s.Switched {
			switched = true
		}
	}
	if fmt.Sprint(failures) != "[1 2 3]" || !switched {
		t.Fatalf("failed reconnects at TPE-1 %v, switched %v; want [1 2 3] then a switch", failures, switched)
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i] != ticks[i-1]+500 {
			t.Fatalf("ticks %d (%s) → %d (%s): not the next tick across the switch", ticks[i-1], at[i-1], ticks[i], at[i])
		}
	}
	t.Logf("switched to KHH-1 %s after the kill, after 3 failed reconnects; no tick lost", switchedAfter.Round(100*time.Millisecond))
}

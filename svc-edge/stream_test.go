package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/compatjson"
	"shindo.dev/svc-edge/internal/sse"
)

// openStream connects to /v1/stream with a query and optional
// Last-Event-ID, returning the response and its event blocks after the
// retry hint and hello.
func openStream(t *testing.T, url, query, lastID string) (*http.Response, <-chan string) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/v1/stream?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	blocks := readBlocks(resp.Body)
	if got := <-blocks; got != "retry: 3000\n" {
		t.Fatalf("first block %q", got)
	}
	if got := next(t, blocks); got != "event: info\ndata: {\"location\":\"TPE-1\"}\n" {
		t.Fatalf("hello %q", got)
	}
	return resp, blocks
}

// eventID returns the id line of the next block.
func eventID(t *testing.T, blocks <-chan string) string {
	t.Helper()
	select {
	case b := <-blocks:
		id, _, _ := strings.Cut(b, "\n")
		if !strings.HasPrefix(id, "id: ") {
			t.Fatalf("event without an id: %q", b)
		}
		return strings.TrimPrefix(id, "id: ")
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return ""
	}
}

// TestStreamResume: /v1/stream interleaves the chosen topics in tick order,
// every event with an id; a client that reconnects with the last id it
// saw gets exactly what it missed, in order, then the live stream.
func TestStreamResume(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	tick := func(ms int64, ds ...*rtsv1.Detection) { t.Helper(); serveTick(t, st, a, ms, ds...) }
	tick(500)
	resp, blocks := openStream(t, url, "topics=rts,eew", "")
	// The latest of each topic at once: the tick, and the (empty) alert
	// list.
	for _, want := range []string{"500-0", "500-1"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("latest %s, want %s", got, want)
		}
	}
	waitClients(t, st.hub, 1)
	tick(1000, detection("X", 1, false))
	for _, want := range []string{"1000-0", "1000-1"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("live %s, want %s", got, want)
		}
	}
	resp.Body.Close()

	// Missed while away: ticks 1500..3000 and the alert list at each of
	// them (listed alerts repeat every tick).
	waitClients(t, st.hub, 0)
	tick(1500, detection("X", 1, false))
	tick(2000, detection("X", 2, false))
	tick(2500, detection("X", 2, false))
	tick(3000, detection("X", 3, true))
	_, blocks = openStream(t, url, "topics=rts,eew", "1000-1")
	for _, want := range []string{"1500-0", "1500-1", "2000-0", "2000-1", "2500-0", "2500-1", "3000-0", "3000-1"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("replay %s, want %s", got, want)
		}
	}
	waitClients(t, st.hub, 1)
	tick(3500) // the final alert leaves the list
	for _, want := range []string{"3500-0", "3500-1"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("live after replay %s, want %s", got, want)
		}
	}
	select {
	case extra := <-blocks:
		t.Fatalf("unexpected %q", extra)
	case <-time.After(50 * time.Millisecond):
	}

	// One topic only: the alert lists since 1000-1, nothing of RTS.
	_, blocks = openStream(t, url, "topics=eew&last_event_id=1000-1", "")
	for _, want := range []string{"1500-1", "2000-1", "2500-1", "3000-1", "3500-1"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("eew replay %s, want %s", got, want)
		}
	}
}

// TestStreamRefusals: unknown topics, no topics and foreign ids get 400;
// too many streams from one address get 429 with Retry-After.
func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	_, _, _, st, url := edgeWithCores(t)
	for _, q := range []string{"", "topics=", "topics=rts,quakes", "topics=rts&last_event_id=yesterday"} {
		resp, _ := openStream(t, url, q, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %d", q, resp.StatusCode)
		}
	}
	if resp, _ := openStream(t, url, "topics=rts", "1;DROP"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad Last-Event-ID header: %d", resp.StatusCode)
	}

	st.perAddr = newAddrLimit(2)
	for i := range 2 {
		if resp, _ := openStream(t, url, "topics=rts", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
	}
	resp, _ := openStream(t, url, "topics=rts", "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := st.perAddr.turnedAway(); n != 1 {
		t.Errorf("turned away %d, want 1", n)
	}
}

// TestWaveformRefusals: a malformed station ID gets 400 and an unknown
// one 404 before any core is asked for its samples.
func TestWaveformRefusals(t *testing.T) {
	t.Parallel()
	st, err := newStreams("TPE-1", compatjson.DefaultAuthor, sse.Options{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	ws := &waveformStream{live: nil, streams: st, exists: func(_ context.Context, id string) (bool, error) { return id == "KNOWN", nil }}
	for q, want := range map[string]int{
		"":                                   http.StatusBadRequest,
		"station=":                           http.StatusBadRequest,
		"station=a/b":                        http.StatusBadRequest,
		"station=" + strings.Repeat("x", 33): http.StatusBadRequest,
		"station=UNKNOWN":                    http.StatusNotFound,
		"station=KNOWN&last_event_id=x":      http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		ws.serve(rec, httptest.NewRequest("GET", "/v1/stream/waveform?"+q, nil))
		if rec.Code != want {
			t.Errorf("%q: %d, want %d", q, rec.Code, want)
		}
	}
}

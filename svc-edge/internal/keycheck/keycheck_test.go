package keycheck

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shindo.dev/svc-edge/internal/route"
)

// TestAPIKeys: the WebSocket API's key checks go to a core's
// /v1/keys:check through the data-API routing, with the client's address;
// an answer is decoded from the data API's JSON (proto names, int64 as
// strings); concurrent checks of one key share one request, and a verdict
// is reused for a moment.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var xff atomic.Value
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			return
		case "/v1/keys:check":
		default:
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		xff.Store(r.Header.Get("X-Forwarded-For"))
		//nolint:forbidigo // a slow core: long enough for the concurrent checks to meet
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results":[{"known":true,"client":{"key_id":"shk_0123456789abcdef","role":"subscriber","topics":["websocket.trem.rts.v1"],"revoked_ms":"0","created_ms":"1796000000000"}}]}`)
	}))
	defer core.Close()
	bal, err := route.New([]string{core.URL}, route.Defaults(), http.DefaultTransport, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	keys := New(bal)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			st, err := keys.Check(context.Background(), "203.0.113.7", []string{"shk_0123456789abcdef.x"})
			if err != nil || len(st) != 1 || !st[0].Known || st[0].Revoked || !st[0].Allows("websocket.trem.rts.v1") || st[0].Allows("websocket.eew.v1") {
				t.Errorf("%+v %v", st, err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests for 50 concurrent checks of one key", n)
	}
	if got := xff.Load(); got != "203.0.113.7" {
		t.Fatalf("X-Forwarded-For %q", got)
	}
	keys.Check(context.Background(), "", []string{"shk_0123456789abcdef.x"})
	if n := calls.Load(); n != 1 {
		t.Fatalf("a fresh verdict was asked again (%d requests)", n)
	}
	keys.mu.Lock()
	for k, c := range keys.known { // the verdict ages past keyTTL
		c.expires = time.Now().Add(-time.Millisecond)
		keys.known[k] = c
	}
	keys.mu.Unlock()
	keys.Check(context.Background(), "", []string{"shk_0123456789abcdef.x"})
	if n := calls.Load(); n != 2 {
		t.Fatalf("a stale verdict was reused (%d requests)", n)
	}
}

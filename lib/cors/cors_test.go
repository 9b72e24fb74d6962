package cors

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReads(t *testing.T) {
	t.Parallel()
	routes := http.NewServeMux()
	routes.HandleFunc("GET /api/v2/trem/rts", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) })
	routes.HandleFunc("OPTIONS /v1/notify/ack", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := Reads(routes)
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		allowOrigin        bool
	}{
		{"read", "GET", "/api/v2/trem/rts", nil, 200, true},
		{"head", "HEAD", "/api/v2/trem/rts", nil, 200, true},
		// TREM-Lite's web build asks before its stream requests.
		{"preflight of a stream", "OPTIONS", "/api/v2/eq/eew?sse=1", map[string]string{
			"Origin": "https://exptechtw.github.io", "Access-Control-Request-Method": "GET",
			"Access-Control-Request-Headers": "cache-control"}, 204, true},
		{"preflight of a write goes to the routes", "OPTIONS", "/v1/notify/ack", map[string]string{
			"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}, http.StatusTeapot, false},
		{"options without origin is no preflight", "OPTIONS", "/api/v2/trem/rts", map[string]string{
			"Access-Control-Request-Method": "GET"}, http.StatusMethodNotAllowed, false},
		{"writes are not opened", "POST", "/api/v2/trem/rts", nil, http.StatusMethodNotAllowed, false},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, rec.Code, tc.status)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin") == "*"; got != tc.allowOrigin {
			t.Errorf("%s: Access-Control-Allow-Origin %q", tc.name, rec.Header().Get("Access-Control-Allow-Origin"))
		}
		if tc.status == 204 {
			allowed := rec.Header().Get("Access-Control-Allow-Headers")
			for _, hd := range []string{"cache-control", "accept", "last-event-id"} {
				if !strings.Contains(allowed, hd) {
					t.Errorf("%s: %q not allowed (%q)", tc.name, hd, allowed)
				}
			}
		}
	}
}

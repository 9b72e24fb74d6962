// Package cors opens the public read routes of the edges and the cores to
// pages of any origin, as the apps' browser builds need: TREM-Lite's web
// build is served from another origin and reads every route cross-origin,
// and its stream requests carry Cache-Control, which makes the browser ask
// first with a preflight (packages/core/src/features/data/dataHttp.ts:356
// and lib/http/webBackend.ts:49 of ExpTechTW/TREM-Lite at 2400a0e).
//
// Reads only: a GET or HEAD gets Access-Control-Allow-Origin: *, and a
// preflight for a GET or HEAD is answered here with the request headers the
// apps and our own clients send. No credentials are involved (cookies are
// never used), so the wildcard origin is enough and safe. A preflight for
// any other method goes on to the routes, which grant it where a write is
// meant for browsers, or refuse it.
package cors

import (
	"net/http"
	"strings"
)

// AllowedHeaders are the request headers a cross-origin read may carry:
// what the apps send (Accept, Cache-Control) and what resuming streams,
// conditional GETs and API keys need.
var AllowedHeaders = []string{"accept", "cache-control", "last-event-id", "if-none-match", "if-modified-since", "authorization", "content-type"}

// ExposedHeaders are the response headers pages may read: time sync, the
// rate limiter's advice and the validators of conditional GETs.
var ExposedHeaders = []string{"Retry-After", "ETag", "X-NTP-T2", "X-NTP-T3"}

var (
	allowHeaders  = strings.Join(AllowedHeaders, ", ")
	exposeHeaders = strings.Join(ExposedHeaders, ", ")
)

// maxAge is how long a browser may keep a preflight's answer, in seconds.
const maxAge = "86400"

// Reads wraps next so that reads are open to every origin.
func Reads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Expose-Headers", exposeHeaders)
		case r.Method == http.MethodOptions && isReadPreflight(r):
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Allow-Methods", "GET, HEAD")
			h.Set("Access-Control-Allow-Headers", allowHeaders)
			h.Set("Access-Control-Max-Age", maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isReadPreflight reports whether r is a browser's preflight for a GET or
// HEAD.
func isReadPreflight(r *http.Request) bool {
	if r.Header.Get("Origin") == "" {
		return false
	}
	m := r.Header.Get("Access-Control-Request-Method")
	return m == http.MethodGet || m == http.MethodHead
}

package edge

import (
	"encoding/json"
	"net/http"

	"shindo.dev/lib/cors"
	"shindo.dev/web"
)

// registerDashboard serves the dashboard under /dashboard/ (/ leads
// there), with config.json telling the page which edge served it and the
// entrances to switch between.
func registerDashboard(mux *http.ServeMux, site string, entrances []string) {
	config, _ := json.Marshal(map[string]any{"site": site, "entrances": append([]string{}, entrances...)})
	mux.Handle("GET "+web.Prefix, web.Handler())
	mux.HandleFunc("GET "+web.Prefix+"config.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(config)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, web.Prefix, http.StatusFound)
	})
}

// allowCrossOrigin lets pages of any origin read the public routes
// (lib/cors): the dashboard served by one edge reads the other after
// switching entrance, the apps' browser builds read everything
// cross-origin, and third-party pages may use the data. Of the writes only
// the notification ack is open to pages (allowAckPreflight).
func allowCrossOrigin(h http.Handler) http.Handler {
	return cors.Reads(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/notify/ack" {
			w.Header().Set("Access-Control-Allow-Origin", "*")
		}
		h.ServeHTTP(w, r)
	}))
}

// allowAckPreflight lets pages of any origin acknowledge notifications:
// the ack is a JSON POST, which browsers check first. The client ID in the
// body is the capability; no credentials are involved.
func allowAckPreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

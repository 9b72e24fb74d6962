package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"shindo.dev/devkit/poll"
)

// TestTREMLiteBaseMap loads the base map TREM-Lite draws everything on as
// the app does — maplibre-gl at the version it pins (bun.lock:621 of
// ExpTechTW/TREM-Lite at 9bbaccf), its style's source and layers
// (map.js:14-94; testdata/maplibre/index.html), the TileJSON on its API
// host (map.js:21) — in a real browser, from an edge: the map must load
// (the app reads no data until it has, data.js:120-131), hold every
// township under its postal code and every county, and colour a town by
// CODE as the app does for intensities (utils.js:150-171).
func TestTREMLiteBaseMap(t *testing.T) {
	chromiumPath(t) // fail before starting anything
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "index.html"} {
		b, err := os.ReadFile(filepath.Join("testdata", "maplibre", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	dist := filepath.Join(dir, "node_modules", "maplibre-gl", "dist")
	page := http.NewServeMux()
	page.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(dir, "index.html")) })
	page.HandleFunc("GET /maplibre-gl.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(dist, "maplibre-gl.js"))
	})
	page.HandleFunc("GET /maplibre-gl.css", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(dist, "maplibre-gl.css"))
	})
	site := httptest.NewServer(page) // another origin than the edge's, as the app's
	t.Cleanup(site.Close)

	d := startDev(t, "-stations", "2")
	edge := d.endpoints.get(t, "TPE-1", "edge", "http")

	// WebGL without a GPU: SwiftShader.
	p := openDashboard(t, site.URL+"/?api="+url.QueryEscape(edge),
		chromedp.Flag("enable-unsafe-swiftshader", true), chromedp.Flag("use-angle", "swiftshader"), chromedp.Flag("ignore-gpu-blocklist", true))
	t.Cleanup(func() { p.screenshot(t, "tremlite-basemap.png") })
	type state struct {
		Loaded  bool     `json:"loaded"`
		Idle    bool     `json:"idle"`
		Codes   []int    `json:"codes"`
		Cities  []string `json:"cities"`
		Hualien []int    `json:"hualien"`
		Taipei  []int    `json:"taipei"`
	}
	var s state
	var errs []string
	idle := poll.Within(60*time.Second, func() bool {
		errs, _ = chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`window.errors`))
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[state](`window.state`))
		s = got
		return err == nil && got.Idle
	})
	if !idle {
		t.Fatalf("the map did not load in 60 s (TREM-Lite would wait forever); map errors %q; console:\n%s", errs, p.console.String())
	}
	if len(errs) > 0 {
		t.Errorf("map errors: %q", errs)
	}
	// At zoom 6.8 over Taiwan the map holds all of Taiwan's main island.
	for _, code := range []int{100, 200, 260, 300, 400, 600, 700, 800, 900, 950, 970, 972} {
		if !slices.Contains(s.Codes, code) {
			t.Errorf("no town with CODE %d among the %d in view", code, len(s.Codes))
		}
	}
	if len(s.Codes) < 300 || len(s.Cities) < 18 {
		t.Errorf("%d towns, %d counties in view: %v", len(s.Codes), len(s.Cities), s.Cities)
	}
	if !slices.Equal(s.Hualien, []int{970}) || !slices.Equal(s.Taipei, []int{100}) {
		t.Errorf("drawn at Hualien City %v, at Taipei's Zhongzheng %v; want [970], [100]", s.Hualien, s.Taipei)
	}
	colour, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`JSON.stringify(window.state.colour)`))
	if err != nil || colour != `["match",["get","CODE"],970,"#ff0000",972,"#00ff00","#3F4045"]` {
		t.Errorf("town colour %s (%v)", colour, err)
	}
}

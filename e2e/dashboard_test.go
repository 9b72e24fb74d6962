package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"shindo.dev/devkit/poll"
)

// chromiumPath finds the browser the dashboard test drives: $SHINDO_CHROMIUM,
// or Debian's chromium on the PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHINDO_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium not found: the dashboard test needs a real browser; " +
		"install the Debian package `chromium` (apt-get install -y chromium) or set SHINDO_CHROMIUM")
	return ""
}

// pageState is what the dashboard exposes as window.shindo.
type pageState struct {
	Stations    int                   `json:"stations"`
	Online      int                   `json:"online"`
	LastTick    int64                 `json:"lastTick"`
	Ticks       int                   `json:"ticks"`
	MissedTicks int                   `json:"missedTicks"`
	Entrance    string                `json:"entrance"`
	EntranceURL string                `json:"entranceURL"`
	Connected   bool                  `json:"connected"`
	Switches    int                   `json:"switches"`
	APIBase     string                `json:"apiBase"`
	Selected    string                `json:"selected"`
	Reports     []struct{ ID string } `json:"reports"`
	Frames      int                   `json:"frames"`
	Log         []string              `json:"log"`
	Waveform    struct {
		Station  string `json:"station"`
		Chunks   int    `json:"chunks"`
		Samples  int    `json:"samples"`
		LastTime int64  `json:"lastTime"`
	} `json:"waveform"`
}

const pageStateJS = `(() => {
	const s = window.shindo;
	if (!s) return {};
	return {stations: s.stations, online: s.online, lastTick: s.lastTick, ticks: s.ticks,
		missedTicks: s.missedTicks, entrance: s.entrance, entranceURL: s.entranceURL,
		connected: s.connected, switches: s.switches, apiBase: s.apiBase, selected: s.selected || "",
		frames: s.frames, log: s.log, waveform: s.waveform, reports: s.reports};
})()`

// browserPage is one tab of a headless Chromium.
type browserPage struct {
	ctx     context.Context
	console *lockedBuffer
}

func (p *browserPage) state(t *testing.T) pageState {
	t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[pageState](pageStateJS))
	if err != nil {
		t.Fatalf("read window.shindo: %v\nconsole:\n%s", err, p.console.String())
	}
	return s
}

// waitFor polls the page until cond holds and returns that state.
func (p *browserPage) waitFor(t *testing.T, what string, within time.Duration, cond func(pageState) bool) pageState {
	t.Helper()
	var s pageState
	if !poll.Within(within, func() bool { s = p.state(t); return cond(s) }) {
		b, _ := json.MarshalIndent(s, "", "  ")
		t.Fatalf("dashboard: %s not within %s; window.shindo:\n%s\nconsole:\n%s", what, within, b, p.console.String())
	}
	return s
}

// screenshot saves the page to $SHINDO_ARTIFACTS (default e2e/artifacts).
func (p *browserPage) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("SHINDO_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("artefacts: %v", err)
		return
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// openDashboard starts a headless Chromium and loads url in it.
func openDashboard(t *testing.T, url string, extra ...chromedp.ExecAllocatorOption) *browserPage {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1500, 1000),
	)
	opts = append(opts, extra...)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to sandbox as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser, bound to ctx alone
		t.Fatalf("start Chromium: %v", err)
	}
	p := &browserPage{ctx: ctx, console: &lockedBuffer{}}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			fmt.Fprintf(p.console, "%s:%d %s\n", m.URL, m.Line+1, m)
		}
	}()
	nctx, ncancel := context.WithTimeout(ctx, 30*time.Second)
	defer ncancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	return p
}

// TestDashboard drives the edge's dashboard in a real browser over the
// whole topology: it shows every provisioned station and live ticks, draws
// a clicked station's waveform, and when its edge dies it follows the
// client rules — three failed reconnects 3 s apart, then the other
// entrance, resumed where it stopped — and keeps updating.
func TestDashboard(t *testing.T) {
	chromiumPath(t) // fail before starting anything
	const stations = 20
	d := startDev(t, "-stations", fmt.Sprint(stations))
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	khh := d.endpoints.get(t, "KHH-1", "edge", "http")

	p := openDashboard(t, tpe+"/") // the edge's root leads to the dashboard
	t.Cleanup(func() { p.screenshot(t, "dashboard.png") })

	s := p.waitFor(t, "all stations shown online", 20*time.Second, func(s pageState) bool {
		return s.Stations == stations && s.Online == stations && s.LastTick > 0
	})
	if s.Entrance != "TPE-1" || s.EntranceURL != tpe {
		t.Fatalf("stream from %s (%s), want TPE-1 (%s)", s.Entrance, s.EntranceURL, tpe)
	}
	first := s.LastTick
	p.waitFor(t, "the tick to advance", 5*time.Second, func(s pageState) bool { return s.LastTick >= first+1000 })

	// The intensity classes of JMA's real-time intensity, as the page
	// colours stations.
	classes, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](
		`[-1, 0.49, 0.5, 1.49, 1.5, 2.49, 2.5, 3.5, 4.49, 4.5, 4.99, 5.0, 5.49, 5.5, 6.0, 6.49, 6.5, 7.3].map(shindo.classOf)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0", "0", "1", "1", "2", "2", "3", "4", "4", "5-", "5-", "5+", "5+", "6-", "6+", "6+", "7", "7"}
	if strings.Join(classes, " ") != strings.Join(want, " ") {
		t.Errorf("intensity classes %v, want %v", classes, want)
	}

	// Click a station on the map: its waveform draws.
	if httpStatus(t, tpe+"/v1/stream/waveform?station="+d.stations[0].ID) == http.StatusNotFound {
		t.Fatalf("the edge does not serve /v1/stream/waveform (404): the dashboard's waveform view needs it")
	}
	station := d.stations[stations/2].ID
	pos, err := chromedp.Run(p.ctx, chromedp.Evaluate[struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}](fmt.Sprintf(`shindo.position(%q)`, station)))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(p.ctx, chromedp.MouseClickXY(pos.X, pos.Y)); err != nil {
		t.Fatal(err)
	}
	// Stations of one township are drawn close together: the click may pick a
	// neighbour, which is as good.
	s = p.waitFor(t, "a clicked station's waveform drawn", 15*time.Second, func(s pageState) bool {
		return s.Selected != "" && s.Waveform.Station == s.Selected && s.Waveform.Samples >= 50
	})
	t.Logf("clicked %s at (%.0f, %.0f): %s selected, %d chunks", station, pos.X, pos.Y, s.Selected, s.Waveform.Chunks)

	// An earthquake report posted now appears in the list, announced by
	// the stream's report topic.
	listed := func(id string) func(pageState) bool {
		return func(s pageState) bool {
			return slices.ContainsFunc(s.Reports, func(r struct{ ID string }) bool { return r.ID == id })
		}
	}
	reportID := postReport(t, d, tpe)
	p.waitFor(t, "the posted report listed", 20*time.Second, listed(reportID))

	// Kill the page's edge.
	before := p.state(t)
	killedAt := time.Now()
	fault(t, d, "kill", "TPE-1-edge")
	s = p.waitFor(t, "the switch to KHH-1", 25*time.Second, func(s pageState) bool {
		return s.Entrance == "KHH-1" && s.Connected && s.LastTick > before.LastTick
	})
	took := time.Since(killedAt)
	t.Logf("switched to KHH-1 %s after the kill", took.Round(100*time.Millisecond))
	if s.EntranceURL != khh {
		t.Errorf("stream from %s, want %s", s.EntranceURL, khh)
	}
	failed := 0
	for _, line := range s.Log {
		if strings.HasPrefix(line, "reconnect to "+tpe+" failed") {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d failed reconnects to TPE-1 before switching, want 3; log:\n%s", failed, strings.Join(s.Log, "\n"))
	}
	// Three reconnects 3 s apart, then the wait before the other entrance.
	if took < 9*time.Second || took > 20*time.Second {
		t.Errorf("switched %s after the kill; the client rules take 9–20 s", took)
	}
	if s.MissedTicks != 0 {
		t.Errorf("%d ticks missing from the page after resuming at KHH-1 with last_event_id", s.MissedTicks)
	}

	// It keeps updating from KHH-1: ticks, the waveform and the data API.
	switched := s
	p.waitFor(t, "ticks from KHH-1", 5*time.Second, func(s pageState) bool {
		return s.LastTick >= switched.LastTick+1000 && s.Entrance == "KHH-1"
	})
	p.waitFor(t, "the waveform from KHH-1", 10*time.Second, func(s pageState) bool {
		return s.Waveform.LastTime > switched.Waveform.LastTime+1000
	})
	p.waitFor(t, "the data API at KHH-1", 15*time.Second, func(s pageState) bool {
		return s.APIBase == khh && s.Stations == stations
	})

	// A second report, announced while the page watches. A page opened
	// after it lists both: the second from the stream (a new stream starts
	// with the newest event of each topic), the first only from the data
	// API's list.
	second := postReport(t, d, khh)
	p.waitFor(t, "the second report listed", 20*time.Second, listed(second))
	late := openDashboard(t, khh+"/")
	late.waitFor(t, "both reports listed on a new page", 20*time.Second, func(s pageState) bool {
		return listed(reportID)(s) && listed(second)(s)
	})
}

// httpStatus makes a GET and returns the status without reading the body
// (the route may be a stream).
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

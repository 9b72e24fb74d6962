package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sumMetric adds every series of a metric family whose labels contain all
// of match ("name{...} value" lines of a /metrics page).
func sumMetric(page, name string, match ...string) float64 {
	total := 0.0
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			if !strings.Contains(line, m) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			total += v
		}
	}
	return total
}

// BenchmarkInterSiteTraffic runs both cores with a simulated fleet sending
// to both, and compares the bytes the cores exchange to keep in sync (both
// cores' requests and answers) with the station traffic they receive, over
// 20 s of steady state.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench InterSite -benchtime 1x
func BenchmarkInterSiteTraffic(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("stations=%d", n), func(b *testing.B) {
			for b.Loop() {
				d := startDev(b, "-stations", fmt.Sprint(n), "-log-level", "warn")
				// Let the first (long) exchanges and the fleet settle: the
				// benchmark's warm-up, before the steady state it measures.
				time.Sleep(5 * time.Second) //nolint:forbidigo // a warm-up window, not a wait for a state
				read := func() (station, sync float64) {
					for _, site := range []string{"TNN-1", "TYO-1"} {
						_, page := httpGet(b, d.endpoints.get(b, site, "ingest", "admin")+"/metrics")
						station += sumMetric(page, "shindo_ingest_bytes_total")
						sync += sumMetric(page, "shindo_sync_bytes_total", `conn="peer"`)
					}
					return
				}
				s0, y0 := read()
				time.Sleep(20 * time.Second) //nolint:forbidigo // the 20 s measured
				s1, y1 := read()
				share := 100 * (y1 - y0) / (s1 - s0)
				b.ReportMetric((s1-s0)/20, "station-B/s")
				b.ReportMetric((y1-y0)/20, "sync-B/s")
				b.ReportMetric(share, "%-of-station")
			}
		})
	}
}

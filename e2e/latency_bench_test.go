package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkSliceLatency measures station send → SSE receive through the
// whole topology of shindo dev (both cores, both edges, separate
// processes) while a simulated fleet of N stations loads it: a probe station sends one frame per tick with a
// unique PGA and the time until that value arrives on the edge's SSE stream
// is recorded. Run with -benchtime 1x; each run takes `ticks` samples.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench SliceLatency -benchtime 1x
func BenchmarkSliceLatency(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("stations=%d", n), func(b *testing.B) {
			for b.Loop() {
				p50, p99 := sliceLatency(b, n, 120)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p99, "p99-ms")
			}
		})
	}
}

func sliceLatency(b *testing.B, n, ticks int) (p50, p99 float64) {
	d := startDev(b, "-stations", fmt.Sprint(n+1), "-simulate=false", "-log-level", "warn")
	udp := d.endpoints.get(b, "TNN-1", "ingest", "udp")
	backup := d.endpoints.get(b, "TYO-1", "ingest", "udp")
	sim := exec.Command(filepath.Join(binDir(b), "shindo"), "sim",
		"-stations-file", filepath.Join(d.dir, "stations.json"), "-stations", fmt.Sprint(n),
		"-primary", udp, "-backup", backup, "-status-addr", "127.0.0.1:0", "-log-level", "warn")
	if err := sim.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sim.Process.Kill(); sim.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ticks+60)*time.Second)
	defer cancel()
	events := openSSE(ctx, b, d.endpoints.get(b, "TPE-1", "edge", "http")+"/api/v2/trem/rts?sse=1")
	probeStation := d.stations[n]
	probe := newProbe(b, probeStation, udp, backup)

	// Wait for the fleet to be on the air.
	for {
		doc, ok := nextTick(ctx, b, events)
		if !ok {
			b.Fatal("fleet never appeared in the stream")
		}
		if len(doc.Station) >= n {
			break
		}
	}
	var lat []float64
	for k := 1; k <= ticks; k++ {
		end := nextBoundary()
		pga := float32(k)
		sent := probe.send(end, 0.5, pga)
		for {
			ev, ok := nextEvent(ctx, events)
			if !ok {
				b.Fatalf("stream ended after %d samples", len(lat))
			}
			var doc rtsDoc
			if json.Unmarshal([]byte(ev.data), &doc) != nil {
				continue
			}
			if st, ok := doc.Station[probeStation.ID]; ok && st.PGA == float64(pga) {
				lat = append(lat, float64(ev.at.Sub(sent).Microseconds())/1000)
				break
			}
			if doc.Time > end+2000 {
				b.Fatalf("probe value of %d missing at tick %d", end, doc.Time)
			}
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[(len(lat)*99)/100]
}

func nextEvent(ctx context.Context, events <-chan sseEvent) (sseEvent, bool) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return ev, false
			}
			if ev.comment || ev.name != "" {
				continue
			}
			return ev, true
		case <-ctx.Done():
			return sseEvent{}, false
		}
	}
}

func nextTick(ctx context.Context, t testing.TB, events <-chan sseEvent) (rtsDoc, bool) {
	ev, ok := nextEvent(ctx, events)
	if !ok {
		return rtsDoc{}, false
	}
	var doc rtsDoc
	if err := json.Unmarshal([]byte(ev.data), &doc); err != nil {
		t.Fatalf("tick is not JSON: %v", err)
	}
	return doc, true
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/loadtest"
)

// BenchmarkReplayRoute measures the replay of a past RTS tick
// (/api/v2/trem/rts/{s}: the core reads its archive of sent snapshots and
// renders it) against the live route (/api/v2/trem/rts: the edge writes
// the latest event from memory), both through an edge and at a core, in
// the same run, with 1,000 simulated stations on the whole topology. Each
// replay asks for a random second of the last minute, so most reads
// decode a block the archive's cache does not hold.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench ReplayRoute -benchtime 1x
func BenchmarkReplayRoute(b *testing.B) {
	const stations, requests = 1000, 600
	d := startDev(b, "-stations", fmt.Sprint(stations), "-log-level", "warn")
	edge := d.endpoints.get(b, "TPE-1", "edge", "http")
	core := d.endpoints.get(b, "TNN-1", "dataapi", "http")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A minute of the full fleet in the archive.
	events := openSSE(ctx, b, edge+"/api/v2/trem/rts?sse=1")
	for {
		doc, ok := nextTick(ctx, b, events)
		if !ok {
			b.Fatal("fleet never appeared in the stream")
		}
		if len(doc.Station) >= stations {
			break
		}
	}
	// The archive fills with time: a minute of the fleet to replay.
	time.Sleep(70 * time.Second) //nolint:forbidigo // the minute of ticks the replays read, not a wait for a state
	from := time.Now().Add(-65 * time.Second).Unix()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	// 40 requests a second: under the data API's default limit per client
	// address (50/s), which the replays, from one address, are subject to.
	measure := func(url func() string) []float64 {
		ms := make([]float64, 0, requests)
		pace := time.NewTicker(25 * time.Millisecond)
		defer pace.Stop()
		for range requests {
			<-pace.C
			start := time.Now()
			resp, err := client.Get(url())
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n < 1000*40 {
				b.Fatalf("%s: %d, %d bytes", url(), resp.StatusCode, n)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		return ms
	}
	for b.Loop() {
		for _, r := range []struct {
			name string
			url  func() string
		}{
			{"live-edge", func() string { return edge + "/api/v2/trem/rts" }},
			{"replay-edge", func() string { return fmt.Sprintf("%s/api/v2/trem/rts/%d", edge, from+rand.Int64N(60)) }},
			{"replay-core", func() string { return fmt.Sprintf("%s/api/v2/trem/rts/%d", core, from+rand.Int64N(60)) }},
		} {
			ms := measure(r.url)
			name := strings.ReplaceAll(r.name, "-", "_")
			b.ReportMetric(loadtest.Quantile(ms, 0.5), name+"-p50-ms")
			b.ReportMetric(loadtest.Quantile(ms, 0.99), name+"-p99-ms")
		}
	}
}

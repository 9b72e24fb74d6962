package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"shindo.dev/lib/certfile"
)

// BenchmarkSliceLatency measures station send → SSE receive through the
// whole topology of shindo dev (both cores, both edges, separate
// processes) while a simulated fleet of N stations loads it: a probe station sends one frame per tick with a
// unique PGA and the time until that value arrives on the edge's SSE stream
// is recorded. Run with -benchtime 1x; each run takes `ticks` samples.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench 'SliceLatency$' -benchtime 1x
func BenchmarkSliceLatency(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("stations=%d", n), func(b *testing.B) {
			for b.Loop() {
				sliceLatency(b, n, 120).report(b)
			}
		})
	}
}

// BenchmarkSliceLatencyWAN is BenchmarkSliceLatency at 1,000 stations on
// loopback and under shindo dev -wan (its default profile: stations →
// TNN-1 8 ms, TNN-1 → TPE-1 4 ms one way, 10 % jitter, 0.1 % loss) in the
// same run. Under -wan the fleet and the probe send from the stations'
// network namespace and the SSE client reads at TPE-1 from the root
// namespace, as a browser on the internet would.
//
//	make bench-wan
func BenchmarkSliceLatencyWAN(b *testing.B) {
	if why := wanUnavailable(); why != "" {
		b.Skip(why)
	}
	// wan-clear is -wan with every link clear: the namespaces and the
	// packet router that joins them, without the profile's delay, jitter
	// and loss, so the router's share of wan's latency shows apart from
	// the network's.
	for _, net := range []string{"loopback", "wan-clear", "wan"} {
		b.Run("stations=1000/net="+net, func(b *testing.B) {
			var extra []string
			switch net {
			case "wan-clear":
				extra = []string{"-wan", "-links", "clear"}
			case "wan":
				extra = []string{"-wan"}
			}
			for b.Loop() {
				sliceLatency(b, 1000, 120, extra...).report(b)
			}
		})
	}
}

// BenchmarkSliceLatencyTLS is BenchmarkSliceLatency at 1,000 stations
// without and with shindo dev -tls in the same run: the SSE client reads
// TPE-1 over HTTPS (HTTP/2, the dev CA trusted), and every internal hop on
// the way — ingest → RTS gRPC, RTS → edge gRPC — is mutual TLS.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench '^BenchmarkSliceLatencyTLS$' -benchtime 1x
func BenchmarkSliceLatencyTLS(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("stations=1000/tls=%t", on), func(b *testing.B) {
			var extra []string
			if on {
				extra = []string{"-tls"}
			}
			for b.Loop() {
				sliceLatency(b, 1000, 120, extra...).report(b)
			}
		})
	}
}

// probeResult is what the probe saw of its frames.
type probeResult struct {
	// lat are the latencies of the frames that reached the stream, ms,
	// sorted.
	lat []float64
	// lost never reached it: the probe sends each frame once, so one lost
	// on the way (-wan's 0.1 % loss, on both uplinks) is missing.
	lost int
	// late reached it in a later tick than their own: the tick closed
	// before the frame came in (at its quorum or its deadline), and the
	// next tick showed it as the station's latest.
	late int
	// seedLink are the latencies of the same frames to a SeedLink client
	// at the same edge (the PGA record, MXA), ms, sorted.
	seedLink []float64
	// sent is when each probe frame went out, by its PGA.
	sent map[float32]time.Time
}

// report reports the result's median and 99th percentile, and its lost
// and late frames.
func (r probeResult) report(b *testing.B) {
	b.ReportMetric(r.lat[len(r.lat)/2], "p50-ms")
	b.ReportMetric(r.lat[(len(r.lat)*99)/100], "p99-ms")
	b.ReportMetric(float64(r.lost), "probes-lost")
	b.ReportMetric(float64(r.late), "probes-late")
	if len(r.seedLink) > 0 {
		b.ReportMetric(r.seedLink[len(r.seedLink)/2], "seedlink-p50-ms")
		b.ReportMetric(r.seedLink[(len(r.seedLink)*99)/100], "seedlink-p99-ms")
	}
}

// sliceLatency sends ticks probe frames through the topology of shindo
// dev (devArgs) loaded by a fleet of n stations, and returns what the
// probe saw of them.
func sliceLatency(b *testing.B, n, ticks int, devArgs ...string) probeResult {
	args := append([]string{"-stations", fmt.Sprint(n + 1), "-simulate=false", "-log-level", "warn"}, devArgs...)
	wan := slices.Contains(devArgs, "-wan")
	d := startDev(b, args...)
	ns := d.netns(b, "stations") // "" on loopback
	udp := d.endpoints.get(b, "TNN-1", "ingest", "udp")
	backup := d.endpoints.get(b, "TYO-1", "ingest", "udp")
	sim := commandIn(b, ns, filepath.Join(binDir(b), "shindo"), "sim",
		"-stations-file", filepath.Join(d.dir, "stations.json"), "-stations", fmt.Sprint(n),
		"-primary", udp, "-backup", backup, "-status-addr", "127.0.0.1:0", "-log-level", "warn")
	if err := sim.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sim.Process.Kill(); sim.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ticks+60)*time.Second)
	defer cancel()
	client := http.DefaultClient
	if slices.Contains(devArgs, "-tls") {
		pool, err := certfile.LoadPool(d.endpoints.devCA(b))
		if err != nil {
			b.Fatal(err)
		}
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	}
	events := openSSEWith(ctx, b, client, d.endpoints.get(b, "TPE-1", "edge", "http")+"/api/v2/trem/rts?sse=1")
	probeStation := d.stations[n]
	var prb *probe
	inNetns(b, ns, func() { prb = newProbe(b, probeStation, udp, backup) })

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
	// A SeedLink client at the same edge takes the probe's PGA channel.
	var codes seedCodes
	for _, c := range stationCodes(b, d.endpoints.get(b, "TPE-1", "edge", "http")) {
		if c.ID == probeStation.ID {
			codes = c
		}
	}
	sl := followSeedLink(ctx, b, d.endpoints.get(b, "TPE-1", "edge", "seedlink"), codes.Net, codes.Sta, "MXA")
	res := probeLatencies(ctx, b, events, prb, ticks)
	res.seedLink = sl.latencies(res.sent)
	if wan {
		// What the links did meanwhile: the profile's losses, or the
		// router's queue overflowing (a machine too busy to carry it).
		var control string
		json.Unmarshal(d.endpoints["dev"]["control"], &control)
		if _, body := httpGet(b, control+"/v1/links"); body != "" {
			var doc struct {
				Links []struct {
					Name  string          `json:"name"`
					Stats json.RawMessage `json:"stats"`
				} `json:"links"`
			}
			json.Unmarshal([]byte(body), &doc)
			for _, l := range doc.Links {
				b.Logf("%s: %s", l.Name, l.Stats)
			}
		}
	}
	if len(res.lat) == 0 {
		b.Fatalf("none of %d probe frames reached the stream", ticks)
	}
	return res
}

// probeLatencies sends one frame of the probe station per tick, each with
// a unique PGA, and returns for each how long it took to appear on the SSE
// stream events, in milliseconds (sorted), how many never appeared and
// how many appeared in a later tick than their own.
func probeLatencies(ctx context.Context, b testing.TB, events <-chan sseEvent, probe *probe, ticks int) (res probeResult) {
	b.Helper()
	for k := 1; k <= ticks; k++ {
		// Sent as its window ends, as every station of the fleet sends
		// (cli/internal/fleet), not a few milliseconds after it: under
		// -wan all the stations share one namespace and its one queue
		// into the router, and a frame sent after the fleet's burst waits
		// there behind all of its sensor frames too, which no station on
		// a link of its own does.
		end := boundaryPlus(0)
		pga := float32(k)
		sent := probe.send(end, 0.5, pga)
		if res.sent == nil {
			res.sent = map[float32]time.Time{}
		}
		res.sent[pga] = sent
		for {
			ev, ok := nextEvent(ctx, events)
			if !ok {
				b.Fatalf("stream ended after %d samples", len(res.lat))
			}
			var doc rtsDoc
			if json.Unmarshal([]byte(ev.data), &doc) != nil {
				continue
			}
			if st, ok := doc.Station[probe.st.ID]; ok && st.PGA == float64(pga) {
				res.lat = append(res.lat, float64(ev.at.Sub(sent).Microseconds())/1000)
				if doc.Time > end {
					res.late++
				}
				break
			}
			if doc.Time > end+2000 {
				res.lost++
				break
			}
		}
	}
	slices.Sort(res.lat)
	return res
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

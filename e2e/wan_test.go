package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// netns is the network namespace of site (TNN-1, …, stations) under
// shindo dev -wan, as endpoints.json names it; "" without -wan.
func (d *dev) netns(t testing.TB, site string) string {
	t.Helper()
	var doc struct {
		WAN *struct {
			Sites map[string]struct {
				Netns string `json:"netns"`
			} `json:"sites"`
		} `json:"wan"`
	}
	raw, _ := json.Marshal(d.endpoints["dev"])
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.WAN == nil {
		return ""
	}
	ns := doc.WAN.Sites[site].Netns
	if ns == "" {
		t.Fatalf("endpoints.json names no namespace for %s", site)
	}
	return ns
}

// faultWait is fault with room for an action that takes up to timeout.
func faultWait(t *testing.T, d *dev, timeout time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(t), "shindo"), append([]string{"fault", "-dir", d.dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("shindo fault %v: %v\n%s", args, err, out)
	}
}

// connectRTT is the shortest of five TCP connects from namespace ns to
// addr: one round trip of the path, which the jitter only lengthens.
func connectRTT(t *testing.T, ns, addr string) time.Duration {
	t.Helper()
	best := time.Hour
	for range 5 {
		inNetns(t, ns, func() {
			start := time.Now()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("connect to %s from %q: %v", addr, ns, err)
			}
			c.Close()
			best = min(best, took)
		})
	}
	return best
}

// TestWan runs shindo dev -wan (each site and the stations in a network
// namespace of their own, every link under the wan profile) and checks:
//   - the paths take the profile's delays: a TCP connect from the stations
//     to TNN-1 takes one round trip of 2 × 8 ms, to TYO-1 2 × 30 ms,
//     TNN-1 to TYO-1 2 × 35 ms, TPE-1 to TNN-1 2 × 4 ms, and from the root
//     namespace (the internet) next to nothing;
//   - every row of SPEC §8 over that network: an uplink cut and healed,
//     an uplink losing UDP alone (to WebSocket and back), the cores
//     partitioned and healed (archives converge), one core down and back,
//     one edge down (with the quorum member at TPE-1) and back, and the
//     database primary crashed under a writer (-ha: the members replicate
//     between TNN-1's and TYO-1's namespaces, 35 ms apart);
//   - station → browser latency through TNN-1 and TPE-1, logged beside
//     the profile's floor (BenchmarkSliceLatencyWAN measures it at 1,000
//     stations beside loopback).
//
// It needs root, ip and /dev/net/tun, and skips without them.
func TestWan(t *testing.T) {
	if why := wanUnavailable(); why != "" {
		t.Skip(why)
	}
	d := startDev(t, "-wan", "-ha", "-stations", "5")
	staNS, tnnNS, tpeNS := d.netns(t, "stations"), d.netns(t, "TNN-1"), d.netns(t, "TPE-1")
	tnnWS := hostOf(d.endpoints.get(t, "TNN-1", "ingest", "ws"))
	tyoWS := hostOf(d.endpoints.get(t, "TYO-1", "ingest", "ws"))
	tnnAdmin := strings.TrimPrefix(d.endpoints.get(t, "TNN-1", "rts", "admin"), "http://")
	tpeEdge := d.endpoints.get(t, "TPE-1", "edge", "http")
	khhEdge := d.endpoints.get(t, "KHH-1", "edge", "http")

	t.Run("delays", func(t *testing.T) {
		for _, c := range []struct {
			what     string
			ns, addr string
			oneWay   time.Duration
		}{
			{"stations → TNN-1", staNS, tnnWS, 8 * time.Millisecond},
			{"stations → TYO-1", staNS, tyoWS, 30 * time.Millisecond},
			{"TNN-1 → TYO-1", tnnNS, tyoWS, 35 * time.Millisecond},
			{"TPE-1 → TNN-1", tpeNS, tnnAdmin, 4 * time.Millisecond},
			{"root → TNN-1", "", tnnWS, 0},
		} {
			rtt := connectRTT(t, c.ns, c.addr)
			// At least the two one-way delays; at most with the whole 10 %
			// jitter both ways, and some slack for a busy machine.
			lo, hi := 2*c.oneWay, 2*c.oneWay*11/10+15*time.Millisecond
			t.Logf("%s: connect %s (one way %s)", c.what, rtt.Round(100*time.Microsecond), c.oneWay)
			if rtt < lo || rtt > hi {
				t.Errorf("%s: connect took %s, want %s–%s", c.what, rtt, lo, hi)
			}
		}
	})

	statusURL := d.endpoints.fleetStatus(t)
	fleet := func() (primary, backup fleetUplink) { return fleetUplinks(statusURL) }
	waitFleet := func(t *testing.T, what string, timeout time.Duration, ok func(p, b fleetUplink) bool) (fleetUplink, fleetUplink) {
		t.Helper()
		return waitFleetUplinks(t, statusURL, what, timeout, ok)
	}
	waitFleet(t, "both uplinks acked", 30*time.Second, func(p, b fleetUplink) bool { return p.Acked >= 20 && b.Acked >= 20 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tpeTicks := collect(openSSE(ctx, t, tpeEdge+"/api/v2/trem/rts?sse=1"))
	khhTicks := collect(openSSE(ctx, t, khhEdge+"/api/v2/trem/rts?sse=1"))
	tpeTicks.waitLast(t, 2)
	khhTicks.waitLast(t, 2)
	// everyTick checks that c got a tick every 500 ms since from, but for
	// at most lost of them, each with all five stations.
	everyTick := func(t *testing.T, c *collector, name string, from time.Time, lost int) {
		t.Helper()
		var got []sseEvent
		for _, ev := range c.snapshot() {
			if ev.at.After(from) {
				got = append(got, ev)
			}
		}
		want := int(time.Since(from)/(500*time.Millisecond)) - 1
		if len(got) < want-lost {
			t.Errorf("%s: %d ticks in %s, want at least %d", name, len(got), time.Since(from).Round(time.Millisecond), want-lost)
		}
		// Every tick with every station, but the first few: a core cut
		// off from the stations carries their values for a while, and an
		// edge serving it moves to the core that sees them after two ticks
		// (svc-edge/internal/source).
		for _, ev := range got[min(len(got), 6):] {
			var snap struct {
				Station map[string]json.RawMessage `json:"station"`
			}
			if err := json.Unmarshal([]byte(ev.data), &snap); err != nil || len(snap.Station) != 5 {
				t.Errorf("%s: tick %s has %d stations (%v)", name, ev.id, len(snap.Station), err)
				return
			}
		}
	}

	// SPEC §8: uplink degraded or cut — the other uplink is unaffected;
	// the cut one comes back when healed.
	t.Run("uplink cut", func(t *testing.T) {
		fault(t, d, "degrade", "uplink-TNN-1", "lossy")
		p0, b0 := fleet()
		waitFleet(t, "both uplinks acked through a lossy primary", 10*time.Second, func(p, b fleetUplink) bool {
			return p.Acked >= p0.Acked+20 && b.Acked >= b0.Acked+20
		})
		fault(t, d, "cut", "uplink-TNN-1")
		cutAt := time.Now()
		p0, _ = fleet()
		p1, b1 := waitFleet(t, "the primary giving packets up", 15*time.Second, func(p, _ fleetUplink) bool { return p.Lost >= p0.Lost+10 })
		p2, _ := waitFleet(t, "the backup acked on", 10*time.Second, func(_, b fleetUplink) bool { return b.Acked >= b1.Acked+40 })
		if p2.Acked > p1.Acked+5 { // a few acks may still have been on their way
			t.Errorf("primary acked through a cut link: %d, then %d", p1.Acked, p2.Acked)
		}
		everyTick(t, tpeTicks, "TPE-1 during the cut", cutAt, 1)
		fault(t, d, "degrade", "uplink-TNN-1", "wan")
		waitFleet(t, "the primary acked again, on UDP", 40*time.Second, func(p, _ fleetUplink) bool {
			return p.Acked >= p2.Acked+20 && p.Transport == "udp"
		})
	})

	// SPEC §8: uplink degraded — it moves to WebSocket, and back to UDP
	// when healthy; the other uplink is unaffected. The path loses UDP
	// alone (no-udp: a carrier or firewall blocking it), the one way a
	// working WAN path makes a station leave UDP.
	t.Run("uplink without UDP", func(t *testing.T) {
		fault(t, d, "degrade", "uplink-TNN-1", "no-udp")
		p0, b0 := fleet()
		p1, _ := waitFleet(t, "the primary acked on WebSocket", 30*time.Second, func(p, b fleetUplink) bool {
			return p.Transport == "ws" && p.Acked >= p0.Acked+20 && b.Acked >= b0.Acked+20
		})
		fault(t, d, "degrade", "uplink-TNN-1", "wan")
		waitFleet(t, "the primary back on UDP, acked", 40*time.Second, func(p, _ fleetUplink) bool {
			return p.Transport == "udp" && p.Acked >= p1.Acked+20
		})
	})

	// SPEC §8: cores partitioned from each other — both keep serving;
	// after healing their archives converge. TYO-1's uplink is cut too,
	// so that only TNN-1 has the stations' data until the link heals.
	t.Run("cores partitioned", func(t *testing.T) {
		from := time.Now().UnixMilli()/500*500 - 500
		fault(t, d, "partition")
		fault(t, d, "cut", "uplink-TYO-1")
		partAt := time.Now()
		time.Sleep(10 * time.Second) //nolint:forbidigo // holds the partition, whose ticks are then checked
		everyTick(t, tpeTicks, "TPE-1 while partitioned", partAt, 1)
		everyTick(t, khhTicks, "KHH-1 while partitioned", partAt, 1)
		for _, core := range []string{"TNN-1", "TYO-1"} {
			if code, _ := httpGet(t, d.endpoints.get(t, core, "dataapi", "http")+"/v1/stations"); code != http.StatusOK {
				t.Errorf("%s's data API while partitioned: %d", core, code)
			}
		}
		fault(t, d, "degrade", "uplink-TYO-1", "wan")
		fault(t, d, "degrade", "intersite", "wan")
		to := time.Now().UnixMilli()/500*500 - 1000
		id := d.stations[0].ID
		var tnn, tyo map[int64][3]int32
		var errA, errB error
		if !poll.Within(2*time.Minute, func() bool {
			tnn, errA = archive(t, d.endpoints.get(t, "TNN-1", "dataapi", "http"), id, from, to)
			tyo, errB = archive(t, d.endpoints.get(t, "TYO-1", "dataapi", "http"), id, from, to)
			return errA == nil && errB == nil && len(tnn) > 0 && maps.Equal(tnn, tyo)
		}) {
			t.Fatalf("archives of %s never converged: TNN-1 %d samples (%v), TYO-1 %d (%v)", id, len(tnn), errA, len(tyo), errB)
		}
		t.Logf("archives of %s over the partition converged: %d samples each", id, len(tnn))
	})

	// SPEC §8: one core down — data reaches the other core, the edges
	// switch source within a tick, data-API clients are served.
	t.Run("one core down", func(t *testing.T) {
		fault(t, d, "kill", "TNN-1")
		downAt := time.Now()
		for time.Since(downAt) < 8*time.Second {
			if code, body := httpGet(t, tpeEdge+"/v1/stations"); code != http.StatusOK {
				t.Fatalf("data API through TPE-1 with TNN-1 down: %d %s", code, body)
			}
			// The data API must answer through all 8 s, not only once:
			// this paces the watch over that window.
			time.Sleep(200 * time.Millisecond) //nolint:forbidigo // samples an observation window
		}
		everyTick(t, tpeTicks, "TPE-1 with TNN-1 down", downAt, 1)
		_, b0 := fleet()
		waitFleet(t, "the backup acked on", 10*time.Second, func(_, b fleetUplink) bool { return b.Acked >= b0.Acked+20 })
		// Longer than fault's 30 s: a whole core starting again, across
		// the emulated network, on a busy machine.
		faultWait(t, d, 2*time.Minute, "start", "TNN-1")
		p0, _ := fleet()
		waitFleet(t, "the primary acked again", 30*time.Second, func(p, _ fleetUplink) bool { return p.Acked >= p0.Acked+20 })
	})

	// SPEC §8: one edge down — the other serves the same routes; with it
	// goes TPE-1's quorum member, and the quorum store still has a leader
	// (2 of 3).
	t.Run("one edge down", func(t *testing.T) {
		fault(t, d, "kill", "TPE-1")
		downAt := time.Now()
		time.Sleep(3 * time.Second) //nolint:forbidigo // holds the edge down, whose other edge's ticks are then checked
		for _, route := range []string{"/v1/stations", "/api/v2/trem/rts"} {
			if code, body := httpGet(t, khhEdge+route); code != http.StatusOK {
				t.Errorf("KHH-1 %s with TPE-1 down: %d %.200s", route, code, body)
			}
		}
		everyTick(t, khhTicks, "KHH-1 with TPE-1 down", downAt, 1)
		// If TPE-1's member led, the other two elect a new leader first:
		// an election timeout of 1–2 s (cli/internal/etcdcmd), a pre-vote
		// and a vote across the emulated WAN, on a busy machine.
		var code int
		var body string
		if !poll.Within(15*time.Second, func() bool {
			code, body = httpGet(t, d.endpoints.get(t, "TNN-1", "etcd", "client")+"/health")
			return code == http.StatusOK && strings.Contains(body, `"health":"true"`)
		}) {
			t.Errorf("quorum store without TPE-1's member, %s after the kill: %d %s", time.Since(downAt).Round(time.Millisecond), code, body)
		} else {
			t.Logf("quorum store without TPE-1's member has a leader %s after the kill", time.Since(downAt).Round(time.Millisecond))
		}
		faultWait(t, d, 2*time.Minute, "start", "TPE-1")
	})

	// SPEC §8: DB primary down — the standby is promoted by quorum,
	// writes resume, none acknowledged is lost, clients at most see 5xx
	// they retry.
	t.Run("database primary down", func(t *testing.T) {
		ha, stop := startWriting(t, d, khhEdge)
		defer stop()
		ha.failover(t, "over the WAN")
		stop()
		ha.allPresent(t)
	})

	// Station → browser: a probe station of the test's own sends from the
	// stations' namespace to both cores; an SSE client at TPE-1 in the
	// root namespace reads its values.
	t.Run("station to browser", func(t *testing.T) {
		keyID, key := provisionStation(t, d, "WANPRB")
		st := devStation{ID: "WANPRB", KeyID: keyID, KeyHex: hex.EncodeToString(key)}
		var prb *probe
		inNetns(t, staNS, func() {
			prb = newProbe(t, st, d.endpoints.get(t, "TNN-1", "ingest", "udp"), d.endpoints.get(t, "TYO-1", "ingest", "udp"))
		})
		sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
		defer scancel()
		events := openSSE(sctx, t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/api/v2/trem/rts?sse=1")
		// The new station reaches the stream once the cores' registries
		// have it; until then its frames are not shown.
		poll.Until(t, 30*time.Second, "the probe station in the stream", func() bool {
			prb.send(nextBoundary(), 0.5, 0.01)
			doc, ok := nextTick(sctx, t, events)
			if !ok {
				t.Fatal("stream ended")
			}
			_, ok = doc.Station[st.ID]
			return ok
		})
		res := probeLatencies(sctx, t, events, prb, 40)
		if res.lost > 2 {
			t.Fatalf("%d of 40 probe frames never reached TPE-1's stream", res.lost)
		}
		t.Logf("station → browser under wan (5 stations, 40 ticks, %d lost, %d shown a tick late): p50 %.1f ms, p99 %.1f ms; the profile's floor stations → TNN-1 → TPE-1 is 12 ms one way",
			res.lost, res.late, res.lat[len(res.lat)/2], res.lat[len(res.lat)*99/100])
	})
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/poll"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// coreTicks records the detections a core's RTS lists at each tick, and
// when each tick reached this subscriber, over its Subscribe stream,
// reconnecting while the core is down.
type coreTicks struct {
	mu    sync.Mutex
	ticks []int64
	ids   [][]string  // "ID/serial" per tick
	at    []time.Time // when the tick was received
}

func watchCoreTicks(ctx context.Context, t testing.TB, addr string) *coreTicks {
	c := &coreTicks{}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer conn.Close()
		for ctx.Err() == nil {
			sub, err := rtsv1.NewRTSServiceClient(conn).Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "e2e"})
			for err == nil {
				var resp *rtsv1.SubscribeResponse
				if resp, err = sub.Recv(); err != nil {
					break
				}
				at := time.Now()
				s := resp.GetSnapshot()
				var ids []string
				for _, d := range s.GetDetections() {
					ids = append(ids, d.GetId())
				}
				c.mu.Lock()
				if n := len(c.ticks); n == 0 || s.GetTimeMs() > c.ticks[n-1] {
					c.ticks = append(c.ticks, s.GetTimeMs())
					c.ids = append(c.ids, ids)
					c.at = append(c.at, at)
				}
				c.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return c
}

// since returns the ticks from t on with their detection IDs.
func (c *coreTicks) since(t int64) (ticks []int64, ids [][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearch(c.ticks, t)
	return slices.Clone(c.ticks[i:]), slices.Clone(c.ids[i:])
}

// arrived returns when tick reached the subscriber.
func (c *coreTicks) arrived(tick int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, found := slices.BinarySearch(c.ticks, tick)
	if !found {
		return time.Time{}, false
	}
	return c.at[i], true
}

// TestDuringAnEarthquake runs, on one topology playing the Hualien
// scenario, what needs an earthquake in progress: a restarted RTS that must
// rebuild its detections, and the TypeScript SDK reading detections.
func TestDuringAnEarthquake(t *testing.T) {
	type built struct {
		dir string
		err error
	}
	sdk := make(chan built, 1)
	go func() {
		// While the topology starts and the earthquake comes.
		dir, err := buildTSSDK()
		sdk <- built{dir, err}
	}()
	spj := make(chan built, 1)
	go func() {
		// seisplotjs, after the SDK's npm ci: one at a time on two cores.
		b := <-sdk
		sdk <- b
		dir, err := prepareSeisplotjs()
		spj <- built{dir, err}
	}()
	t.Cleanup(func() {
		if b := <-spj; b.dir != "" {
			os.RemoveAll(b.dir)
		}
		if b := <-sdk; b.dir != "" {
			os.RemoveAll(b.dir)
		}
	})
	d := startDev(t, "-stations", "50", "-scenario", "hualien", "-scenario-in", "20s")
	t.Run("restarted RTS rebuilds its detections", func(t *testing.T) { restartedRTSRebuilds(t, d) })
	t.Run("TypeScript SDK reads stations, reports and detections", func(t *testing.T) {
		b := <-sdk
		sdk <- b // for the cleanup
		if b.err != nil {
			t.Fatalf("build the TypeScript SDK: %v", b.err)
		}
		token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		report := fmt.Sprintf("tssdk-%d", time.Now().UnixNano())
		code, body := postJSON(t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/v1/reports", strings.TrimSpace(string(token)),
			fmt.Sprintf(`{"id":%q,"time_ms":"%d","lat":23.9,"lon":121.6,"depth_km":15,"magnitude":6.1,"location":"Hualien County","max_level":6,"areas":[{"code":970,"level":6}]}`,
				report, time.Now().UnixMilli()))
		if code != 200 {
			t.Fatalf("post a report: %d %s", code, body)
		}
		// The earthquake's detection reaches the metadata database from
		// the cores' streams.
		if !poll.Within(30*time.Second, func() bool {
			_, body = httpGet(t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/v1/detections")
			return strings.Contains(body, `"id"`)
		}) {
			t.Fatalf("no detection in the data API 30 s after both cores listed one: %s", body)
		}
		checkTSSDK(t, d, b.dir, report)
	})
	t.Run("seisplotjs reads station metadata through both edges", func(t *testing.T) {
		b := <-spj
		spj <- b // for the cleanup
		if b.err != nil {
			t.Fatalf("install seisplotjs: %v", b.err)
		}
		for _, edge := range []string{"TPE-1", "KHH-1"} {
			checkSeisplotjsStations(t, d, b.dir, edge)
		}
	})
	t.Run("seisplotjs reads waveforms through an edge", func(t *testing.T) {
		b := <-spj
		spj <- b
		if b.err != nil {
			t.Fatalf("install seisplotjs: %v", b.err)
		}
		checkSeisplotjsDataselect(t, d, b.dir, "KHH-1")
	})
	t.Run("seisplotjs reads availability through an edge", func(t *testing.T) {
		b := <-spj
		spj <- b
		if b.err != nil {
			t.Fatalf("install seisplotjs: %v", b.err)
		}
		checkSeisplotjsAvailability(t, d, b.dir, "TPE-1")
	})
	t.Run("slinktool reads SeedLink 3 and 4 over TCP", func(t *testing.T) {
		p := slinktoolPath()
		if p == "" {
			t.Skip("slinktool not found (Debian has no package): build github.com/EarthScope/slinktool, put it on PATH or name it in SHINDO_SLINKTOOL")
		}
		checkSlinktool(t, d, p)
	})
	t.Run("documents name the edge they came through", func(t *testing.T) { checkPublicOrigin(t, d) })
	t.Run("ObsPy reads stations, waveforms, events and SeedLink through an edge", func(t *testing.T) {
		python := obspyPython()
		if python == "" {
			t.Skip("ObsPy not importable (Debian has no package, PyPI is not reachable here): build it from its source as docs/ARCHITECTURE.md shows and name its python in SHINDO_OBSPY_PYTHON")
		}
		token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		checkObsPy(t, d, python, "TPE-1", strings.TrimSpace(string(token)))
	})
	for _, proto := range []int{3, 4} {
		t.Run(fmt.Sprintf("seisplotjs SeedLink %d moves from core to core", proto), func(t *testing.T) {
			b := <-spj
			spj <- b
			if b.err != nil {
				t.Fatalf("install seisplotjs: %v", b.err)
			}
			checkSeisplotjsSeedLink(t, d, b.dir, proto)
		})
	}
	t.Run("seisplotjs reads events through an edge", func(t *testing.T) {
		b := <-spj
		spj <- b
		if b.err != nil {
			t.Fatalf("install seisplotjs: %v", b.err)
		}
		token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		checkSeisplotjsEvents(t, d, b.dir, "TPE-1", strings.TrimSpace(string(token)))
	})
}

// restartedRTSRebuilds: TNN-1's RTS, killed from outside while an
// earthquake is in progress, comes back listing that earthquake under the
// ID TYO-1 gives it, and lists no detection TYO-1 never had: it rebuilt its
// detections from the records of the last minutes, which its ingest
// replayed, before its first tick.
func restartedRTSRebuilds(t *testing.T, d *dev) {
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tnn := watchCoreTicks(ctx, t, d.endpoints.get(t, "TNN-1", "rts", "grpc"))
	tyo := watchCoreTicks(ctx, t, d.endpoints.get(t, "TYO-1", "rts", "grpc"))

	// Both list the earthquake, for a few seconds.
	var open string
	poll.Until(t, 2*time.Minute, "a detection at both cores", func() bool {
		_, a := tnn.since(0)
		_, b := tyo.since(0)
		if len(a) > 0 && len(b) > 0 && len(a[len(a)-1]) > 0 && slices.Contains(b[len(b)-1], a[len(a)-1][0]) {
			open = a[len(a)-1][0]
		}
		return open != ""
	})
	t.Logf("both cores list %s", open)
	// The earthquake goes on a few seconds (5 s of ticks at both cores)
	// before the kill, so the records replayed hold it.
	listed := time.Now().UnixMilli()
	poll.Until(t, 30*time.Second, "5 s of ticks at both cores after both listed "+open, func() bool {
		a, _ := tnn.since(listed)
		b, _ := tyo.since(listed)
		return len(a) > 0 && a[len(a)-1]-a[0] >= 5_000 && len(b) > 0 && b[len(b)-1]-b[0] >= 5_000
	})

	old := processes(t, control)["TNN-1-rts"].PID
	killedAt := time.Now().UnixMilli()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill TNN-1-rts (%d): %v", old, err)
	}
	// Its first ticks after the restart, then 20 s of them.
	var ticks []int64
	var ids [][]string
	if !poll.Within(45*time.Second, func() bool {
		ticks, ids = tnn.since(killedAt)
		return len(ticks) > 0 && ticks[len(ticks)-1]-ticks[0] >= 20_000
	}) {
		t.Fatalf("TNN-1's RTS computed %d ticks in the 45 s after its kill:\n%s", len(ticks), d.stderr.String())
	}
	t.Logf("TNN-1's RTS back with the tick of %s (killed at %s)", time.UnixMilli(ticks[0]).Format("15:04:05.0"), time.UnixMilli(killedAt).Format("15:04:05.0"))
	if !slices.Contains(ids[0], open) {
		t.Errorf("TNN-1's first tick after its restart lists %v, not the earthquake in progress %s", ids[0], open)
	}
	_, peer := tyo.since(0)
	atPeer := map[string]bool{}
	for _, l := range peer {
		for _, id := range l {
			atPeer[id] = true
		}
	}
	for i, l := range ids {
		for _, id := range l {
			if !atPeer[id] {
				t.Errorf("TNN-1 lists %s at tick %d after its restart; TYO-1 never did", id, ticks[i])
				atPeer[id] = true // once
			}
		}
	}
}

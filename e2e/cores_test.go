package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

// feeder is a test fleet: stations sending a sensor and an intensity frame
// every 500 ms with samples the test can recompute, each uplink switchable
// per station, recording what it sent.
type feeder struct {
	t     *testing.T
	sts   []devStation
	keys  [][]byte
	conns []*net.UDPConn  // per core
	addrs []*net.UDPAddr  // per core
	on    [][]atomic.Bool // [station][core]

	mu   sync.Mutex
	sent []map[int64]bool // per station: window starts sent on some uplink
}

func newFeeder(t *testing.T, sts []devStation, ingestUDPs ...string) *feeder {
	f := &feeder{t: t, sts: sts}
	for _, st := range sts {
		key, err := hex.DecodeString(st.KeyHex)
		if err != nil {
			t.Fatal(err)
		}
		f.keys = append(f.keys, key)
		f.on = append(f.on, make([]atomic.Bool, len(ingestUDPs)))
		f.sent = append(f.sent, map[int64]bool{})
	}
	for _, a := range ingestUDPs {
		addr, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.ListenUDP("udp", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go func() { // acks are not needed; keep the socket drained
			buf := make([]byte, 2048)
			for {
				if _, _, err := conn.ReadFrom(buf); err != nil {
					return
				}
			}
		}()
		f.conns, f.addrs = append(f.conns, conn), append(f.addrs, addr)
	}
	return f
}

// set switches station i's uplink to core c.
func (f *feeder) set(i, c int, on bool) { f.on[i][c].Store(on) }

// sample is the recomputable sample of station i at time t (ms) on axis a.
func sample(i int, t int64, a int) int32 {
	return int32((t/20*7+int64(i)*1000+int64(a)*333)%4001) - 2000
}

// run sends one window per station every 500 ms until ctx ends.
func (f *feeder) run(ctx context.Context) {
	seq := uint64(time.Now().UnixMilli())
	for ctx.Err() == nil {
		now := time.Now().UnixMilli()
		end := now / 500 * 500
		start := end - 500
		for i, st := range f.sts {
			sensor := &stationv1.SensorFrame{FirstSampleMs: start, RateHz: 50, ScaleGal: 0.001}
			for k := range int64(25) {
				t := start + k*20
				sensor.Ns = append(sensor.Ns, sample(i, t, 0))
				sensor.Ew = append(sensor.Ew, sample(i, t, 1))
				sensor.Ud = append(sensor.Ud, sample(i, t, 2))
			}
			pkts := []*stationv1.Packet{
				{StationId: st.ID, SentAtMs: now, Body: &stationv1.Packet_Sensor{Sensor: sensor}},
				{StationId: st.ID, SentAtMs: now, Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
					WindowEndMs: end, Intensity: 0.5, PgaGal: 1, PgvCms: 0.1}}},
			}
			sent := false
			for _, p := range pkts {
				seq++
				p.Seq = seq
				b, err := stationwire.Seal(f.keys[i], st.KeyID, p)
				if err != nil {
					f.t.Error(err)
					return
				}
				for c, conn := range f.conns {
					if f.on[i][c].Load() {
						conn.WriteToUDP(b, f.addrs[c])
						sent = true
					}
				}
			}
			if sent {
				f.mu.Lock()
				f.sent[i][start] = true
				f.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(time.UnixMilli(end + 500 + 5))):
		}
	}
}

// windows returns the window starts sent for station i in [from, to).
func (f *feeder) windows(i int, from, to int64) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int64
	for w := range f.sent[i] {
		if w >= from && w < to {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// archive reads a core's archive of station id over [from, to) through
// its data API: every sample time with its three axes. Duplicated sample
// times fail the test.
func archive(t *testing.T, dataAPI, id string, from, to int64) (map[int64][3]int32, error) {
	url := fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", dataAPI, id, from, to)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var raw struct {
		Chunks []map[string]json.RawMessage `json:"chunks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return nil, err
	}
	out := map[int64][3]int32{}
	for _, c := range raw.Chunks {
		var first string
		var axes [3][]int32
		json.Unmarshal(c["first_sample_ms"], &first)
		json.Unmarshal(c["ns"], &axes[0])
		json.Unmarshal(c["ew"], &axes[1])
		json.Unmarshal(c["ud"], &axes[2])
		t0, err := strconv.ParseInt(first, 10, 64)
		if err != nil || len(axes[0]) != len(axes[1]) || len(axes[0]) != len(axes[2]) {
			return nil, fmt.Errorf("malformed chunk (fields %v)", slices.Sorted(maps.Keys(c)))
		}
		for k := range axes[0] {
			ts := t0 + int64(k)*20
			if _, dup := out[ts]; dup {
				t.Errorf("%s: sample %d of %s twice in the archive", dataAPI, ts, id)
			}
			out[ts] = [3]int32{axes[0][k], axes[1][k], axes[2][k]}
		}
	}
	return out, nil
}

// expected is what the archive must hold for station i: every sample of
// every window sent.
func (f *feeder) expected(i int, from, to int64) map[int64][3]int32 {
	out := map[int64][3]int32{}
	for _, w := range f.windows(i, from, to) {
		for k := range int64(25) {
			ts := w + k*20
			out[ts] = [3]int32{sample(i, ts, 0), sample(i, ts, 1), sample(i, ts, 2)}
		}
	}
	return out
}

// TestCoresConverge: each core ends up with every sample any station sent,
// once, whichever core received it:
//   - a station whose uplink to TNN-1 is cut: TNN-1 has it all via TYO-1;
//   - TNN-1 killed for 20 s and restarted: its archive for that span
//     equals TYO-1's;
//   - the cores partitioned from each other while each receives a different
//     station, then healed: both archives hold both stations.
func TestCoresConverge(t *testing.T) {
	t.Parallel() // waits more than it works: see doc.go
	d := startDev(t, "-stations", "2", "-simulate=false")
	api := map[string]string{}
	for _, c := range []string{"TNN-1", "TYO-1"} {
		api[c] = d.endpoints.get(t, c, "dataapi", "http")
	}
	const tnn, tyo = 0, 1
	f := newFeeder(t, d.stations[:2], d.endpoints.get(t, "TNN-1", "ingest", "udp"), d.endpoints.get(t, "TYO-1", "ingest", "udp"))
	for i := range 2 {
		f.set(i, tnn, true)
		f.set(i, tyo, true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.run(ctx)
	phase := func(name string, d time.Duration) (from, to int64) {
		t.Logf("%s for %s", name, d)
		from = time.Now().UnixMilli()/500*500 - 500
		// The phase is the fault held for d while the stations send:
		// what the archives must then hold, not a wait for a state.
		time.Sleep(d) //nolint:forbidigo // holds the fault for the phase
		return from, time.Now().UnixMilli()/500*500 + 500
	}

	// 1. Station 0's uplink to TNN-1 cut.
	f.set(0, tnn, false)
	cutFrom, cutTo := phase("uplink station 0 → TNN-1 cut", 8*time.Second)
	f.set(0, tnn, true)

	// 2. TNN-1 down for 20 s, both stations still sending to both (the
	// feeder does not retransmit: what TNN-1 missed comes by the sync).
	fault(t, d, "kill", "TNN-1")
	downFrom, downTo := phase("TNN-1 down", 20*time.Second)
	fault(t, d, "start", "TNN-1")
	phase("TNN-1 back", 5*time.Second)

	// 3. Cores partitioned: station 0 reaches only TNN-1, station 1 only
	// TYO-1.
	fault(t, d, "partition")
	f.set(0, tyo, false)
	f.set(1, tnn, false)
	partFrom, partTo := phase("cores partitioned", 10*time.Second)
	f.set(0, tyo, true)
	f.set(1, tnn, true)
	fault(t, d, "heal")
	_, end := phase("healed", 3*time.Second)
	cancel()

	windows := []struct {
		name     string
		from, to int64
	}{
		{"uplink cut", cutFrom, cutTo},
		{"TNN-1 down", downFrom, downTo},
		{"partition", partFrom, partTo},
		{"whole run", cutFrom, end},
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, w := range windows {
		for i, st := range d.stations[:2] {
			want := f.expected(i, w.from, w.to)
			if len(want) == 0 {
				t.Fatalf("%s: nothing sent for %s", w.name, st.ID)
			}
			var diffs []string
			if !poll.Within(time.Until(deadline), func() bool {
				diffs = nil
				for _, core := range []string{"TNN-1", "TYO-1"} {
					got, err := archive(t, api[core], st.ID, w.from, w.to)
					if err != nil {
						diffs = append(diffs, fmt.Sprintf("%s: %v", core, err))
						continue
					}
					if !maps.Equal(got, want) {
						missing := 0
						for ts := range want {
							if _, ok := got[ts]; !ok {
								missing++
							}
						}
						diffs = append(diffs, fmt.Sprintf("%s has %d samples, %d of the %d sent missing", core, len(got), missing, len(want)))
					}
				}
				return len(diffs) == 0
			}) {
				t.Fatalf("%s, %s: archives never converged: %v", w.name, st.ID, diffs)
			}
		}
		t.Logf("%s: both archives hold every sample sent, once", w.name)
	}
}

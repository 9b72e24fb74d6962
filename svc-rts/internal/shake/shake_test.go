package shake

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"shindo.dev/svc-rts/internal/detect"
)

var places = map[string]Place{
	"HUA": {Lat: 23.99, Lon: 121.61, Code: 970}, // box 18
	"JIA": {Lat: 23.96, Lon: 121.57, Code: 973}, // box 18
	"TPE": {Lat: 25.03, Lon: 121.52, Code: 100}, // box 4
	"SHO": {Lat: 23.86, Lon: 121.51, Code: 974}, // box 18
}

func newEngine() *Engine {
	return New(Config{
		AlertIntensity:     1.5,
		DisplayDecayPerSec: 0.2,
		Locate: func(id string) (Place, bool) {
			p, ok := places[id]
			return p, ok
		},
	})
}

const t0 = int64(1_800_000_000_000)

func TestSnapshotValues(t *testing.T) {
	t.Parallel()
	e := newEngine()
	e.Apply("HUA", Frame{WindowEndMs: t0, Intensity: 4.6, PGA: 120, PGV: 8})
	e.Apply("JIA", Frame{WindowEndMs: t0, Intensity: 3.2, PGA: 30, PGV: 2})
	e.Apply("TPE", Frame{WindowEndMs: t0, Intensity: 0.4, PGA: 1, PGV: 0.1})
	e.Apply("ZZZ", Frame{WindowEndMs: t0, Intensity: 2.0}) // not in the registry

	snap := e.Snapshot(t0)
	if len(snap.Stations) != 4 || snap.Stations[0].ID != "HUA" || snap.Stations[3].ID != "ZZZ" {
		t.Fatalf("stations %+v", snap.Stations)
	}
	hua := snap.Stations[0]
	if hua.PGA != 120 || hua.PGV != 8 || hua.Intensity != 4.6 || hua.Display != 4.6 || !hua.Alert {
		t.Errorf("HUA %+v", hua)
	}
	if snap.Stations[2].Alert {
		t.Error("TPE at 0.4 alerted")
	}
	// 4.6 is class 5- (level 5); 3.2 is class 3.
	if want := []Level{{18, 5}}; !reflect.DeepEqual(snap.Boxes, want) {
		t.Errorf("boxes %+v, want %+v", snap.Boxes, want)
	}
	if want := []Level{{970, 5}, {973, 3}}; !reflect.DeepEqual(snap.Areas, want) {
		t.Errorf("areas %+v, want %+v", snap.Areas, want)
	}
}

func TestOfflineAfterThreeSeconds(t *testing.T) {
	t.Parallel()
	e := newEngine()
	e.Apply("HUA", Frame{WindowEndMs: t0, Intensity: 1})
	for _, tc := range []struct {
		tick   int64
		online bool
	}{
		{t0 - 500, false}, // frame not yet ended
		{t0, true},
		{t0 + 2500, true},
		{t0 + 3000, false}, // exactly 3 s old: offline
	} {
		if got := len(e.Snapshot(tc.tick).Stations) == 1; got != tc.online {
			t.Errorf("tick %+d ms: online %v, want %v", tc.tick-t0, got, tc.online)
		}
	}
}

func TestDisplayIntensityDecays(t *testing.T) {
	t.Parallel()
	e := newEngine()
	e.Apply("HUA", Frame{WindowEndMs: t0, Intensity: 5})
	for i := int64(1); i <= 10; i++ {
		e.Apply("HUA", Frame{WindowEndMs: t0 + i*500, Intensity: 1})
	}
	v := e.Snapshot(t0 + 5000).Stations[0]
	if v.Intensity != 1 || math.Abs(float64(v.Display)-4) > 1e-5 { // 5 − 0.2·5 s
		t.Fatalf("after 5 s: i=%v I=%v, want i=1 I=4", v.Intensity, v.Display)
	}
	// The display never falls below the current value.
	e.Apply("HUA", Frame{WindowEndMs: t0 + 5500, Intensity: 4.5})
	if v := e.Snapshot(t0 + 5500).Stations[0]; v.Display != 4.5 {
		t.Fatalf("I=%v below i=4.5", v.Display)
	}
}

func TestRejectsBadFrames(t *testing.T) {
	t.Parallel()
	e := newEngine()
	for _, f := range []Frame{
		{WindowEndMs: t0 + 1},
		{WindowEndMs: 0},
		{WindowEndMs: -500},
		{WindowEndMs: t0, Intensity: float32(math.NaN())},
		{WindowEndMs: t0, PGA: float32(math.Inf(1))},
	} {
		if e.Apply("HUA", f) {
			t.Errorf("accepted %+v", f)
		}
	}
	e.Apply("HUA", Frame{WindowEndMs: t0 + 100_000})
	if e.Apply("HUA", Frame{WindowEndMs: t0}) {
		t.Error("accepted a frame older than the kept history")
	}
}

// TestBoundP: a frame's P-wave measurement that no station could have
// made is dropped (the frame itself is kept); an honest one is kept whole.
func TestBoundP(t *testing.T) {
	t.Parallel()
	end := t0 + 500
	good := detect.PWave{OnsetMs: end - 2000, WindowMs: 2000, PdCm: 0.6, TauCS: 1.4}
	if got := boundP(good, end); got != good {
		t.Errorf("honest %+v became %+v", good, got)
	}
	for _, w := range []detect.PWave{
		{OnsetMs: end + 20, WindowMs: 20},
		{OnsetMs: end - 3_600_000, WindowMs: 3000},
		{OnsetMs: end - 1000, WindowMs: 60_000},
		{OnsetMs: end - 1000, WindowMs: -1},
		{OnsetMs: end - 1000, WindowMs: 1000, PdCm: 1e6},
		{OnsetMs: end - 1000, WindowMs: 1000, PdCm: -1},
		{OnsetMs: end - 1000, WindowMs: 1000, TauCS: float32(math.NaN())},
		{OnsetMs: end - 1000, WindowMs: 1000, TauCS: float32(math.Inf(1))},
	} {
		if got := boundP(w, end); got != (detect.PWave{}) {
			t.Errorf("%+v kept as %+v", w, got)
		}
	}
}

// TestOrderIndependent: the same frames in any order, with duplicates,
// give identical snapshots — what lets two cores agree.
func TestOrderIndependent(t *testing.T) {
	t.Parallel()
	var frames []struct {
		id string
		f  Frame
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, id := range []string{"HUA", "JIA", "TPE"} {
		for i := range int64(40) {
			frames = append(frames, struct {
				id string
				f  Frame
			}{id, Frame{WindowEndMs: t0 + i*500, Intensity: float32(r.Float64() * 5), PGA: float32(r.Float64() * 100)}})
		}
	}
	snapshots := func(order []int) []Snapshot {
		e := newEngine()
		for _, i := range order {
			e.Apply(frames[i].id, frames[i].f)
		}
		var out []Snapshot
		for tick := t0; tick < t0+20_000; tick += 500 {
			out = append(out, e.Snapshot(tick))
		}
		return out
	}
	inOrder := make([]int, len(frames))
	for i := range inOrder {
		inOrder[i] = i
	}
	want := snapshots(inOrder)
	for trial := range 5 {
		order := append([]int(nil), inOrder...)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		order = append(order, order[:len(order)/3]...) // duplicates
		if got := snapshots(order); !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: snapshots differ with arrival order", trial)
		}
	}
}

func TestAwaitCompletesWhenAllOnlineStationsReported(t *testing.T) {
	t.Parallel()
	e := newEngine()
	for _, id := range []string{"HUA", "JIA", "TPE"} {
		e.Apply(id, Frame{WindowEndMs: t0, Intensity: 1})
	}
	tick := t0 + 500
	done := e.Await(tick)
	e.Apply("HUA", Frame{WindowEndMs: tick})
	e.Apply("HUA", Frame{WindowEndMs: tick}) // a duplicate does not count twice
	e.Apply("JIA", Frame{WindowEndMs: tick})
	select {
	case <-done:
		t.Fatal("complete with one station missing")
	default:
	}
	e.Apply("TPE", Frame{WindowEndMs: tick})
	select {
	case <-done:
	default:
		t.Fatal("not complete after every station reported")
	}
	// Frames that arrived before Await count too.
	next := tick + 500
	for _, id := range []string{"HUA", "JIA", "TPE"} {
		e.Apply(id, Frame{WindowEndMs: next})
	}
	select {
	case <-e.Await(next):
	default:
		t.Fatal("early frames not counted")
	}
}

// TestAwaitQuorum: with TickQuorum 0.995, the quorum of a tick is all but
// 0.5 % of the stations online at the previous tick, rounded down — 2 of
// 400 may be missing; below 200 stations it is every one of them, as is
// completion. From the quorum on each new frame for the tick is an arrival.
func TestAwaitQuorum(t *testing.T) {
	t.Parallel()
	ready := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	for _, c := range []struct{ stations, quorum int }{{400, 398}, {1000, 995}, {199, 199}, {5, 5}} {
		e := New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, TickQuorum: 0.995})
		for i := range c.stations {
			e.Apply(fmt.Sprint(i), Frame{WindowEndMs: t0})
		}
		tick := t0 + 500
		complete := e.Await(tick)
		for i := range c.quorum - 1 {
			e.Apply(fmt.Sprint(i), Frame{WindowEndMs: tick})
		}
		if ready(e.Quorum()) || ready(e.Arrivals()) {
			t.Fatalf("%d stations: quorum or an arrival after it with %d frames in", c.stations, c.quorum-1)
		}
		e.Apply(fmt.Sprint(c.quorum-1), Frame{WindowEndMs: tick})
		if !ready(e.Quorum()) || !ready(e.Arrivals()) {
			t.Fatalf("%d stations: no quorum or no arrival with %d frames in", c.stations, c.quorum)
		}
		if got := ready(complete); got != (c.quorum == c.stations) {
			t.Fatalf("%d stations: complete %v with %d frames in", c.stations, got, c.quorum)
		}
		if c.quorum < c.stations {
			// A frame after the quorum is an arrival; the same frame
			// again, or one for another tick, is not.
			e.Apply(fmt.Sprint(c.quorum), Frame{WindowEndMs: tick})
			if !ready(e.Arrivals()) {
				t.Fatalf("%d stations: no arrival for frame %d after the quorum", c.stations, c.quorum+1)
			}
			e.Apply(fmt.Sprint(c.quorum), Frame{WindowEndMs: tick})
			e.Apply(fmt.Sprint(c.quorum), Frame{WindowEndMs: tick + 500})
			if ready(e.Arrivals()) {
				t.Fatalf("%d stations: an arrival for a repeated frame or another tick's", c.stations)
			}
		}
	}
}

// TestDetectionInSnapshot: three nearby stations triggering make a
// detection in the snapshot, named by the first one's tick and box.
func TestDetectionInSnapshot(t *testing.T) {
	t.Parallel()
	e := newEngine()
	for k := range int64(6) {
		tick := t0 + k*500
		for i, id := range []string{"HUA", "JIA", "SHO", "TPE"} {
			v := float32(0.1)
			if id != "TPE" && k >= int64(i) {
				v = 3.2
			}
			e.Apply(id, Frame{WindowEndMs: tick, Intensity: v})
		}
		snap := e.Snapshot(tick)
		if got := len(snap.Detections); (k >= 2) != (got == 1) {
			t.Fatalf("tick %d: %d detections", k, got)
		}
	}
	d := e.Snapshot(t0 + 2500).Detections[0]
	if d.ID != "1800000000000-18" || d.Stations != 3 || d.MaxLevel != 3 || d.Serial != 1 {
		t.Fatalf("detection %+v", d)
	}
	// An earlier tick gets the detections kept for it.
	if got := e.Snapshot(t0 + 500).Detections; len(got) != 0 {
		t.Fatalf("tick 1 again: %+v", got)
	}
}

// TestLateFrames: a late frame that cannot change what was triggered
// costs nothing; one that can is accounted for, even right after the
// engine started, so the engine ends as if it had come in time.
func TestLateFrames(t *testing.T) {
	t.Parallel()
	feed := func(e *Engine, lateJIA bool) Snapshot {
		var snap Snapshot
		for k := range int64(8) {
			tick := t0 + k*500
			for _, id := range []string{"HUA", "JIA", "SHO", "TPE"} {
				v := float32(0.1)
				if id != "TPE" && k >= 1 {
					v = 3.2
				}
				if id == "JIA" && k == 1 && lateJIA {
					continue
				}
				e.Apply(id, Frame{WindowEndMs: tick, Intensity: v})
			}
			if k == 4 && lateJIA {
				e.Apply("TPE", Frame{WindowEndMs: t0, Intensity: 0.3}) // late and quiet
				if e.ReplayedTicks() != 0 {
					t.Fatal("a quiet late frame caused a replay")
				}
				e.Apply("JIA", Frame{WindowEndMs: t0 + 500, Intensity: 3.2}) // late and triggering
			}
			snap = e.Snapshot(tick)
		}
		return snap
	}
	want := feed(newEngine(), false)
	e := newEngine()
	got := feed(e, true)
	if e.ReplayedTicks() == 0 || !reflect.DeepEqual(got.Detections, want.Detections) || len(want.Detections) != 1 {
		t.Fatalf("replayed %d ticks; detections %+v, want %+v", e.ReplayedTicks(), got.Detections, want.Detections)
	}
}

// TestFinalStaysFinal: a detection the engine emitted as final is not
// reopened by a late frame that shows one of its stations triggered again
// before it ended (rts.v1: a final detection never changes again); it is
// listed as sent until it has lingered its time, and then leaves. An
// engine that held the same frame in time kept the detection open: the
// late frame would have reopened it.
func TestFinalStaysFinal(t *testing.T) {
	t.Parallel()
	// HUA, JIA and SHO shake from tick 1 to 4, then are quiet; at the
	// quiet tick late, HUA shows a moment of shaking again.
	hot := func(id string, k int64) bool { return id != "TPE" && k >= 1 && k <= 4 }
	frame := func(id string, k int64) Frame {
		if hot(id, k) {
			return Frame{WindowEndMs: t0 + k*TickMs, Intensity: 3.2}
		}
		return Frame{WindowEndMs: t0 + k*TickMs, Intensity: 0.1}
	}
	ids := []string{"HUA", "JIA", "SHO", "TPE"}
	const ticks = 120
	run := func(late int64, arrives int64) (snaps []Snapshot) {
		e := newEngine()
		for k := range int64(ticks) {
			for _, id := range ids {
				f := frame(id, k)
				if id == "HUA" && k == late {
					f.Intensity = 3.2
					if arrives > k {
						continue
					}
				}
				e.Apply(id, f)
			}
			if k == arrives {
				f := frame("HUA", late)
				f.Intensity = 3.2
				e.Apply("HUA", f)
			}
			snaps = append(snaps, e.Snapshot(t0+k*TickMs))
		}
		return snaps
	}
	// Without the late frame: final at the first tick 10 s after the
	// last trigger (tick 4).
	plain := run(-1, -1)
	final := int64(-1)
	for k, s := range plain {
		if len(s.Detections) == 1 && s.Detections[0].Final {
			final = int64(k)
			break
		}
	}
	if final != 24 {
		t.Fatalf("final at tick %d, want 24", final)
	}
	sent := plain[final].Detections[0]

	// HUA's frame of tick 22, triggered, in time: the detection stays open
	// past tick 24.
	if d := run(22, 22)[final].Detections; len(d) != 1 || d[0].Final {
		t.Fatalf("with the frame in time, tick %d: %+v, want the detection still open", final, d)
	}
	// The same frame 4 ticks after the detection was emitted as final.
	late := run(22, final+4)
	for k := final; k < ticks; k++ {
		d := late[k].Detections
		if lingering := (k-final)*TickMs < detect.DefaultLinger.Milliseconds(); lingering != (len(d) == 1) {
			t.Fatalf("tick %d: %+v, want the final detection listed: %v", k, d, lingering)
		}
		if len(d) == 1 && !reflect.DeepEqual(d[0], sent) {
			t.Fatalf("tick %d, after the late frame: %+v\nwant it as sent final at tick %d: %+v", k, d[0], final, sent)
		}
	}
}

// TestDeadlineTickMarksLateStation: when a tick closes on its deadline
// with a station's frame for it missing, the station keeps its latest
// values — it is online — but marked with their age, never as the tick's
// own; the stations whose frame is in are current. The age grows until the
// station goes offline at 3 s, and once the late frame is in, the tick
// asked for again shows the station current.
func TestDeadlineTickMarksLateStation(t *testing.T) {
	t.Parallel()
	e := newEngine()
	for _, id := range []string{"HUA", "JIA", "TPE"} {
		e.Apply(id, Frame{WindowEndMs: t0, Intensity: 2, PGA: 20, PGV: 2})
	}
	tick := t0 + 500
	done := e.Await(tick)
	for _, id := range []string{"HUA", "TPE"} {
		e.Apply(id, Frame{WindowEndMs: tick, Intensity: 0.5, PGA: 5, PGV: 0.5})
	}
	select {
	case <-done:
		t.Fatal("complete with JIA's frame missing")
	default: // the tick closes on its deadline
	}
	values := func(snap Snapshot) map[string]StationValue {
		m := map[string]StationValue{}
		for _, v := range snap.Stations {
			m[v.ID] = v
		}
		return m
	}
	got := values(e.Snapshot(tick))
	if want := (StationValue{ID: "JIA", AgeMs: 500, PGA: 20, PGV: 2, Intensity: 2, Display: 2, Alert: true}); got["JIA"] != want {
		t.Errorf("late JIA %+v, want %+v: the values of its previous frame, marked 500 ms old", got["JIA"], want)
	}
	for _, id := range []string{"HUA", "TPE"} {
		if v := got[id]; v.AgeMs != 0 || v.PGA != 5 || v.Intensity != 0.5 || v.Alert {
			t.Errorf("%s %+v, want its frame for the tick, current", id, v)
		}
	}

	for tick := t0 + 1000; tick <= t0+3000; tick += TickMs {
		for _, id := range []string{"HUA", "TPE"} {
			e.Apply(id, Frame{WindowEndMs: tick, Intensity: 0.5, PGA: 5, PGV: 0.5})
		}
		v, online := values(e.Snapshot(tick))["JIA"]
		if wantOnline := tick < t0+OfflineAfterMs; online != wantOnline || online && (v.AgeMs != tick-t0 || v.PGA != 20) {
			t.Errorf("tick %+d ms: JIA %+v online %v, want the frame of %+d ms, %d ms old, online %v", tick-t0, v, online, 0, tick-t0, wantOnline)
		}
	}

	e.Apply("JIA", Frame{WindowEndMs: tick, Intensity: 0.4, PGA: 4, PGV: 0.4})
	if v := values(e.Snapshot(tick))["JIA"]; v.AgeMs != 0 || v.PGA != 4 || v.Intensity != 0.4 || v.Alert {
		t.Errorf("tick asked again once the late frame is in: JIA %+v, want its frame for the tick, current", v)
	}
}

// TestCoresAgreeAfterADeadlineTick: two cores get the same frames, core A
// each before its tick is computed, core B some only after their tick
// closed on its deadline — one frame a tick late, four frames of a station
// held 2 s (a WebSocket fallback), a quiet frame after triggered ones a tick
// late. The agreement is the documented one (package doc): B's snapshot of
// a tick it lacked a frame for differs from A's only in that station,
// marked with its age and carrying its previous values, and in the
// detections that station's frame would change; every other snapshot is
// identical, detections with their IDs and serials included, from the
// first tick computed after the late frames are in; and B's snapshot of
// the tick a frame missed, asked for again once it is in, is A's.
func TestCoresAgreeAfterADeadlineTick(t *testing.T) {
	t.Parallel()
	type key struct {
		id string
		k  int64
	}
	onset := map[string]int64{"HUA": 4, "JIA": 5, "SHO": 6}
	frame := func(id string, k int64) Frame {
		f := Frame{WindowEndMs: t0 + k*TickMs, Intensity: 0.2, PGA: float32(k) + 0.5, PGV: 0.1}
		if on, ok := onset[id]; ok && k >= on && k <= 14 {
			f.Intensity, f.PGA = 2.6+float32(k)/20, 30+float32(k)
		}
		return f
	}
	// lateUntil: B gets these frames just before the tick given.
	lateUntil := map[key]int64{
		{"JIA", 5}:  6,
		{"SHO", 6}:  10,
		{"SHO", 7}:  10,
		{"SHO", 8}:  10,
		{"SHO", 9}:  10,
		{"HUA", 15}: 16,
	}
	ids := []string{"HUA", "JIA", "SHO", "TPE"}
	const ticks = 40
	a, b := newEngine(), newEngine()
	var snapsA []Snapshot
	for k := range int64(ticks) {
		for _, id := range ids {
			a.Apply(id, frame(id, k))
		}
		snapsA = append(snapsA, a.Snapshot(t0+k*TickMs))
	}

	var snapsB []Snapshot
	missed := map[int64]map[string]int64{} // tick → station → its latest frame held by B
	for k := range int64(ticks) {
		tick := t0 + k*TickMs
		var arrived []int64
		for kk := range k {
			for _, id := range ids {
				if lateUntil[key{id, kk}] == k {
					b.Apply(id, frame(id, kk))
					arrived = append(arrived, kk)
				}
			}
		}
		for _, kk := range arrived {
			// The tick a late frame missed, asked for again: now A's.
			if got := b.Snapshot(t0 + kk*TickMs); !reflect.DeepEqual(got, snapsA[kk]) {
				t.Errorf("tick %d asked again after its late frame:\n got  %+v\n want %+v", kk, got, snapsA[kk])
			}
		}
		for _, id := range ids {
			if _, late := lateUntil[key{id, k}]; !late {
				b.Apply(id, frame(id, k))
			}
		}
		// Which stations B lacks a frame for at this tick, and its latest.
		for _, id := range ids {
			for kk := k; kk >= 0; kk-- {
				if until, late := lateUntil[key{id, kk}]; !late || until <= k {
					if kk < k {
						if missed[k] == nil {
							missed[k] = map[string]int64{}
						}
						missed[k][id] = kk
					}
					break
				}
			}
		}
		got, want := b.Snapshot(tick), snapsA[k]
		snapsB = append(snapsB, got)
		if len(missed[k]) == 0 {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("tick %d, every frame in:\n got  %+v\n want %+v", k, got, want)
			}
			continue
		}
		if len(got.Stations) != len(want.Stations) {
			t.Fatalf("tick %d: stations %+v, want %+v", k, got.Stations, want.Stations)
		}
		for i, v := range got.Stations {
			latest, late := missed[k][v.ID]
			if !late {
				if w := want.Stations[i]; v != w {
					t.Errorf("tick %d: %s %+v, want %+v", k, v.ID, v, w)
				}
				continue
			}
			f := frame(v.ID, latest)
			if v.AgeMs != (k-latest)*TickMs || v.PGA != f.PGA || v.Intensity != f.Intensity {
				t.Errorf("tick %d: late %s %+v, want the values of its frame of tick %d, %d ms old", k, v.ID, v, latest, (k-latest)*TickMs)
			}
		}
	}
	if b.ReplayedTicks() == 0 {
		t.Fatal("no tick of detections was recomputed")
	}
	// The held frames mattered: A opened the detection at tick 6, when
	// SHO triggered; B, without SHO's frames, did not until they came.
	if len(snapsA[5].Detections) != 0 || len(snapsA[6].Detections) != 1 || len(snapsB[9].Detections) != 0 || len(snapsB[10].Detections) != 1 {
		t.Fatalf("detections at ticks 5, 6 (A) and 9, 10 (B): %+v, %+v, %+v, %+v",
			snapsA[5].Detections, snapsA[6].Detections, snapsB[9].Detections, snapsB[10].Detections)
	}
}

func TestForget(t *testing.T) {
	t.Parallel()
	e := newEngine()
	e.Apply("HUA", Frame{WindowEndMs: t0})
	e.Forget(t0 + 60_000)
	if e.Online(t0) != 1 {
		t.Fatal("forgot a station within the history")
	}
	e.Forget(t0 + historyLen*TickMs)
	if e.Online(t0) != 0 {
		t.Fatal("station beyond the history kept")
	}
}

func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("stations=%d", n), func(b *testing.B) {
			e := New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(string) (Place, bool) {
				return Place{Lat: 23.9, Lon: 121.5, Code: 970}, true
			}})
			r := rand.New(rand.NewPCG(1, 1))
			for i := range n {
				id := fmt.Sprintf("S%05d", i)
				for k := range int64(historyLen) {
					e.Apply(id, Frame{WindowEndMs: t0 + k*500, Intensity: float32(r.Float64() * 3)})
				}
			}
			tick := t0 + (historyLen-1)*500
			for b.Loop() {
				e.Snapshot(tick)
			}
		})
	}
}

// TestIgnoresTheFarFuture: a frame dated far ahead of the clock is refused
// (ingest bounds it too; the engine does not rely on that), and the
// station's real frames go on being taken — one such frame used to hold
// its newest time in the year 9999 and hide it until a restart.
func TestIgnoresTheFarFuture(t *testing.T) {
	t.Parallel()
	e := New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(string) (Place, bool) { return Place{}, false },
		MaxAheadMs: 60_000, Now: func() time.Time { return time.UnixMilli(t0) }})
	if e.Apply("HUA", Frame{WindowEndMs: 253402300799000}) {
		t.Fatal("accepted a frame from the year 9999")
	}
	if e.Apply("HUA", Frame{WindowEndMs: t0 + 61_000}) {
		t.Fatal("accepted a frame a minute ahead")
	}
	if !e.Apply("HUA", Frame{WindowEndMs: t0, Intensity: 2}) || !e.Apply("HUA", Frame{WindowEndMs: t0 + 60_000, Intensity: 2}) {
		t.Fatal("refused the station's real frames")
	}
	if s := e.Snapshot(t0); len(s.Stations) != 1 {
		t.Fatalf("the station is not in the snapshot: %+v", s)
	}
}

// TestAdopt: an engine takes another's detection state of a tick at or
// before its own latest, and from then on steps it with its own frames —
// a late frame from before that tick no longer moves it; a state of a
// later tick, or off the grid, is refused.
func TestAdopt(t *testing.T) {
	t.Parallel()
	feed := func(e *Engine, from, to int64, ids ...string) {
		for k := from; k <= to; k++ {
			for _, id := range []string{"HUA", "JIA", "SHO"} {
				v := float32(0.1)
				for _, hot := range ids {
					if id == hot {
						v = 3.2
					}
				}
				e.Apply(id, Frame{WindowEndMs: t0 + k*500, Intensity: v})
			}
			e.Snapshot(t0 + k*500)
		}
	}
	a, b := newEngine(), newEngine()
	feed(a, 0, 6, "HUA", "JIA", "SHO") // a saw the earthquake begin
	feed(b, 0, 6)                      // b saw nothing of it
	if _, _, ok := a.DetectorState(t0 - 1000); ok {
		t.Error("a state of a tick before the engine's first was given")
	}
	tick, st, ok := a.DetectorState(t0 + 2500)
	if !ok || tick != t0+2500 || len(st.Events) != 1 {
		t.Fatalf("state of tick %d (ok %v): %+v", tick, ok, st)
	}
	if err := b.Adopt(t0+3500, st); err == nil {
		t.Error("a state of a tick after the engine's latest was adopted")
	}
	if err := b.Adopt(t0+3001, st); err == nil {
		t.Error("a state off the tick grid was adopted")
	}
	if err := b.Adopt(tick, st); err != nil {
		t.Fatal(err)
	}
	// Both step on with the same frames from the adopted tick on; b's own
	// quiet frames of ticks 1–3 come late and change nothing now.
	for k := int64(1); k <= 3; k++ {
		b.Apply("HUA", Frame{WindowEndMs: t0 + k*500, Intensity: 0.1})
	}
	feed(a, 7, 12, "HUA", "JIA", "SHO")
	feed(b, 7, 12, "HUA", "JIA", "SHO")
	got, want := b.Snapshot(t0+6000).Detections, a.Snapshot(t0+6000).Detections
	if len(want) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("after adopting: %+v, the other engine %+v", got, want)
	}
}

// TestLateFoundingFrameHeld: the station that triggered first is late at
// core B (its frames of 3 ticks arrive together); without it B would
// found the detection from the others and name it after the next
// earliest, an ID A never publishes. B holds the new detection while that
// station's frames since the onset are missing — at most two ticks — and
// publishes A's ID once they came.
func TestLateFoundingFrameHeld(t *testing.T) {
	t.Parallel()
	at := map[string]Place{
		"HUA": {Lat: 23.99, Lon: 121.61, Code: 970},
		"JIA": {Lat: 23.96, Lon: 121.57, Code: 973},
		"SHO": {Lat: 23.86, Lon: 121.51, Code: 974},
		"FEN": {Lat: 23.60, Lon: 121.42, Code: 975},
	}
	onset := map[string]int64{"HUA": 4, "JIA": 5, "SHO": 6, "FEN": 6}
	engine := func() *Engine {
		return New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.2,
			Locate: func(id string) (Place, bool) { p, ok := at[id]; return p, ok }})
	}
	frame := func(id string, k int64) Frame {
		f := Frame{WindowEndMs: t0 + k*TickMs, Intensity: 0.3, PGA: 1}
		if k >= onset[id] {
			f.Intensity, f.PGA = 2.5, 40
		}
		return f
	}
	for _, c := range []struct {
		name      string
		lateUntil int64 // HUA's frames of ticks 4–7 reach B just before this tick
		wantFirst int64 // the tick B first lists a detection
		wantID    string
	}{
		{"late two ticks", 8, 8, strconv.FormatInt(t0+4*TickMs, 10) + "-18"},
		// Held at most two ticks: then B lists what it has.
		{"late beyond the hold", 12, 8, strconv.FormatInt(t0+5*TickMs, 10) + "-18"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := engine(), engine()
			ids := []string{"HUA", "JIA", "SHO", "FEN"}
			firstB := int64(-1)
			for k := range int64(16) {
				for _, id := range ids {
					a.Apply(id, frame(id, k))
					if id == "HUA" && k >= 4 && k < 8 {
						continue
					}
					b.Apply(id, frame(id, k))
				}
				if k == c.lateUntil {
					for kk := int64(4); kk < 8; kk++ {
						b.Apply("HUA", frame("HUA", kk))
					}
				}
				sa, sb := a.Snapshot(t0+k*TickMs), b.Snapshot(t0+k*TickMs)
				if k == 6 && (len(sa.Detections) != 1 || sa.Detections[0].ID != strconv.FormatInt(t0+4*TickMs, 10)+"-18") {
					t.Fatalf("A at tick 6: %+v, want the detection named after HUA", sa.Detections)
				}
				if len(sb.Detections) > 0 && firstB < 0 {
					firstB = k
					if sb.Detections[0].ID != c.wantID {
						t.Fatalf("B first lists %s at tick %d, want %s", sb.Detections[0].ID, k, c.wantID)
					}
				}
			}
			if firstB != c.wantFirst {
				t.Fatalf("B first listed the detection at tick %d, want %d", firstB, c.wantFirst)
			}
		})
	}
}

// TestFoundingTieHeld: three stations trigger at the same tick as ABC,
// whose ID sorts first and which names the detection at A (box 13); ABC's
// frame of that tick is late at B. B holds the detection a tick rather
// than name it after HUA's box (18), because ABC's last frame was rising
// towards the alert intensity; a straggler whose last frame was quiet, or
// whose ID sorts after the earliest member's, does not hold it.
func TestFoundingTieHeld(t *testing.T) {
	t.Parallel()
	at := map[string]Place{
		"ABC": {Lat: 24.05, Lon: 121.60, Code: 971}, // box 13
		"HUA": {Lat: 23.99, Lon: 121.61, Code: 970}, // box 18, as the rest
		"JIA": {Lat: 23.96, Lon: 121.57, Code: 973},
		"KAN": {Lat: 23.90, Lon: 121.55, Code: 973},
	}
	ids := []string{"ABC", "HUA", "JIA", "KAN"}
	const onset = 4
	for _, c := range []struct {
		name      string
		rising    float32 // ABC's intensity the tick before its onset
		wantFirst int64
		wantBox   string
	}{
		{"rising straggler", 1.0, onset + 1, "-13"},
		{"quiet straggler", 0.3, onset, "-18"},
	} {
		t.Run(c.name, func(t *testing.T) {
			frame := func(id string, k int64) Frame {
				f := Frame{WindowEndMs: t0 + k*TickMs, Intensity: 0.3, PGA: 1}
				switch {
				case k >= onset:
					f.Intensity, f.PGA = 2.5, 40
				case k == onset-1 && id == "ABC":
					f.Intensity = c.rising
				}
				return f
			}
			engine := func() *Engine {
				return New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.2,
					Locate: func(id string) (Place, bool) { p, ok := at[id]; return p, ok }})
			}
			a, b := engine(), engine()
			firstB, firstID := int64(-1), ""
			for k := range int64(10) {
				for _, id := range ids {
					a.Apply(id, frame(id, k))
					if id != "ABC" || k != onset {
						b.Apply(id, frame(id, k))
					}
				}
				if k == onset+1 {
					b.Apply("ABC", frame("ABC", onset))
				}
				sa, sb := a.Snapshot(t0+k*TickMs), b.Snapshot(t0+k*TickMs)
				if k == onset && (len(sa.Detections) != 1 || !strings.HasSuffix(sa.Detections[0].ID, "-13")) {
					t.Fatalf("A at the onset: %+v, want the detection named after ABC's box", sa.Detections)
				}
				if len(sb.Detections) > 0 && firstB < 0 {
					firstB, firstID = k, sb.Detections[0].ID
				}
			}
			if firstB != c.wantFirst || !strings.HasSuffix(firstID, c.wantBox) {
				t.Fatalf("B first listed %s at tick %d, want …%s at %d", firstID, firstB, c.wantBox, c.wantFirst)
			}
		})
	}
}

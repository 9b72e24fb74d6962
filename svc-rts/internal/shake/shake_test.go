package shake

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

var places = map[string]Place{
	"HUA": {Lat: 23.99, Lon: 121.61, Code: 970}, // box 18
	"JIA": {Lat: 23.96, Lon: 121.57, Code: 973}, // box 18
	"TPE": {Lat: 25.03, Lon: 121.52, Code: 100}, // box 4
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

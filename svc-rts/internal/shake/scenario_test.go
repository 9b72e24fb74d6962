// The scenario simulations run whole earthquakes through hundreds of
// stations' filters: single-threaded numeric work that the race detector
// slows tenfold and has nothing to find in. make unit runs them in a
// build without -race.

//go:build !race

package shake

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/lib/township"
	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/synth"
	"shindo.dev/svc-rts/internal/detect"
	"shindo.dev/svc-rts/internal/simnet"
)

// Scenario tests run the engine on recorded station input: a network of
// stations over Taiwan (simnet.Grid at 0.1°: 324 stations about 11 km
// apart), each running the station pipeline on synthetic ground motion
// from seismo/synth, as real stations would send it.

// recording is the input of a scenario.
type recording struct {
	stations []simnet.Station
	places   map[string]Place
	frames   []stationFrame // by window end, then station
	firstMs  int64          // first window end
	lastMs   int64          // last window end
}

type stationFrame struct {
	id string
	f  Frame
}

// scenarioOrigin is where scenarios are placed in time: on a tick.
var scenarioOrigin = time.UnixMilli(1_800_000_000_000)

var recordings sync.Map // name → func() *recording

// cached makes a recording once per test binary.
func cached(name string, make func() *recording) *recording {
	f, _ := recordings.LoadOrStore(name, sync.OnceValue(make))
	return f.(func() *recording)()
}

func newRecording(stations []simnet.Station, opts simnet.Options) *recording {
	r := &recording{stations: stations, places: map[string]Place{}}
	for _, s := range stations {
		r.places[s.ID] = Place{Lat: s.Lat, Lon: s.Lon, Code: s.Code}
	}
	for _, fs := range simnet.Record(stations, opts) {
		for _, f := range fs {
			r.frames = append(r.frames, stationFrame{stations[f.Station].ID, Frame{WindowEndMs: f.WindowEndMs, Intensity: f.Intensity, PGA: f.PGA, PGV: f.PGV, SvaCms: f.SvaCms, P: f.P}})
		}
	}
	slices.SortFunc(r.frames, func(a, b stationFrame) int {
		return cmp.Or(cmp.Compare(a.f.WindowEndMs, b.f.WindowEndMs), cmp.Compare(a.id, b.id))
	})
	r.firstMs, r.lastMs = r.frames[0].f.WindowEndMs, r.frames[len(r.frames)-1].f.WindowEndMs
	return r
}

// scenario records a built-in synth scenario on the standard network from
// 10 s before its origin, for seconds.
func scenario(t testing.TB, name string, seconds int) (*recording, synth.Event) {
	t.Helper()
	ev, err := synth.Scenario(name)
	if err != nil {
		t.Fatal(err)
	}
	ev.Origin = scenarioOrigin
	r := cached(name, func() *recording {
		return newRecording(simnet.Grid(0.1, 1), simnet.Options{
			Start: ev.Origin.Add(-10 * time.Second), Duration: time.Duration(seconds) * time.Second,
			Events: []synth.Event{ev}, Seed: 1,
		})
	})
	return r, ev
}

func (r *recording) engine() *Engine {
	return New(Config{
		AlertIntensity: 1.5, DisplayDecayPerSec: 0.15,
		Locate: func(id string) (Place, bool) { p, ok := r.places[id]; return p, ok },
	})
}

// replay feeds the frames in order, each before its tick is computed, and
// returns the snapshot of every tick.
func (r *recording) replay(e *Engine) []Snapshot {
	return r.deliver(e, func(tick int64, frames []stationFrame) []stationFrame { return frames })
}

// deliver computes every tick after applying what arrive returns for it,
// given the frames ending at that tick.
func (r *recording) deliver(e *Engine, arrive func(tick int64, due []stationFrame) []stationFrame) []Snapshot {
	var out []Snapshot
	i := 0
	for tick := r.firstMs; tick <= r.lastMs; tick += TickMs {
		j := i
		for j < len(r.frames) && r.frames[j].f.WindowEndMs <= tick {
			j++
		}
		for _, sf := range arrive(tick, r.frames[i:j]) {
			e.Apply(sf.id, sf.f)
		}
		i = j
		out = append(out, e.Snapshot(tick))
	}
	return out
}

// hualienNeighbourhood are box 18 (which holds the epicentre of the
// Hualien scenario) and the boxes around it.
var hualienNeighbourhood = map[uint32]bool{12: true, 13: true, 17: true, 18: true, 23: true, 24: true}

// TestHualienScenario: the Mw 7.4 Hualien scenario is detected within 3 s
// of the S wave reaching the nearest station, in the right place (the boxes
// lit then, and the strongest box for the first minute, are Hualien's or
// next to it), with the right levels (the detection's level is never below
// a box's, and ends as the highest level of its stations), and the
// estimates converge: epicentre within 30 km at every
// serial, magnitude within ±1 of Mw from 20 s after the origin (earlier
// ones are low: the real-time intensity is still rising), origin time
// within 3 s at the end. The detection ends (final) once the network has
// been quiet for 10 s, stays final, and leaves 30 s later.
func TestHualienScenario(t *testing.T) {
	t.Parallel()
	r, ev := scenario(t, "hualien", 210)
	snaps := r.replay(r.engine())
	originMs := ev.Origin.UnixMilli()
	since := func(ms int64) float64 { return float64(ms-originMs) / 1000 }

	nearestKm := math.Inf(1)
	for _, s := range r.stations {
		nearestKm = min(nearestKm, ev.HypocentralKm(synth.Position{Lat: s.Lat, Lon: s.Lon}))
	}
	sArrival := originMs + int64(1000*nearestKm/synth.DefaultModel().BetaKmS)

	first := slices.IndexFunc(snaps, func(s Snapshot) bool { return len(s.Detections) > 0 })
	if first < 0 {
		t.Fatal("no detection")
	}
	at := snaps[first]
	d := at.Detections[0]
	t.Logf("detected at +%.1f s (S wave at the nearest station, %.0f km, at +%.1f s): %+v", since(at.TimeMs), nearestKm, since(sArrival), d)
	if at.TimeMs > sArrival+3000 {
		t.Errorf("detected %.1f s after the S wave reached the nearest station, want ≤ 3 s", float64(at.TimeMs-sArrival)/1000)
	}
	for _, b := range at.Boxes {
		if !hualienNeighbourhood[b.ID] {
			t.Errorf("box %d lit at detection time, far from Hualien", b.ID)
		}
	}

	// Peak level of every station over the whole event.
	peak := map[string]uint32{}
	for _, sf := range r.frames {
		peak[sf.id] = max(peak[sf.id], uint32(jma.ClassOf(float64(sf.f.Intensity)).Level()))
	}

	var prev detect.Detection
	var finalAt, goneAt int64
	var worstKm float64
	for _, s := range snaps[first:] {
		if len(s.Detections) > 1 || (len(s.Detections) == 1 && s.Detections[0].ID != d.ID) {
			t.Fatalf("+%.1f s: detections %+v, want only %s", since(s.TimeMs), s.Detections, d.ID)
		}
		if len(s.Detections) == 0 {
			goneAt = s.TimeMs
			break
		}
		cur := s.Detections[0]
		sameFlash := reflect.DeepEqual(cur.Flash, prev.Flash)
		withoutFlash := func(d detect.Detection) detect.Detection { d.Flash = nil; return d }
		switch {
		case cur.Serial < prev.Serial:
			t.Fatalf("+%.1f s: serial went back from %d to %d", since(s.TimeMs), prev.Serial, cur.Serial)
		case cur.Serial == prev.Serial && withoutFlash(cur) != withoutFlash(prev):
			t.Fatalf("+%.1f s: content changed without a serial: %+v after %+v", since(s.TimeMs), cur, prev)
		case prev.Final && (withoutFlash(cur) != withoutFlash(prev) || !sameFlash):
			t.Fatalf("+%.1f s: a final detection changed: %+v", since(s.TimeMs), cur)
		case cur.Flash != nil && prev.Flash != nil && !reflect.DeepEqual(cur.Flash.Areas, prev.Flash.Areas) && cur.Flash.Serial != prev.Flash.Serial+1:
			t.Fatalf("+%.1f s: the intensity flash changed from serial %d to %d", since(s.TimeMs), prev.Flash.Serial, cur.Flash.Serial)
		case cur.Flash != nil && prev.Flash != nil && reflect.DeepEqual(cur.Flash.Areas, prev.Flash.Areas) && cur.Flash.Serial != prev.Flash.Serial:
			t.Fatalf("+%.1f s: the intensity flash serial moved without a change", since(s.TimeMs))
		}
		if cur.Final && finalAt == 0 {
			finalAt = s.TimeMs
		}
		worstKm = max(worstKm, epicentralKm(ev, cur))
		if km := epicentralKm(ev, cur); km > 30 {
			t.Errorf("+%.1f s serial %d: epicentre %.2f %.2f is %.0f km off", since(s.TimeMs), cur.Serial, cur.Lat, cur.Lon, km)
		}
		if s.TimeMs >= originMs+20_000 && math.Abs(cur.Mag-ev.Mag) > 1 {
			t.Errorf("+%.1f s serial %d: magnitude %.1f, want %.1f ± 1", since(s.TimeMs), cur.Serial, cur.Mag, ev.Mag)
		}
		var boxMax uint32
		var strongest Level
		for _, b := range s.Boxes {
			boxMax = max(boxMax, b.Level)
			if b.Level > strongest.Level {
				strongest = b
			}
		}
		if cur.MaxLevel < boxMax {
			t.Errorf("+%.1f s: max level %d below a box at %d", since(s.TimeMs), cur.MaxLevel, boxMax)
		}
		// While the strong shaking lasts, it is strongest near Hualien
		// (later the far stations still trigger, weakly).
		if s.TimeMs <= originMs+60_000 && !hualienNeighbourhood[strongest.ID] {
			t.Errorf("+%.1f s: the strongest box is %d, far from Hualien", since(s.TimeMs), strongest.ID)
		}
		prev = cur
	}
	t.Logf("final at +%.1f s: %+v; epicentre at most %.1f km off", since(finalAt), prev, worstKm)
	if finalAt == 0 || goneAt == 0 {
		t.Fatalf("final at %d, gone at %d: the detection never ended", finalAt, goneAt)
	}
	if goneAt-finalAt != detect.DefaultLinger.Milliseconds() {
		t.Errorf("final for %d ms, want %v", goneAt-finalAt, detect.DefaultLinger)
	}
	var triggered int
	var maxLevel uint32
	for id, p := range peak {
		if slices.ContainsFunc(r.frames, func(sf stationFrame) bool { return sf.id == id && sf.f.Intensity >= 1.5 }) {
			triggered++
			maxLevel = max(maxLevel, p)
		}
	}
	if prev.Stations != triggered || prev.MaxLevel != maxLevel {
		t.Errorf("final: %d stations at level %d; the stations: %d triggered, highest level %d", prev.Stations, prev.MaxLevel, triggered, maxLevel)
	}
	if math.Abs(prev.Mag-ev.Mag) > 1 {
		t.Errorf("final magnitude %.1f, want %.1f ± 1", prev.Mag, ev.Mag)
	}
	// The intensity flash lists the townships of the triggered stations,
	// each at the highest level one of them reached.
	wantAreas := map[uint32]uint32{}
	for id, p := range peak {
		if code := r.places[id].Code; code != 0 && p >= 1 && slices.ContainsFunc(r.frames, func(sf stationFrame) bool { return sf.id == id && sf.f.Intensity >= 1.5 }) {
			wantAreas[code] = max(wantAreas[code], p)
		}
	}
	gotAreas := map[uint32]uint32{}
	if prev.Flash != nil {
		for _, a := range prev.Flash.Areas {
			gotAreas[a.Code] = a.Level
		}
	}
	if !maps.Equal(gotAreas, wantAreas) {
		t.Errorf("intensity flash %v, want %v", gotAreas, wantAreas)
	}
	if !strings.HasPrefix(prev.Loc, "花蓮縣") {
		t.Errorf("location %q, want a place in 花蓮縣", prev.Loc)
	}
	// Long-period ground motion: an M7.4 at 10 km reaches class 2 or more
	// near the epicentre (Sva well above 15 cm/s).
	var lpTop uint32
	if prev.Flash != nil {
		for _, l := range prev.Flash.LPGM {
			lpTop = max(lpTop, l.Level)
		}
	}
	t.Logf("flash: %d townships (serial %d), %d stations with long-period class, highest %d",
		len(gotAreas), prev.Flash.Serial, len(prev.Flash.LPGM), lpTop)
	if lpTop < 2 {
		t.Errorf("highest long-period class %d, want at least 2", lpTop)
	}
	if off := prev.OriginMs - originMs; off < -3000 || off > 3000 {
		t.Errorf("origin time %+d ms off", off)
	}
}

func epicentralKm(ev synth.Event, d detect.Detection) float64 {
	return ev.EpicentralKm(synth.Position{Lat: d.Lat, Lon: d.Lon})
}

// TestSmallEvent: the M4.5 Yilan scenario gives at most one detection, and
// then a small one near Yilan.
func TestSmallEvent(t *testing.T) {
	t.Parallel()
	r, ev := scenario(t, "yilan-m4", 110)
	var last detect.Detection
	for _, s := range r.replay(r.engine()) {
		for _, d := range s.Detections {
			if last.ID != "" && d.ID != last.ID {
				t.Fatalf("two detections: %s and %s", last.ID, d.ID)
			}
			last = d
		}
	}
	t.Logf("last: %+v", last)
	if last.ID == "" {
		return // none is acceptable for a small event
	}
	if last.MaxLevel > 4 || last.Mag > 5.5 || last.Mag < 3.5 {
		t.Errorf("not a small detection: %+v", last)
	}
	if km := epicentralKm(ev, last); km > 30 {
		t.Errorf("epicentre %.0f km off", km)
	}
}

// TestQuietNetworkNoFalseDetection: ten minutes (two with -short) of
// background noise on every station, plus local disturbances — two a
// minute somewhere in the network, each felt by one station only and
// triggering it for a minute — make no detection. (Three disturbances
// within 10 s and 60 km of each other would: TestLocalDisturbances.)
func TestQuietNetworkNoFalseDetection(t *testing.T) {
	t.Parallel()
	minutes := 10
	if testing.Short() {
		minutes = 2
	}
	stations := simnet.Grid(0.1, 1)
	rnd := rand.New(rand.NewPCG(11, 11))
	var dist []simnet.Disturbance
	for range 2 * minutes {
		dist = append(dist, simnet.Disturbance{
			Station: rnd.IntN(len(stations)),
			At:      scenarioOrigin.Add(time.Duration(5+rnd.IntN(60*minutes-10)) * time.Second),
			Mag:     3.5 + rnd.Float64()/2,
		})
	}
	r := newRecording(stations, simnet.Options{Start: scenarioOrigin, Duration: time.Duration(minutes) * time.Minute, Disturbances: dist, Seed: 2})
	alerted := 0
	for _, s := range r.replay(r.engine()) {
		if len(s.Detections) > 0 {
			t.Fatalf("+%d s: false detection %+v", (s.TimeMs-scenarioOrigin.UnixMilli())/1000, s.Detections)
		}
		for _, v := range s.Stations {
			if v.Alert {
				alerted++
			}
		}
	}
	if alerted == 0 {
		t.Fatal("the disturbances triggered no station: the test tests nothing")
	}
	t.Logf("%d station-ticks triggered, no detection", alerted)
}

// TestLocalDisturbances: three neighbouring stations shaken within a few
// seconds make a detection; two do not.
func TestLocalDisturbances(t *testing.T) {
	t.Parallel()
	all := simnet.Grid(0.1, 1)
	// A station and its nearest neighbours, by distance.
	centre := all[150]
	near := slices.Clone(all)
	slices.SortFunc(near, func(a, b simnet.Station) int {
		return cmp.Compare(math.Hypot(a.Lat-centre.Lat, a.Lon-centre.Lon), math.Hypot(b.Lat-centre.Lat, b.Lon-centre.Lon))
	})
	stations := near[:20]
	for _, n := range []int{2, 3} {
		var dist []simnet.Disturbance
		for i := range n {
			dist = append(dist, simnet.Disturbance{Station: i, At: scenarioOrigin.Add(time.Duration(5+2*i) * time.Second), Mag: 3.8})
		}
		r := newRecording(stations, simnet.Options{Start: scenarioOrigin, Duration: 30 * time.Second, Disturbances: dist, Seed: 3})
		var got []detect.Detection
		for _, s := range r.replay(r.engine()) {
			got = append(got, s.Detections...)
		}
		if n < detect.DefaultMinStations && len(got) > 0 {
			t.Errorf("%d stations: detection %+v", n, got[0])
		}
		if n >= detect.DefaultMinStations && (len(got) == 0 || got[len(got)-1].Stations != n) {
			t.Errorf("%d stations: detections %+v", n, got)
		}
	}
}

// TestArrivalOrderIndependent: two engines fed the Hualien recording, one
// in order and one with every tick's frames shuffled, resends of frames up
// to 10 s old mixed in, and some frames early (a station clock a little
// ahead), produce identical snapshots — stations, boxes, areas and
// detections with their IDs and serials — tick by tick.
func TestArrivalOrderIndependent(t *testing.T) {
	t.Parallel()
	r, _ := scenario(t, "hualien", 210)
	want := r.replay(r.engine())

	rnd := rand.New(rand.NewPCG(5, 5))
	var early, sent []stationFrame
	got := r.deliver(r.engine(), func(tick int64, due []stationFrame) []stationFrame {
		batch := early
		early = nil
		for _, sf := range due {
			if rnd.IntN(10) == 0 {
				early = append(early, sf) // a frame for this tick arrived before the previous one was computed
				continue
			}
			batch = append(batch, sf)
		}
		// Early frames of the next tick (held back and delivered with this
		// tick: they end after it, so it must ignore them).
		batch = append(batch, early...)
		early = nil
		for range len(due) / 20 {
			if len(sent) > 0 {
				batch = append(batch, sent[rnd.IntN(len(sent))]) // resends
			}
		}
		rnd.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		sent = append(sent, due...)
		if cut := len(sent) - 20*len(due); cut > 0 {
			sent = sent[cut:]
		}
		return batch
	})
	compare(t, want, got, 0)
}

func compare(t *testing.T, want, got []Snapshot, from int64) {
	t.Helper()
	seen := 0
	for i := range want {
		if want[i].TimeMs < from {
			continue
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("tick %d differs:\n got  %+v\n want %+v", want[i].TimeMs, got[i].Detections, want[i].Detections)
		}
		if len(want[i].Detections) > 0 {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no detection compared")
	}
}

// TestLateFramesReplayed: frames arriving after their tick was computed (up
// to 2 s late: retransmissions, a WebSocket fallback) are out of the
// contract for the ticks they missed — there a station whose frame is
// missing shows its previous values marked with their age, and every
// station whose frame is in shows it, as the engine that had everything in
// time does — but the engine recomputes the detections from their tick on,
// so once they are in, the engine agrees with one that had everything in
// time: identical snapshots and detections from then on.
func TestLateFramesReplayed(t *testing.T) {
	t.Parallel()
	r, ev := scenario(t, "hualien", 210)
	want := r.replay(r.engine())

	lateUntil := ev.Origin.UnixMilli() + 30_000
	rnd := rand.New(rand.NewPCG(9, 9))
	held := map[int64][]stationFrame{}
	missing := map[int64]map[string]bool{} // tick → stations whose frame for it is held back
	e := r.engine()
	got := r.deliver(e, func(tick int64, due []stationFrame) []stationFrame {
		batch := held[tick]
		delete(held, tick)
		for _, sf := range due {
			if tick <= lateUntil && rnd.IntN(5) == 0 {
				at := tick + int64(1+rnd.IntN(4))*TickMs
				held[at] = append(held[at], sf)
				if missing[sf.f.WindowEndMs] == nil {
					missing[sf.f.WindowEndMs] = map[string]bool{}
				}
				missing[sf.f.WindowEndMs][sf.id] = true
				continue
			}
			batch = append(batch, sf)
		}
		return batch
	})
	if e.ReplayedTicks() == 0 {
		t.Fatal("no tick was recomputed")
	}
	carried := 0
	for i := range got {
		tick := got[i].TimeMs
		current := map[string]StationValue{}
		for _, v := range want[i].Stations {
			current[v.ID] = v
		}
		for _, v := range got[i].Stations {
			w := current[v.ID]
			if missing[tick][v.ID] {
				carried++
				if v.AgeMs == 0 {
					t.Fatalf("tick %d: %s's frame is late, yet its value %+v is shown as current", tick, v.ID, v)
				}
				continue
			}
			if v.AgeMs != 0 || v.PGA != w.PGA || v.PGV != w.PGV || v.Intensity != w.Intensity || v.Alert != w.Alert {
				t.Fatalf("tick %d: %s %+v, want its frame for the tick as %+v", tick, v.ID, v, w)
			}
		}
	}
	if carried == 0 {
		t.Fatal("no station value carried over")
	}
	compare(t, want, got, lateUntil+2500)
}

// TestSparseFleetOneDetection: the Hualien scenario on the network
// `shindo dev -stations 50` lays out — one station at each of the first
// 50 township seats of lib/township's sample, tens of km apart — is one
// detection, not one per cluster of stations the wavefront reaches.
func TestSparseFleetOneDetection(t *testing.T) {
	t.Parallel()
	ev, err := synth.Scenario("hualien")
	if err != nil {
		t.Fatal(err)
	}
	ev.Origin = scenarioOrigin
	var stations []simnet.Station
	for i, town := range township.Sample()[:50] {
		stations = append(stations, simnet.Station{ID: fmt.Sprintf("SIM%05d", i+1), Lat: town.Lat, Lon: town.Lon, Code: town.Code})
	}
	r := newRecording(stations, simnet.Options{Start: ev.Origin.Add(-10 * time.Second), Duration: 90 * time.Second,
		Events: []synth.Event{ev}, Seed: 1})
	ids := map[string]string{}
	for _, s := range r.replay(r.engine()) {
		for _, d := range s.Detections {
			ids[d.ID] = fmt.Sprintf("%d stations, origin %+.1f s, %.2f %.2f", d.Stations, float64(d.OriginMs-ev.Origin.UnixMilli())/1000, d.Lat, d.Lon)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("detections %v, want one", ids)
	}
}

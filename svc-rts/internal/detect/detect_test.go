package detect

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/pwave"
	"shindo.dev/seismo/synth"
)

const t0 = int64(1_800_000_000_000)

// origin is the reference point of the test layouts, near Hualien.
var origin = [2]float64{23.8, 121.5}

// at places a station x km east and y km north of origin.
func at(id string, x, y float64, intensity float32) Trigger {
	lat := origin[0] + y/kmPerDeg
	lon := origin[1] + x/(kmPerDeg*math.Cos(origin[0]*radPerDeg))
	return Trigger{Station: id, Lat: lat, Lon: lon, Box: 18, InBox: true, Intensity: intensity}
}

// run steps a fresh state through ticks t0, t0+500, … with the triggers
// returned for each tick, and returns the detections after every tick.
func run(cfg Config, ticks int, triggers func(tick int) []Trigger) [][]Detection {
	s := New(cfg)
	var out [][]Detection
	for k := range ticks {
		s.Step(t0+int64(k)*500, triggers(k), nil, nil)
		out = append(out, s.Detections())
	}
	return out
}

// from returns triggers that start at the given tick and last until
// stop (exclusive; 0 for never).
type timed struct {
	tr          Trigger
	start, stop int
}

func schedule(ts ...timed) func(int) []Trigger {
	return func(k int) []Trigger {
		var out []Trigger
		for _, s := range ts {
			if k >= s.start && (s.stop == 0 || k < s.stop) {
				out = append(out, s.tr)
			}
		}
		return out
	}
}

func TestNewDetection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sched   []timed
		wantAt  int    // first tick with a detection; -1 for none
		wantID  string // its ID
		wantNum int    // stations
	}{
		{
			name:   "three close stations within the window",
			sched:  []timed{{at("A", 0, 0, 3), 2, 0}, {at("B", 20, 0, 2.5), 4, 0}, {at("C", 0, 25, 2), 6, 0}},
			wantAt: 6, wantID: strconv.FormatInt(t0+1000, 10) + "-18", wantNum: 3,
		},
		{
			name:   "two are not enough",
			sched:  []timed{{at("A", 0, 0, 3), 2, 0}, {at("B", 20, 0, 2.5), 4, 0}},
			wantAt: -1,
		},
		{
			name:   "not pairwise within the radius",
			sched:  []timed{{at("A", 0, 0, 3), 2, 0}, {at("B", 50, 0, 2.5), 4, 0}, {at("C", -50, 0, 2), 6, 0}},
			wantAt: -1,
		},
		{
			name:   "onsets spread over more than the window",
			sched:  []timed{{at("A", 0, 0, 3), 0, 0}, {at("B", 20, 0, 2.5), 12, 0}, {at("C", 0, 20, 2), 21, 0}},
			wantAt: -1,
		},
		{
			name: "an early lone trigger does not name a later group",
			sched: []timed{
				{at("LONE", 0, 0, 3), 0, 0}, // triggered 30 s before the others
				{at("A", 10, 0, 3), 60, 0}, {at("B", 20, 0, 3), 61, 0}, {at("C", 10, 10, 3), 62, 0},
			},
			wantAt: 62, wantID: strconv.FormatInt(t0+60*500, 10) + "-18", wantNum: 3,
		},
		{
			name: "a station outside every box names it x",
			sched: []timed{
				{Trigger{Station: "SEA", Lat: 23.8, Lon: 122.6, Intensity: 3}, 0, 0},
				{Trigger{Station: "B", Lat: 23.8, Lon: 122.3, Intensity: 3}, 1, 0},
				{Trigger{Station: "C", Lat: 23.9, Lon: 122.45, Intensity: 3}, 1, 0},
			},
			wantAt: 1, wantID: strconv.FormatInt(t0, 10) + "-x", wantNum: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := run(Config{}, 80, schedule(tt.sched...))
			first := slices.IndexFunc(got, func(d []Detection) bool { return len(d) > 0 })
			if first != tt.wantAt {
				t.Fatalf("first detection at tick %d, want %d", first, tt.wantAt)
			}
			if first < 0 {
				return
			}
			d := got[first][0]
			if len(got[first]) != 1 || d.ID != tt.wantID || d.Serial != 1 || d.Stations != tt.wantNum || d.Final {
				t.Fatalf("detection %+v, want ID %s with %d stations at serial 1", got[first], tt.wantID, tt.wantNum)
			}
		})
	}
}

func TestGrowthSerialsAndEnd(t *testing.T) {
	t.Parallel()
	cfg := Config{EndAfter: 5 * time.Second, Linger: 10 * time.Second}
	got := run(cfg, 120, schedule(
		timed{at("A", 0, 0, 3), 0, 30},
		timed{at("B", 20, 0, 3), 1, 30},
		timed{at("C", 0, 20, 3), 2, 30},
		timed{at("D", 55, 0, 2), 10, 30},  // 35 km from B: joins
		timed{at("E", 110, 0, 2), 12, 30}, // 55 km from D: joins through it
		timed{at("F", 300, 0, 2), 12, 30}, // far from all: stays out
	))
	serialAt := func(k int) Detection {
		t.Helper()
		if len(got[k]) != 1 {
			t.Fatalf("tick %d: %d detections", k, len(got[k]))
		}
		return got[k][0]
	}
	d := serialAt(2)
	if d.Serial != 1 || d.Stations != 3 || d.UpdatedMs != t0+1000 {
		t.Fatalf("founded %+v", d)
	}
	if d := serialAt(9); d.Serial != 1 {
		t.Fatalf("serial changed while nothing did: %+v", d)
	}
	if d := serialAt(10); d.Serial != 2 || d.Stations != 4 || d.UpdatedMs != t0+5000 {
		t.Fatalf("after D joined: %+v", d)
	}
	if d := serialAt(12); d.Serial != 3 || d.Stations != 5 {
		t.Fatalf("after E joined: %+v", d)
	}
	// Everyone stops at tick 29 (index 30 is the first quiet tick); final
	// 5 s after the last trigger, at tick 29+10.
	if d := serialAt(38); d.Final || d.Serial != 3 {
		t.Fatalf("final too early: %+v", d)
	}
	final := serialAt(39)
	if !final.Final || final.Serial != 4 || final.UpdatedMs != t0+39*500 {
		t.Fatalf("not final 5 s after the last trigger: %+v", final)
	}
	for k := 40; k < 59; k++ {
		if d := serialAt(k); d != final {
			t.Fatalf("tick %d: final detection changed: %+v", k, d)
		}
	}
	if len(got[59]) != 0 {
		t.Fatalf("final detection listed beyond the linger time: %+v", got[59])
	}
}

func TestMaxLevelAndEstimatesFollowPeaks(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	trig := []Trigger{at("A", 0, 0, 2), at("B", 20, 0, 2), at("C", 0, 20, 2)}
	s.Step(t0, slices.Clone(trig), nil, nil)
	d := s.Detections()[0]
	if d.MaxLevel != 2 {
		t.Fatalf("max level %d, want 2", d.MaxLevel)
	}
	trig[1].Intensity = 4.6 // 5-
	s.Step(t0+500, slices.Clone(trig), nil, nil)
	if d := s.Detections()[0]; d.MaxLevel != 5 || d.Serial != 2 {
		t.Fatalf("after a rise: %+v", d)
	}
	// A fall does not lower the level: it is the highest seen.
	trig[1].Intensity = 2
	s.Step(t0+1000, slices.Clone(trig), nil, nil)
	if d := s.Detections()[0]; d.MaxLevel != 5 || d.Serial != 2 {
		t.Fatalf("after a fall: %+v", d)
	}
}

func TestFinishedPicksNeverFoundAgain(t *testing.T) {
	t.Parallel()
	cfg := Config{MaxDuration: 20 * time.Second, EndAfter: 5 * time.Second}
	// Three stations stuck triggered (a noisy site, say) for 60 s, then
	// quiet, then triggered again.
	got := run(cfg, 200, schedule(
		timed{at("A", 0, 0, 3), 0, 120}, timed{at("B", 10, 0, 3), 0, 120}, timed{at("C", 0, 10, 3), 0, 120},
		timed{at("A", 0, 0, 3), 150, 0}, timed{at("B", 10, 0, 3), 150, 0}, timed{at("C", 0, 10, 3), 150, 0},
	))
	ids := map[string]bool{}
	for k, ds := range got {
		for _, d := range ds {
			ids[d.ID] = true
			if k == 40 && !d.Final {
				t.Fatalf("not final after the maximum duration: %+v", d)
			}
		}
		if k > 41 && k < 150 && len(ds) > 0 && !ds[0].Final {
			t.Fatalf("tick %d: the same picks founded %+v", k, ds)
		}
	}
	want := map[string]bool{strconv.FormatInt(t0, 10) + "-18": true, strconv.FormatInt(t0+150*500, 10) + "-18": true}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("IDs %v, want %v", ids, want)
	}
}

func TestTwoEventsAtOnce(t *testing.T) {
	t.Parallel()
	got := run(Config{}, 10, schedule(
		timed{at("N1", 0, 200, 3), 1, 0}, timed{at("N2", 10, 200, 3), 1, 0}, timed{at("N3", 0, 210, 3), 1, 0},
		timed{at("S1", 0, 0, 3), 0, 0}, timed{at("S2", 10, 0, 3), 0, 0}, timed{at("S3", 0, 10, 3), 0, 0},
	))
	ds := got[9]
	if len(ds) != 2 || ds[0].FirstTriggerMs != t0 || ds[1].FirstTriggerMs != t0+500 || ds[0].Stations != 3 || ds[1].Stations != 3 {
		t.Fatalf("detections %+v", ds)
	}
}

// TestInputOrderIrrelevant: triggers given in any order, even duplicated,
// produce the same detections.
func TestInputOrderIrrelevant(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 3))
	var sched []timed
	for i := range 40 {
		sched = append(sched, timed{at("S"+strconv.Itoa(i), r.Float64()*150, r.Float64()*150, float32(1.5+r.Float64()*4)), r.IntN(30), 40 + r.IntN(40)})
	}
	base := schedule(sched...)
	want := run(Config{}, 150, base)
	shuffled := func(k int) []Trigger {
		tr := base(k)
		tr = append(tr, tr[:len(tr)/2]...)
		r.Shuffle(len(tr), func(i, j int) { tr[i], tr[j] = tr[j], tr[i] })
		return tr
	}
	if got := run(Config{}, 150, shuffled); !reflect.DeepEqual(got, want) {
		t.Fatal("detections depend on the order of the triggers")
	}
	if len(want[60]) == 0 {
		t.Fatal("the layout produced no detection to compare")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	trig := []Trigger{at("A", 0, 0, 2), at("B", 20, 0, 2), at("C", 0, 20, 2)}
	s.Step(t0, slices.Clone(trig), nil, nil)
	c := s.Clone()
	before := c.Detections()
	s.Step(t0+500, append(slices.Clone(trig), at("D", 10, 10, 5)), nil, nil)
	if !reflect.DeepEqual(c.Detections(), before) {
		t.Fatal("stepping the original changed the clone")
	}
	c.Step(t0+500, append(slices.Clone(trig), at("D", 10, 10, 5)), nil, nil)
	if !reflect.DeepEqual(c.Detections(), s.Detections()) {
		t.Fatal("clone and original diverged on the same input")
	}
}

// TestLocateRecoversModelEvent: stations that measured exactly what the
// model predicts, and triggered on its S arrivals, give back the
// epicentre, magnitude and origin time.
func TestLocateRecoversModelEvent(t *testing.T) {
	t.Parallel()
	m := synth.DefaultModel()
	ev := synth.Event{Lat: 23.77, Lon: 121.67, DepthKm: DefaultDepthKm, Mag: 6.3} // offshore Hualien
	var obs []observation
	for i, p := range [][2]float64{{23.99, 121.6}, {23.86, 121.5}, {23.74, 121.45}, {24.13, 121.64}, {23.5, 121.38}, {23.34, 121.31}, {24.3, 121.7}, {23.96, 121.2}} {
		pos := synth.Position{Lat: p[0], Lon: p[1]}
		r := ev.HypocentralKm(pos)
		onset := t0 + int64(math.Round((r/m.BetaKmS+triggerLatencyS)/0.5))*500
		obs = append(obs, observation{id: strconv.Itoa(i), lat: p[0], lon: p[1], onset: onset, peak: jma.Reported(PredictIntensity(ev.Mag, r))})
	}
	e := locate(obs, nil, DefaultDepthKm)
	if d := distKm(e.lat, e.lon, ev.Lat, ev.Lon); d > 5 {
		t.Errorf("epicentre %.3f %.3f is %.1f km off", e.lat, e.lon, d)
	}
	if math.Abs(e.mag-ev.Mag) > 0.15 {
		t.Errorf("magnitude %.1f, want %.1f", e.mag, ev.Mag)
	}
	if math.Abs(float64(e.originMs-t0)) > 600 {
		t.Errorf("origin %+d ms off", e.originMs-t0)
	}
}

// TestTableMatchesModel checks the generated table against the model it
// tabulates, between its grid points.
func TestTableMatchesModel(t *testing.T) {
	t.Parallel()
	m := synth.DefaultModel()
	for _, c := range []struct{ mag, km float64 }{{3.05, 12}, {4.5, 17}, {5.25, 33}, {6.43, 72}, {7.4, 140}, {7.9, 260}, {4.2, 400}} {
		want := m.PredictIntensity(c.mag, c.km, 25, jma.Weight)
		if got := PredictIntensity(c.mag, c.km); math.Abs(got-want) > 0.05 {
			t.Errorf("M%.2f at %g km: table %.3f, model %.3f", c.mag, c.km, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, c := range []Config{
		{MinStations: 1}, {RadiusKm: 0.5}, {Window: time.Millisecond}, {EndAfter: time.Millisecond},
		{MaxDuration: time.Second, EndAfter: 2 * time.Second}, {DepthKm: -1}, {Linger: -time.Second},
	} {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func BenchmarkLocate(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var obs []observation
	for i := range 2000 {
		obs = append(obs, observation{id: strconv.Itoa(i), lat: 22 + 3*r.Float64(), lon: 120 + 2*r.Float64(), onset: t0 + int64(r.IntN(60))*500, peak: 1.5 + 3*r.Float64()})
	}
	// The most picks of stations not triggered an estimate takes
	// (timing): they add to its timing fit only.
	var picked []observation
	for i := range maxPicked {
		picked = append(picked, observation{id: "P" + strconv.Itoa(i), lat: 22 + 3*r.Float64(), lon: 120 + 2*r.Float64(), pick: t0 + int64(r.IntN(30_000))})
	}
	b.Run("members", func(b *testing.B) {
		for b.Loop() {
			locate(obs, nil, DefaultDepthKm)
		}
	})
	b.Run("members+picked", func(b *testing.B) {
		for b.Loop() {
			locate(obs, picked, DefaultDepthKm)
		}
	})
}

// TestFlash: the intensity flash lists the members' townships at the
// highest level each reached, with a serial of its own that moves only when
// the areas change; long-period stations, triggered or not, are attributed
// to the open detection; a final detection's flash never changes.
func TestFlash(t *testing.T) {
	t.Parallel()
	with := func(tr Trigger, code uint32) Trigger { tr.Code = code; return tr }
	lp := func(id string, x, y float64, sva float32) LongPeriod {
		tr := at(id, x, y, 0)
		return LongPeriod{Station: tr.Station, Lat: tr.Lat, Lon: tr.Lon, SvaCms: sva}
	}
	s := New(Config{})
	trig := []Trigger{with(at("A", 0, 0, 2.6), 970), with(at("B", 20, 0, 3.6), 970), with(at("C", 0, 20, 4.6), 971)}
	s.Step(t0, slices.Clone(trig), nil, nil)
	d := s.Detections()
	if len(d) != 1 || d[0].Flash == nil {
		t.Fatalf("detections %+v", d)
	}
	f := d[0].Flash
	if f.Serial != 1 || !slices.Equal(f.Areas, []AreaLevel{{970, 4}, {971, 5}}) || len(f.LPGM) != 0 {
		t.Fatalf("first flash %+v", f)
	}
	serial := d[0].Serial

	// Same levels, a long-period station that is not triggered, and one
	// below class 1: the areas and the detection's serial stay; the flash
	// gains the station.
	s.Step(t0+500, slices.Clone(trig), []LongPeriod{lp("L", 5, 5, 16.2), lp("Q", 6, 6, 4.9)}, nil)
	d = s.Detections()
	if g := d[0].Flash; g.Serial != 1 || !slices.Equal(g.Areas, f.Areas) || !slices.Equal(g.LPGM, []StationLPGM{{"L", 2, 16.2}}) {
		t.Fatalf("second flash %+v", g)
	}
	if d[0].Serial != serial {
		t.Fatalf("serial moved from %d to %d without a change of the detection", serial, d[0].Serial)
	}
	// A level rises: the flash serial moves.
	trig[0].Intensity = 5.2 // 5+
	s.Step(t0+1000, slices.Clone(trig), []LongPeriod{lp("L", 5, 5, 12)}, nil)
	g := s.Detections()[0].Flash
	if g.Serial != 2 || !slices.Equal(g.Areas, []AreaLevel{{970, 6}, {971, 5}}) || g.LPGM[0].SvaCms != 16.2 {
		t.Fatalf("third flash %+v", g)
	}
	// Quiet until final; then nothing changes the flash.
	tick := t0 + 1000
	for s.Detections()[0].Final == false {
		tick += 500
		s.Step(tick, nil, nil, nil)
	}
	final := s.Detections()[0].Flash
	s.Step(tick+500, nil, []LongPeriod{lp("M", 1, 1, 120)}, nil)
	if got := s.Detections()[0].Flash; !reflect.DeepEqual(got, final) {
		t.Fatalf("a final flash changed: %+v", got)
	}
}

// TestSparseNetworkOneDetection: the stations near the epicentre found a
// detection; stations 100 km away, farther than RadiusKm from every one of
// them but pairwise close, trigger when its S wave arrives. Their onsets
// fit the detection's estimate, so they join it instead of founding a
// second detection of the same earthquake. The same cluster triggering a
// minute later, which no wave of that earthquake explains, is another
// detection.
func TestSparseNetworkOneDetection(t *testing.T) {
	t.Parallel()
	const vs = 3.5                      // km/s, the S wave that triggers them
	arrival := func(x, y float64) int { // tick of the S arrival from (0, 0), 10 km deep, origin at tick 0
		return int(math.Ceil(math.Hypot(math.Hypot(x, y), DefaultDepthKm) / vs * 2))
	}
	near := [][2]float64{{5, 0}, {-10, 15}, {20, -10}, {0, 25}}
	far := [][2]float64{{0, 100}, {30, 110}, {-25, 115}}
	for _, tc := range []struct {
		name  string
		delay int // ticks added to the far cluster's onsets
		want  int // detections
	}{{"on the S wave", 0, 1}, {"a minute later", 120, 2}} {
		var sched []timed
		for i, p := range near {
			sched = append(sched, timed{at("N"+strconv.Itoa(i), p[0], p[1], 3), arrival(p[0], p[1]), 0})
		}
		for i, p := range far {
			sched = append(sched, timed{at("F"+strconv.Itoa(i), p[0], p[1], 2), arrival(p[0], p[1]) + tc.delay, 0})
		}
		out := run(Config{}, 200, schedule(sched...))
		ids := map[string]int{}
		for _, tick := range out {
			for _, d := range tick {
				ids[d.ID] = max(ids[d.ID], d.Stations)
			}
		}
		if len(ids) != tc.want {
			t.Errorf("%s: detections %v, want %d", tc.name, ids, tc.want)
		}
		if tc.want == 1 {
			for id, n := range ids {
				if n != len(near)+len(far) {
					t.Errorf("%s: detection %s has %d stations, want all %d", tc.name, id, n, len(near)+len(far))
				}
			}
		}
	}
}

// TestTwoClustersShakenTogether: two clusters of a sparse network, west
// and north of the epicentre at about the same distance, each reach three
// triggered stations in the same tick — both groups are founded at once,
// before either detection has an estimate. They are one earthquake: the
// wave that triggered the first cluster reaches the second in time, so the
// second group joins the first detection. (A cluster 200 km away is not
// reached by that rule.)
func TestTwoClustersShakenTogether(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		north float64 // km of the second cluster
		want  int
	}{{"60 km apart", 55, 1}, {"200 km apart", 200, 2}} {
		sched := []timed{
			{at("A1", -50, 0, 2.5), 10, 0}, {at("A2", -55, 10, 2.5), 11, 0}, {at("A3", -45, -10, 2.5), 12, 0},
			{at("B1", 0, tc.north, 2.5), 11, 0}, {at("B2", 10, tc.north+5, 2.5), 12, 0}, {at("B3", -10, tc.north+3, 2.5), 12, 0},
		}
		ids := map[string]int{}
		for _, tick := range run(Config{}, 14, schedule(sched...)) {
			for _, d := range tick {
				ids[d.ID] = max(ids[d.ID], d.Stations)
			}
		}
		if len(ids) != tc.want {
			t.Errorf("%s: detections %v, want %d", tc.name, ids, tc.want)
		}
	}
}

// TestFarIslandsJoinALargeEarthquake: the stations of an island 330 km
// from a large earthquake (Kinmen from Hualien) trigger when its S wave
// arrives, a minute after the origin. The estimate's magnitude reaches
// them, so they join its detection; for a small earthquake, whose
// predicted intensity there is far below the alert threshold, the same
// triggers are something else and found their own.
func TestFarIslandsJoinALargeEarthquake(t *testing.T) {
	t.Parallel()
	const vs = 3.5
	arrival := func(x, y float64) int { // tick of the S arrival from (0, 0), origin at tick 0
		return int(math.Ceil(math.Hypot(math.Hypot(x, y), DefaultDepthKm) / vs * 2))
	}
	near := [][2]float64{{5, 0}, {-10, 15}, {20, -10}, {0, 25}, {-20, -15}, {25, 20}}
	island := [][2]float64{{-330, 30}, {-335, 25}, {-328, 22}}
	for _, tc := range []struct {
		name string
		mag  float64
		want int
	}{{"M7.4", 7.4, 1}, {"M4.5", 4.5, 2}} {
		var sched []timed
		for i, p := range near {
			d := math.Hypot(math.Hypot(p[0], p[1]), DefaultDepthKm)
			sched = append(sched, timed{at("N"+strconv.Itoa(i), p[0], p[1], float32(PredictIntensity(tc.mag, d))), arrival(p[0], p[1]), 0})
		}
		for i, p := range island {
			// As strong as a triggered station is, whatever the model says:
			// the small earthquake's case is a local disturbance there.
			sched = append(sched, timed{at("K"+strconv.Itoa(i), p[0], p[1], 2.2), arrival(p[0], p[1]), 0})
		}
		ids := map[string]int{}
		var mag float64
		for _, tick := range run(Config{}, arrival(-335, 25)+10, schedule(sched...)) {
			for _, d := range tick {
				ids[d.ID] = max(ids[d.ID], d.Stations)
				if strings.HasSuffix(d.ID, "-18") && d.Stations >= len(near) {
					mag = d.Mag
				}
			}
		}
		if len(ids) != tc.want {
			t.Errorf("%s (estimated M%.1f): detections %v, want %d", tc.name, mag, ids, tc.want)
		}
		if math.Abs(mag-tc.mag) > 0.5 {
			t.Errorf("%s: estimated M%.1f", tc.name, mag)
		}
	}
}

func TestReachGrowsWithMagnitude(t *testing.T) {
	t.Parallel()
	if r := reachKm(4, 0.5); r != explainMinKm {
		t.Errorf("M4 reaches %.0f km, want the minimum %d", r, explainMinKm)
	}
	r6, r74 := reachKm(6, 0.5), reachKm(7.4, 0.5)
	if !(r74 > r6 && r74 >= 500 && PredictIntensity(7.4, r74) >= 0.5) {
		t.Errorf("M6 reaches %.0f km, M7.4 %.0f km (%.2f there)", r6, r74, PredictIntensity(7.4, r74))
	}
}

// pLayout is six stations around origin that pick the P wave of an event
// under it (at t0+1 s, DefaultDepthKm deep) and trigger, at intensity 2,
// once their 3 s of P are measured; withTauC of them give a τc of an M7
// (Wu et al. 2007), the others none.
func pLayout(withTauC int) func(int) []Trigger {
	tauc := float32(math.Pow(10, 0.296*7-1.716))
	originMs := t0 + 1000
	var ts []timed
	for i, xy := range [][2]float64{{5, 0}, {-8, 3}, {0, -10}, {12, 9}, {-4, -14}, {15, -5}} {
		r := math.Hypot(math.Hypot(xy[0], xy[1]), DefaultDepthKm)
		tr := at("P"+strconv.Itoa(i), xy[0], xy[1], 2)
		tr.P = PWave{OnsetMs: originMs + int64(r/velocities[0]*1000), WindowMs: pwave.WindowMs, PdCm: 1}
		if i < withTauC {
			tr.P.TauCS = tauc
		}
		start := int((tr.P.OnsetMs+pwave.WindowMs-t0)/500) + 1
		ts = append(ts, timed{tr, start, start + 20})
	}
	return schedule(ts...)
}

// TestPMagnitude: while a detection is open its magnitude is at least the
// median τc magnitude of its P picks, when at least three and half of them
// have a τc; the final magnitude is the intensities' alone, and so is the
// magnitude of a detection whose P picks mostly have none.
func TestPMagnitude(t *testing.T) {
	t.Parallel()
	maxOpen := func(out [][]Detection) (open, final float64) {
		for _, ds := range out {
			for _, d := range ds {
				if d.Final {
					final = d.Mag
				} else {
					open = max(open, d.Mag)
				}
			}
		}
		return open, final
	}
	intOpen, intFinal := maxOpen(run(Config{}, 80, pLayout(0)))
	if intOpen >= 6 || intFinal == 0 {
		t.Fatalf("setup: intensity 2 gives M%.1f open, M%.1f final", intOpen, intFinal)
	}
	open, final := maxOpen(run(Config{}, 80, pLayout(6)))
	if math.Abs(open-7) > 0.05 {
		t.Errorf("open magnitude %.1f with six τc of an M7, want 7.0", open)
	}
	if final != intFinal {
		t.Errorf("final magnitude %.1f, want the intensities' %.1f", final, intFinal)
	}
	if open, _ := maxOpen(run(Config{}, 80, pLayout(2))); open != intOpen {
		t.Errorf("two τc of six P picks: open magnitude %.1f, want the intensities' %.1f", open, intOpen)
	}
	if open, _ := maxOpen(run(Config{}, 80, pLayout(3))); math.Abs(open-7) > 0.05 {
		t.Errorf("three τc of six P picks: open magnitude %.1f, want 7.0", open)
	}
}

// TestLocateWithPicks: stations that trigger on S, seen at the tick after,
// but picked the P wave themselves give the origin time to a tenth of a
// second, where the ticks alone leave it a quarter of a second late or so.
func TestLocateWithPicks(t *testing.T) {
	t.Parallel()
	m := synth.DefaultModel()
	ev := synth.Event{Lat: 23.77, Lon: 121.67, DepthKm: DefaultDepthKm, Mag: 6.3}
	var obs []observation
	for i, p := range [][2]float64{{23.99, 121.6}, {23.86, 121.5}, {23.74, 121.45}, {24.13, 121.64}, {23.5, 121.38}, {23.34, 121.31}, {24.3, 121.7}, {23.96, 121.2}} {
		pos := synth.Position{Lat: p[0], Lon: p[1]}
		r := ev.HypocentralKm(pos)
		onset := t0 + int64(math.Ceil((0.3+r/m.BetaKmS+triggerLatencyS)/0.5))*500 // the tick after
		pick := t0 + 300 + int64(math.Round(r/m.AlphaKmS*1000))
		obs = append(obs, observation{id: strconv.Itoa(i), lat: p[0], lon: p[1], onset: onset, pick: pick, peak: jma.Reported(PredictIntensity(ev.Mag, r))})
	}
	e := locate(obs, nil, DefaultDepthKm)
	if d := distKm(e.lat, e.lon, ev.Lat, ev.Lon); d > 2 {
		t.Errorf("epicentre %.3f %.3f is %.1f km off", e.lat, e.lon, d)
	}
	if d := e.originMs - (t0 + 300); math.Abs(float64(d)) > 100 {
		t.Errorf("origin %+d ms off", d)
	}
}

// TestTakeP: a member keeps its first pick and lets its window grow; a
// later pick does not replace it, and the estimate is made again only when
// the pick arrives and when its window completes.
func TestTakeP(t *testing.T) {
	t.Parallel()
	var m member
	steps := []struct {
		w     PWave
		stale bool
		keep  PWave
	}{
		{PWave{}, false, PWave{}},
		{PWave{OnsetMs: 100, WindowMs: 500}, true, PWave{OnsetMs: 100, WindowMs: 500}},
		{PWave{OnsetMs: 100, WindowMs: 1000, TauCS: 0.5}, false, PWave{OnsetMs: 100, WindowMs: 1000, TauCS: 0.5}},
		{PWave{OnsetMs: 100, WindowMs: 500}, false, PWave{OnsetMs: 100, WindowMs: 1000, TauCS: 0.5}},
		{PWave{OnsetMs: 100, WindowMs: 3000, TauCS: 1}, true, PWave{OnsetMs: 100, WindowMs: 3000, TauCS: 1}},
		{PWave{OnsetMs: 9000, WindowMs: 3000, TauCS: 2}, false, PWave{OnsetMs: 100, WindowMs: 3000, TauCS: 1}},
	}
	for i, s := range steps {
		if got := m.takeP(s.w); got != s.stale || m.p != s.keep {
			t.Errorf("step %d: takeP(%+v) = %t, kept %+v; want %t, %+v", i, s.w, got, m.p, s.stale, s.keep)
		}
	}
}

// TestPickedStationsPlaceAnEventSeenFromOneSide: an event at sea whose
// three triggered stations stand on the coast west of it, their
// intensities scattered as real stations' are, is misplaced by them alone
// (their picks leave distance and origin time to trade off, and the
// amplitudes decide); the P picks of stations further inland, not
// triggered yet, place it. A pick the P wave cannot have made (seconds
// before it could reach the station) is not taken, and a member's own
// pick is not counted twice.
func TestPickedStationsPlaceAnEventSeenFromOneSide(t *testing.T) {
	t.Parallel()
	m := synth.DefaultModel()
	epi := at("", 30, 0, 0) // 30 km east of the coast
	ev := synth.Event{Lat: epi.Lat, Lon: epi.Lon, DepthKm: DefaultDepthKm, Mag: 6}
	originMs := t0 - 6000
	arrival := func(tr Trigger) int64 {
		r := ev.HypocentralKm(synth.Position{Lat: tr.Lat, Lon: tr.Lon})
		return originMs + int64(math.Round(r/m.AlphaKmS*1000))
	}
	var trig []Trigger
	for _, s := range []struct {
		id      string
		x, y    float64
		scatter float64
	}{{"A", 0, 0, 0.6}, {"B", 0, 15, -0.5}, {"C", -5, -12, 0.4}} {
		tr := at(s.id, s.x, s.y, 0)
		r := ev.HypocentralKm(synth.Position{Lat: tr.Lat, Lon: tr.Lon})
		tr.Intensity = float32(PredictIntensity(ev.Mag, r) + s.scatter)
		tr.P = PWave{OnsetMs: arrival(tr), WindowMs: 1000}
		trig = append(trig, tr)
	}
	var inland []Picked
	for i, p := range [][2]float64{{-15, 5}, {-10, 25}, {-20, -20}, {5, 35}, {5, -30}, {-25, 10}} {
		tr := at("P"+strconv.Itoa(i), p[0], p[1], 0)
		inland = append(inland, Picked{Station: tr.Station, Lat: tr.Lat, Lon: tr.Lon, OnsetMs: arrival(tr)})
	}
	noise := at("N", -10, -5, 0)
	early := Picked{Station: "N", Lat: noise.Lat, Lon: noise.Lon, OnsetMs: arrival(noise) - 8000}
	member := Picked{Station: "A", Lat: trig[0].Lat, Lon: trig[0].Lon, OnsetMs: trig[0].P.OnsetMs - 3000}

	detection := func(picked []Picked) Detection {
		s := New(Config{})
		s.Step(t0, slices.Clone(trig), nil, picked)
		ds := s.Detections()
		if len(ds) != 1 {
			t.Fatalf("%d detections, want 1", len(ds))
		}
		return ds[0]
	}
	alone := detection(nil)
	if km := distKm(alone.Lat, alone.Lon, ev.Lat, ev.Lon); km <= 10 {
		t.Fatalf("the members alone place it %.1f km off: the trade-off this test is about is gone", km)
	}
	picked := detection(inland)
	t.Logf("members alone: %.1f km off; with the inland picks: %.1f km", distKm(alone.Lat, alone.Lon, ev.Lat, ev.Lon), distKm(picked.Lat, picked.Lon, ev.Lat, ev.Lon))
	if km := distKm(picked.Lat, picked.Lon, ev.Lat, ev.Lon); km > 5 {
		t.Errorf("with the inland picks the epicentre is %.1f km off, want ≤ 5 (members alone: %.1f km)",
			km, distKm(alone.Lat, alone.Lon, ev.Lat, ev.Lon))
	}
	if d := picked.OriginMs - originMs; d < -500 || d > 500 {
		t.Errorf("origin %+d ms off", d)
	}
	if got := detection([]Picked{early, member}); got != alone {
		t.Errorf("an impossible pick and a member's moved the estimate: %+v, members alone %+v", got, alone)
	}

	// The picks arrive a tick after the founding: the estimate is made
	// again with them.
	s := New(Config{})
	s.Step(t0, slices.Clone(trig), nil, nil)
	s.Step(t0+500, slices.Clone(trig), nil, inland)
	if got := s.Detections()[0]; got.Lat != picked.Lat || got.Lon != picked.Lon || got.Serial == 0 {
		t.Errorf("after the picks came: %+v, want the epicentre %.2f %.2f at a new serial", got, picked.Lat, picked.Lon)
	}
}

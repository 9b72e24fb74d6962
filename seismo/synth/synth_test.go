package synth

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"shindo.dev/seismo/jma"
)

var testOrigin = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// record generates everything a station records of ev: from one second
// before the origin to well after the S window.
func record(ev Event, pos Position, cfg Config) (ns, ew, ud []float64) {
	g := New(pos, ev.Origin.Add(-time.Second), cfg)
	g.AddEvent(ev)
	hyp := ev.HypocentralKm(pos)
	m := DefaultModel()
	n := int((hyp/m.BetaKmS + windowLen*m.DurationS(ev.Mag, hyp) + 10) * RateHz)
	ns, ew, ud = make([]float64, n), make([]float64, n), make([]float64, n)
	g.Read(ns, ew, ud)
	return ns, ew, ud
}

// north places a station epiKm north of (23.5N, 121E).
func north(epiKm float64) Position {
	return Position{Lat: 23.5 + epiKm/(earthRadiusKm*math.Pi/180), Lon: 121}
}

func peak(x []float64) float64 {
	var p float64
	for _, v := range x {
		p = math.Max(p, math.Abs(v))
	}
	return p
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianPGA is the median over seeds of the horizontal components' peaks.
func medianPGA(ev Event, pos Position, seeds int) float64 {
	var pgas []float64
	for seed := range uint64(seeds) {
		ns, ew, _ := record(ev, pos, Config{Seed: seed, NoiseGal: -1})
		pgas = append(pgas, peak(ns), peak(ew))
	}
	return median(pgas)
}

// TestPGAFollowsRandomVibrationTheory holds the time series to the model
// they are built on: the median simulated PGA must match the model's RVT
// prediction well inside the scatter of any ground-motion relation (σ of
// ln PGA is about 0.5–0.7).
func TestPGAFollowsRandomVibrationTheory(t *testing.T) {
	t.Parallel()
	m := DefaultModel()
	for _, mag := range []float64{4.5, 5.5, 6.5, 7.5} {
		for _, epi := range []float64{5, 30, 80, 150} {
			ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: mag, Origin: testOrigin}
			pos := north(epi)
			sim := medianPGA(ev, pos, 8)
			rvt := m.PredictPGA(mag, ev.HypocentralKm(pos), RateHz/2)
			t.Logf("M%.1f at %3g km: median PGA %7.2f gal, RVT %7.2f (ln ratio %+.2f)", mag, epi, sim, rvt, math.Log(sim/rvt))
			if d := math.Log(sim / rvt); math.Abs(d) > 0.25 {
				t.Errorf("M%.1f at %g km: median PGA %.2f gal, RVT %.2f gal (ln ratio %+.2f)", mag, epi, sim, rvt, d)
			}
		}
	}
}

// bjf97 is the PGA (gal) of Boore, Joyner & Fumal (1997), random horizontal
// component, mechanism unspecified, at VS30 = 620 m/s (the model's generic
// rock). σ(ln PGA) = 0.520.
func bjf97(mag, rjb float64) float64 {
	const b1, b2, b3, b5, bv, va, h = -0.242, 0.527, 0.0, -0.778, -0.371, 1396.0, 5.57
	r := math.Sqrt(rjb*rjb + h*h)
	lnY := b1 + b2*(mag-6) + b3*(mag-6)*(mag-6) + b5*math.Log(r) + bv*math.Log(620/va)
	return math.Exp(lnY) * 980.665
}

// TestPGAWithinEmpiricalScatter compares with an empirical relation from
// the same region as the model's parameters, where both apply: M 6–7.5
// within 40 km. (Farther out this western-North-America model decays faster
// than BJF97, by about one σ at 70 km; see BENCHMARKS.md.)
func TestPGAWithinEmpiricalScatter(t *testing.T) {
	t.Parallel()
	const sigma = 0.520
	for _, mag := range []float64{6, 6.5, 7, 7.5} {
		for _, rjb := range []float64{5, 10, 20, 40} {
			ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: mag, Origin: testOrigin}
			sim := medianPGA(ev, north(rjb), 8)
			emp := bjf97(mag, rjb)
			t.Logf("M%.1f at Rjb %2g km: median PGA %6.1f gal, BJF97 %6.1f (ln ratio %+.2f)", mag, rjb, sim, emp, math.Log(sim/emp))
			if d := math.Log(sim / emp); math.Abs(d) > sigma {
				t.Errorf("M%.1f at Rjb %g km: median PGA %.1f gal, BJF97 %.1f gal (ln ratio %+.2f, σ %.2f)", mag, rjb, sim, emp, d, sigma)
			}
		}
	}
}

// TestIntensityFollowsPrediction checks the JMA intensity of the simulated
// three-component motion against the model's own prediction.
func TestIntensityFollowsPrediction(t *testing.T) {
	t.Parallel()
	m := DefaultModel()
	for _, mag := range []float64{4.5, 6, 7} {
		for _, epi := range []float64{5, 40, 120} {
			ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: mag, Origin: testOrigin}
			pos := north(epi)
			var is []float64
			for seed := range uint64(8) {
				ns, ew, ud := record(ev, pos, Config{Seed: seed, NoiseGal: -1})
				res, err := jma.Instrumental(RateHz, ns, ew, ud)
				if err != nil {
					t.Fatal(err)
				}
				is = append(is, res.I)
			}
			sim := median(is)
			want := m.PredictIntensity(mag, ev.HypocentralKm(pos), RateHz/2, jma.Weight)
			t.Logf("M%.1f at %3g km: median intensity %.2f, predicted %.2f", mag, epi, sim, want)
			if math.Abs(sim-want) > 0.25 {
				t.Errorf("M%.1f at %g km: median intensity %.2f, predicted %.2f", mag, epi, sim, want)
			}
		}
	}
}

// taiwan is a coarse outline of the island (lon, lat), enough to lay out a
// station grid.
var taiwan = [][2]float64{
	{121.54, 25.30}, {121.75, 25.15}, {122.00, 25.01}, {121.85, 24.75}, {121.87, 24.60},
	{121.80, 24.45}, {121.76, 24.30}, {121.69, 24.20}, {121.62, 24.00}, {121.50, 23.50},
	{121.40, 23.00}, {121.15, 22.75}, {120.90, 22.35}, {120.88, 22.10}, {120.85, 21.90},
	{120.70, 21.95}, {120.58, 22.35}, {120.27, 22.60}, {120.12, 23.00}, {120.12, 23.45},
	{120.15, 23.70}, {120.33, 24.00}, {120.50, 24.28}, {120.70, 24.55}, {120.92, 24.82},
	{121.15, 25.05}, {121.40, 25.18},
}

func onLand(p Position) bool {
	in := false
	for i, j := 0, len(taiwan)-1; i < len(taiwan); j, i = i, i+1 {
		xi, yi, xj, yj := taiwan[i][0], taiwan[i][1], taiwan[j][0], taiwan[j][1]
		if (yi > p.Lat) != (yj > p.Lat) && p.Lon < (xj-xi)*(p.Lat-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// TestHualienScenarioMap lays stations on a 0.1° grid over Taiwan, runs the
// built-in Hualien scenario with background noise, and checks that the
// intensity map looks like a real one: strongest by the epicentre, median
// intensity falling with distance, and JMA 5- or more next to an M7 event.
func TestHualienScenarioMap(t *testing.T) {
	t.Parallel()
	ev, err := Scenario("hualien")
	if err != nil {
		t.Fatal(err)
	}
	type site struct {
		epi float64
		i   float64
	}
	var sites []site
	for lat := 21.9; lat < 25.35; lat += 0.1 {
		for lon := 120.0; lon < 122.05; lon += 0.1 {
			p := Position{Lat: lat, Lon: lon}
			if !onLand(p) {
				continue
			}
			ns, ew, ud := record(ev, p, Config{Seed: StationSeed(1, p.String())})
			res, err := jma.Instrumental(RateHz, ns, ew, ud)
			if err != nil {
				t.Fatal(err)
			}
			sites = append(sites, site{ev.EpicentralKm(p), res.I})
		}
	}
	if len(sites) < 200 {
		t.Fatalf("only %d grid stations on land", len(sites))
	}
	bins := []float64{0, 25, 50, 100, 150, 250}
	var medians []float64
	for b := 0; b+1 < len(bins); b++ {
		var is []float64
		for _, s := range sites {
			if s.epi >= bins[b] && s.epi < bins[b+1] {
				is = append(is, s.i)
			}
		}
		if len(is) == 0 {
			t.Fatalf("no stations %g–%g km from the epicentre", bins[b], bins[b+1])
		}
		medians = append(medians, median(is))
		t.Logf("%3.0f–%3.0f km: %3d stations, median intensity %.2f", bins[b], bins[b+1], len(is), median(is))
	}
	for b := 1; b < len(medians); b++ {
		if medians[b] >= medians[b-1] {
			t.Errorf("median intensity does not fall with distance: %.2f at %g–%g km after %.2f", medians[b], bins[b], bins[b+1], medians[b-1])
		}
	}
	strongest := slices.MaxFunc(sites, func(a, b site) int { return cmpFloat(a.i, b.i) })
	if strongest.epi > 40 {
		t.Errorf("strongest shaking %.2f is %.0f km from the epicentre", strongest.i, strongest.epi)
	}
	for _, s := range sites {
		if s.epi < 25 && jma.ClassOf(s.i) < jma.Class5Lower {
			t.Errorf("station %.0f km from an M%.1f epicentre: intensity %.2f (class %s), want 5- or more", s.epi, ev.Mag, s.i, jma.ClassOf(s.i))
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestArrivalTimes(t *testing.T) {
	t.Parallel()
	m := DefaultModel()
	ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: 6, Origin: testOrigin}
	for _, epi := range []float64{20, 60, 150} {
		pos := north(epi)
		ns, ew, ud := record(ev, pos, Config{Seed: 7, NoiseGal: -1})
		hyp := ev.HypocentralKm(pos)
		// record starts one second before the origin.
		idx := func(sec float64) int { return int((sec + 1) * RateHz) }
		tP, tS := hyp/m.AlphaKmS, hyp/m.BetaKmS
		all := peak(ns) + peak(ew) + peak(ud)
		before := peak(ns[:idx(tP-0.25)]) + peak(ew[:idx(tP-0.25)]) + peak(ud[:idx(tP-0.25)])
		if before != 0 {
			t.Errorf("%g km: motion %.3g gal before the P arrival at %.2f s", epi, before, tP)
		}
		pUD := peak(ud[idx(tP):idx(tP+1)])
		if pUD < 1e-3*all {
			t.Errorf("%g km: no P wave on UD in the second after %.2f s", epi, tP)
		}
		pH := math.Max(peak(ns[idx(tP):idx(tS-0.5)]), peak(ew[idx(tP):idx(tS-0.5)]))
		sH := math.Max(peak(ns[idx(tS):]), peak(ew[idx(tS):]))
		if pH > 0.5*sH {
			t.Errorf("%g km: horizontal peak %.3g before S (%.2f s) vs %.3g after: S arrival not clear", epi, pH, tS, sH)
		}
		if pUD2 := peak(ud[idx(tP):idx(tS-0.5)]); pUD2 < pH {
			t.Errorf("%g km: P not mainly vertical: UD %.3g, horizontal %.3g", epi, pUD2, pH)
		}
	}
}

func TestDeterministicWhateverTheChunking(t *testing.T) {
	t.Parallel()
	ev, err := Scenario("hualien-m6")
	if err != nil {
		t.Fatal(err)
	}
	pos := Position{Lat: 23.98, Lon: 121.60}
	start := ev.Origin.Add(-3 * time.Second)
	const total = 50 * 40
	read := func(seed uint64, chunk int) []float64 {
		g := New(pos, start, Config{Seed: seed})
		g.AddEvent(ev)
		var out []float64
		ns, ew, ud := make([]float64, chunk), make([]float64, chunk), make([]float64, chunk)
		for len(out) < 3*total {
			n := g.Read(ns, ew, ud)
			for i := 0; i < n; i++ {
				out = append(out, ns[i], ew[i], ud[i])
			}
		}
		return out[:3*total]
	}
	ref := read(42, 25)
	for _, chunk := range []int{1, 7, 25, 1000} {
		if got := read(42, chunk); !slices.Equal(got, ref) {
			t.Errorf("chunks of %d differ from chunks of 25", chunk)
		}
	}
	if slices.Equal(read(43, 25), ref) {
		t.Error("seeds 42 and 43 give the same samples")
	}
	if peak(ref) < 50 {
		t.Errorf("peak %.1f gal 15 km from an M6.4: the event is missing", peak(ref))
	}
}

func TestGeneratorBookkeeping(t *testing.T) {
	t.Parallel()
	start := testOrigin
	g := New(Position{Lat: 25, Lon: 121.5}, start, Config{Seed: 1})
	// An event long gone by the time the generator starts is ignored.
	g.AddEvent(Event{Lat: 24, Lon: 121.5, DepthKm: 10, Mag: 6, Origin: start.Add(-time.Hour)})
	ns, ew, ud := make([]float64, 100), make([]float64, 50), make([]float64, 100)
	if n := g.Read(ns, ew, ud); n != 50 {
		t.Errorf("Read wrote %d, want the shortest slice's 50", n)
	}
	if got, want := g.Next(), start.Add(time.Second); !got.Equal(want) {
		t.Errorf("Next = %v, want %v", got, want)
	}
	if p := peak(ns[:50]); p > 1 {
		t.Errorf("peak %.2f gal: more than background noise", p)
	}
	if len(g.arrivals) != 0 {
		t.Errorf("%d arrivals kept after they ended", len(g.arrivals))
	}
	quiet := New(Position{}, start, Config{NoiseGal: -1})
	quiet.Read(ns, ns, ns)
	if peak(ns) != 0 {
		t.Error("NoiseGal < 0 still makes noise")
	}
}

func TestScenarios(t *testing.T) {
	t.Parallel()
	all := Scenarios()
	var damaging, felt bool
	for _, ev := range all {
		got, err := Scenario(ev.Name)
		if err != nil || got != ev {
			t.Errorf("Scenario(%q) = %+v, %v", ev.Name, got, err)
		}
		if ev.Mag >= 6 && ev.Lat > 23 && ev.Lat < 24.5 && ev.Lon > 121.3 {
			damaging = true
		}
		if ev.Mag < 5 {
			felt = true
		}
	}
	if !damaging || !felt {
		t.Errorf("want a damaging Hualien event and a small felt one, have %+v", all)
	}
	if _, err := Scenario("atlantis"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("unknown scenario: err = %v", err)
	}
	all[0].Mag = 0
	if ev, _ := Scenario(all[0].Name); ev.Mag == 0 {
		t.Error("Scenarios returned the package's own slice")
	}
}

func TestStationSeed(t *testing.T) {
	t.Parallel()
	seen := map[uint64]bool{}
	for _, id := range []string{"A", "B", "AB", "BA", ""} {
		s := StationSeed(9, id)
		if seen[s] {
			t.Errorf("StationSeed collision for %q", id)
		}
		seen[s] = true
		if StationSeed(9, id) != s {
			t.Errorf("StationSeed(%q) not stable", id)
		}
	}
}

// TestTinyNearbyEvent: an event so small and close that its P window is
// under two samples renders (quietly) instead of failing.
func TestTinyNearbyEvent(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	ev := Event{Name: "tiny", Lat: 23.9, Lon: 121.6, DepthKm: 0.1, Mag: 1.0, Origin: start.Add(2 * time.Second)}
	g := New(Position{Lat: 23.9, Lon: 121.6}, start, Config{Seed: 1})
	g.AddEvent(ev)
	ns, ew, ud := make([]float64, 500), make([]float64, 500), make([]float64, 500)
	if n := g.Read(ns, ew, ud); n != 500 {
		t.Fatalf("read %d samples", n)
	}
}

package lpgm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"shindo.dev/seismo/internal/jmatest"
	"shindo.dev/seismo/resample"
)

// frameSamples is a station frame: 25 samples at 50 Hz, every 500 ms.
const frameSamples = 25

// runFrames streams two components through a tracker as a station does,
// taking the peak after every frame, and returns the largest frame peak.
func runFrames(tb testing.TB, rate float64, ns, ew []float64, cfg Config) (float64, *Tracker) {
	tb.Helper()
	tr, err := NewTracker(rate, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	var peak float64
	for i := range ns {
		tr.Add(ns[i], ew[i])
		if (i+1)%frameSamples == 0 {
			p := tr.TakePeak()
			if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
				tb.Fatalf("frame %d: peak %v", i/frameSamples, p)
			}
			peak = max(peak, p)
		}
	}
	return max(peak, tr.TakePeak()), tr
}

// station50 is a JMA record decimated to the station's 50 Hz, with its
// offline Sva at the native 100 Hz.
type station50 struct {
	lpgmRef
	offline Result
	ns, ew  []float64
}

func loadStations(tb testing.TB) []station50 {
	tb.Helper()
	var out []station50
	for _, ref := range lpgmRefs {
		rec := jmatest.Load(tb, ref.file)
		off, err := Station(rec.RateHz, rec.NS, rec.EW)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, station50{ref, off, resample.Halve(rec.NS), resample.Halve(rec.EW)})
	}
	return out
}

// TestTrackerOnJMARecords runs the four records of JMA.md §6, decimated to
// 50 Hz, through the tracker frame by frame with the default high-pass. The
// running maximum of the frame peaks is held to the record's offline Sva
// (100 Hz, whole-record mean removed) within tol, and the class exactly.
//
// The tolerances are measured (TestTrackerDriftTreatment prints the table):
// Q4149CF2 −1.1 %, Q4169D2004 −0.4 %, Q416EED018 +0.9 %, within 3 %.
// AA06EA01 (Yonago) is −7.4 %, and no causal tracker can do much better:
// its EW component shifts its baseline during the shaking (the last four
// minutes average −0.07 gal against +0.001 before the event), so removing
// the whole record's mean adds 1.5 cm/s (+3.6 %) to the ground velocity at
// the moment of the peak — knowledge of the future a station does not have
// (with the pre-event baseline and no filter the tracker gives −3.5 %). The
// 0.02 Hz high-pass takes another 2 cm/s of the slowest ground velocity,
// which is where the same baseline shift lives. So AA06EA01 gets 8 %.
func TestTrackerOnJMARecords(t *testing.T) {
	t.Parallel()
	tol := map[string]float64{
		"AA06EA01.csv":   0.08,
		"Q4149CF2.csv":   0.03,
		"Q4169D2004.csv": 0.03,
		"Q416EED018.csv": 0.03,
	}
	for _, st := range loadStations(t) {
		t.Run(st.file, func(t *testing.T) {
			t.Parallel()
			got, tr := runFrames(t, 50, st.ns, st.ew, Config{})
			want := st.offline.SvaCms
			if !within(got, want, tol[st.file]) {
				t.Errorf("real-time Sva %.3f cm/s, offline %.3f (%+.2f %%, tolerance %g %%)", got, want, 100*(got/want-1), 100*tol[st.file])
			}
			if c := Class(got); c != st.class {
				t.Errorf("real-time class %d (%.3f cm/s), want %d", c, got, st.class)
			}
			run := tr.Running()
			if run.SvaCms != got || tr.Max() != got {
				t.Errorf("Running %.6f, Max %.6f, largest frame peak %.6f: want all equal", run.SvaCms, tr.Max(), got)
			}
			if tr.Dropped() != 0 || tr.Restarts() != 0 {
				t.Errorf("dropped %d, restarts %d on a clean record", tr.Dropped(), tr.Restarts())
			}
			t.Logf("real-time %.3f cm/s at %g s %v, offline %.3f at %g s %v (%+.2f %%), class %d",
				got, run.PeriodS, run.Component, want, st.offline.PeriodS, st.offline.Component, 100*(got/want-1), Class(got))
		})
	}
}

// TestTrackerWithoutHighPassIsOffline: with no high-pass the tracker is the
// offline recursion, whose baseline is the first sample instead of the mean;
// on a record whose first sample is its mean the two agree to rounding.
func TestTrackerWithoutHighPassIsOffline(t *testing.T) {
	t.Parallel()
	const rate, n = 50.0, 3000
	rng := rand.New(rand.NewPCG(5, 6))
	ns, ew := make([]float64, n), make([]float64, n)
	for _, x := range [][]float64{ns, ew} {
		var sum float64
		for i := 1; i < n; i++ {
			env := math.Exp(-math.Pow(float64(i-1000)/400, 2))
			x[i] = 80 * env * rng.NormFloat64()
			sum += x[i]
		}
		for i := 1; i < n; i++ { // x[0] = 0 = the mean
			x[i] -= sum / (n - 1)
		}
	}
	off, err := Station(rate, ns, ew)
	if err != nil {
		t.Fatal(err)
	}
	_, tr := runFrames(t, rate, ns, ew, Config{HighPassHz: -1})
	run := tr.Running()
	for i := range NumPeriods {
		if !within(run.NS[i], off.NS[i], 1e-9) || !within(run.EW[i], off.EW[i], 1e-9) {
			t.Fatalf("T %g s: tracker %.12g / %.12g, offline %.12g / %.12g", Period(i), run.NS[i], run.EW[i], off.NS[i], off.EW[i])
		}
	}
	if run.PeriodS != off.PeriodS || run.Component != off.Component {
		t.Errorf("maximum at %g s %v, offline %g s %v", run.PeriodS, run.Component, off.PeriodS, off.Component)
	}
}

// perturbation disturbs a 50 Hz component as a real sensor might.
type perturbation struct {
	name string
	f    func(x []float64) []float64
}

var perturbations = []perturbation{
	{"as recorded", func(x []float64) []float64 { return x }},
	// A 0.06° tilt (1 gal) halfway through the record, and staying.
	{"1 gal step", func(x []float64) []float64 {
		y := append([]float64(nil), x...)
		for i := len(y) / 2; i < len(y); i++ {
			y[i]++
		}
		return y
	}},
	// 3.6 gal an hour, far more than a MEMS sensor's thermal drift.
	{"drift 1 mgal/s", func(x []float64) []float64 {
		y := append([]float64(nil), x...)
		for i := range y {
			y[i] += 0.001 * float64(i) / 50
		}
		return y
	}},
}

// quietHour is an hour of white noise at 0.1 gal rms (a good MEMS sensor's
// floor) at 50 Hz, both components.
func quietHour() (ns, ew []float64) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 3600 * 50
	ns, ew = make([]float64, n), make([]float64, n)
	for i := range ns {
		ns[i], ew[i] = 0.1*rng.NormFloat64(), 0.1*rng.NormFloat64()
	}
	return ns, ew
}

// TestTrackerDriftTreatment measures how the real-time baseline handling
// moves the tracker's Sva away from the offline one (100 Hz, mean removed)
// on the JMA records decimated to 50 Hz, as recorded and with a sensor's
// offset step or drift added, and what an hour of sensor noise alone reads
// as; it prints the table (go test ./lpgm -run DriftTreatment -v) and holds
// the default to it. The first row cannot be built on a station: it takes
// the baseline from the first ten seconds, known quiet only afterwards.
func TestTrackerDriftTreatment(t *testing.T) {
	t.Parallel()
	stations := loadStations(t)
	noiseNS, noiseEW := quietHour()
	type treatment struct {
		name      string
		cfg       Config
		preEvent  bool // baseline: the mean of the first 10 s
		isDefault bool
	}
	treatments := []treatment{
		{"no high-pass, pre-event mean (offline only)", Config{HighPassHz: -1}, true, false},
		{"no high-pass, first sample", Config{HighPassHz: -1}, false, false},
		{"high-pass 0.005 Hz", Config{HighPassHz: 0.005}, false, false},
		{"high-pass 0.01 Hz", Config{HighPassHz: 0.01}, false, false},
		{"high-pass 0.02 Hz (default)", Config{}, false, true},
		{"high-pass 0.03 Hz", Config{HighPassHz: 0.03}, false, false},
		{"high-pass 0.05 Hz", Config{HighPassHz: 0.05}, false, false},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %-15s", "real-time Sva − offline, %", "")
	for _, st := range stations {
		fmt.Fprintf(&b, " %10s", strings.TrimSuffix(st.file, ".csv"))
	}
	fmt.Fprintf(&b, " %6s %13s\n", "worst", "1 h of noise")
	for _, tr := range treatments {
		for pi, p := range perturbations {
			name := ""
			if pi == 0 {
				name = tr.name
			}
			fmt.Fprintf(&b, "%-44s %-15s", name, p.name)
			worst := 0.0
			for _, st := range stations {
				ns, ew := p.f(st.ns), p.f(st.ew)
				if tr.preEvent {
					ns, ew = withFirst(ns, meanOf(ns[:500])), withFirst(ew, meanOf(ew[:500]))
				}
				got, _ := runFrames(t, 50, ns, ew, tr.cfg)
				d := 100 * (got/st.offline.SvaCms - 1)
				if math.Abs(d) > math.Abs(worst) {
					worst = d
				}
				fmt.Fprintf(&b, " %+10.2f", d)
				if tr.isDefault && Class(got) != st.class {
					t.Errorf("%s, %s: class %d (%.3f cm/s), want %d", st.file, p.name, Class(got), got, st.class)
				}
				if tr.isDefault && pi > 0 && !within(got, st.offline.SvaCms, 0.08) {
					t.Errorf("%s, %s: %.3f cm/s, offline %.3f", st.file, p.name, got, st.offline.SvaCms)
				}
			}
			fmt.Fprintf(&b, " %+6.1f", worst)
			if pi == 0 {
				noise, _ := runFrames(t, 50, noiseNS, noiseEW, tr.cfg)
				fmt.Fprintf(&b, " %8.2f cm/s", noise)
				// Sensor noise must stay far below class 1 (5 cm/s).
				if tr.isDefault && noise > 1 {
					t.Errorf("an hour of 0.1 gal noise reads %.3f cm/s", noise)
				}
			}
			b.WriteByte('\n')
		}
	}
	t.Log("\n" + b.String())
}

// withFirst returns x with its first sample replaced by v: the tracker
// without a high-pass takes its first sample as the sensor's offset.
func withFirst(x []float64, v float64) []float64 {
	y := append([]float64(nil), x...)
	y[0] = v
	return y
}

func meanOf(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// TestTrackerBadSamples: samples that are not finite or beyond ±MaxGal
// never reach the state. A short gap is bridged by holding the last good
// sample; a second of them restarts the tracker from rest; nothing ever
// comes out as NaN, and the peaks already measured are kept.
func TestTrackerBadSamples(t *testing.T) {
	t.Parallel()
	rec := loadStations(t)[0] // AA06EA01: class 2
	clean, _ := runFrames(t, 50, rec.ns, rec.ew, Config{})
	// Where the clean record's peak is.
	tr, _ := NewTracker(50, Config{})
	peakAt, best := 0, 0.0
	for i := range rec.ns {
		if p := tr.Add(rec.ns[i], rec.ew[i]); p > best {
			peakAt, best = i, p
		}
	}
	spoil := func(from, n int, v float64) ([]float64, []float64) {
		ns, ew := append([]float64(nil), rec.ns...), append([]float64(nil), rec.ew...)
		for i := from; i < from+n; i++ {
			ns[i] = v
			if i%2 == 0 {
				ew[i] = -v
			}
		}
		return ns, ew
	}
	cases := []struct {
		name     string
		from, n  int
		v        float64
		restarts int64
		tol      float64 // on the clean record's Sva
	}{
		// Holding the last good sample flattens 0.2 s of the strongest
		// motion: measured +0.96 %.
		{"10 NaN before the peak", peakAt - 20, 10, math.NaN(), 0, 0.02},
		{"10 +Inf before the peak", peakAt - 20, 10, math.Inf(1), 0, 0.02},
		{"10 samples of 1e300 before the peak", peakAt - 20, 10, 1e300, 0, 0.02},
		{"a NaN at the very start", 0, 1, math.NaN(), 0, 1e-3},
		// A 2 s outage in the quiet tail: the tracker restarts and the
		// restart adds no false peak.
		{"2 s of NaN in the coda", len(rec.ns) - 3000, 100, math.NaN(), 1, 1e-9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, ew := spoil(tc.from, tc.n, tc.v)
			got, tr := runFrames(t, 50, ns, ew, Config{})
			if !within(got, clean, tc.tol) {
				t.Errorf("Sva %.4f cm/s, clean record %.4f (%+.3f %%)", got, clean, 100*(got/clean-1))
			}
			if tr.Dropped() != int64(tc.n) || tr.Restarts() != tc.restarts {
				t.Errorf("dropped %d, restarts %d; want %d, %d", tr.Dropped(), tr.Restarts(), tc.n, tc.restarts)
			}
			t.Logf("Sva %.4f cm/s, clean %.4f (%+.3f %%)", got, clean, 100*(got/clean-1))
		})
	}
}

// TestTrackerRecoversFromGarbage: the largest acceptable input for a second
// saturates the response, which then decays (5 % damping, the high-pass)
// instead of staying forever; NaN for ever is never reported.
func TestTrackerRecoversFromGarbage(t *testing.T) {
	t.Parallel()
	tr, err := NewTracker(50, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Add(0, 0) // primes the high-pass: what follows is not an offset
	for i := 0; i < 50; i++ {
		tr.Add(MaxGal, -MaxGal)
	}
	for i := 0; i < 50*60; i++ {
		tr.Add(math.NaN(), math.Inf(1))
	}
	if p := tr.TakePeak(); !(p > 1e4) || math.IsInf(p, 0) {
		t.Fatalf("peak after a second at MaxGal: %v", p)
	}
	var last float64
	for i := 0; i < 50*900; i++ { // 15 minutes of quiet
		tr.Add(0, 0)
		if (i+1)%frameSamples == 0 {
			last = tr.TakePeak()
		}
	}
	if last > 0.01 {
		t.Errorf("after 15 min of quiet the frame peak is %.4g cm/s", last)
	}
	if tr.Restarts() == 0 {
		t.Errorf("a minute of NaN did not restart the tracker")
	}
	tr.Reset()
	if tr.Max() != 0 || tr.Dropped() != 0 || tr.Restarts() != 0 || tr.TakePeak() != 0 {
		t.Errorf("Reset left max %v, dropped %d, restarts %d", tr.Max(), tr.Dropped(), tr.Restarts())
	}
}

// TestTrackerGuardsItsState covers the defence that bounded input makes
// unreachable: a state that somehow went NaN is never reported and is
// dropped within a second.
func TestTrackerGuardsItsState(t *testing.T) {
	t.Parallel()
	tr, err := NewTracker(50, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		tr.Add(float64(i%7), float64(i%5))
	}
	before := tr.Max()
	tr.banks[1].vg = math.NaN()
	tr.banks[0].x[3] = math.Inf(1)
	for i := range 50 {
		if p := tr.Add(1, 1); math.IsNaN(p) || math.IsInf(p, 0) {
			t.Fatalf("sample %d after poisoning: Add = %v", i, p)
		}
	}
	if tr.Restarts() != 1 || tr.Max() != before {
		t.Errorf("restarts %d, max %v (was %v)", tr.Restarts(), tr.Max(), before)
	}
	if p := tr.TakePeak(); math.IsNaN(p) || math.IsInf(p, 0) {
		t.Errorf("frame peak %v", p)
	}
	r := tr.Running()
	for i := range NumPeriods {
		if !finite(r.NS[i]) || !finite(r.EW[i]) {
			t.Fatalf("running spectrum at %g s: %v %v", Period(i), r.NS[i], r.EW[i])
		}
	}
	if !tr.banks[0].finite() || !tr.banks[1].finite() {
		t.Error("the state is still poisoned")
	}
}

func TestTrackerResetMax(t *testing.T) {
	t.Parallel()
	tr, err := NewTracker(50, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		tr.Add(50*math.Sin(float64(i)/5), 0)
	}
	if tr.Max() == 0 {
		t.Fatal("no response")
	}
	tr.ResetMax()
	if r := tr.Running(); tr.Max() != 0 || r.SvaCms != 0 || tr.TakePeak() != 0 {
		t.Errorf("after ResetMax: max %v, running %v", tr.Max(), r.SvaCms)
	}
	if p := tr.Add(0, 0); p == 0 {
		t.Errorf("the oscillators stopped with ResetMax")
	}
}

func TestNewTrackerRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rate float64
		cfg  Config
	}{
		{0, Config{}}, {math.NaN(), Config{}}, {1e9, Config{}}, {9, Config{}},
		{50, Config{HighPassHz: math.NaN()}}, {50, Config{HighPassHz: math.Inf(1)}},
		{50, Config{HighPassHz: 5}}, {50, Config{HighPassHz: math.Inf(-1)}},
	}
	for _, tc := range cases {
		tr, err := NewTracker(tc.rate, tc.cfg)
		if !errors.Is(err, ErrRate) && !errors.Is(err, ErrHighPass) {
			t.Errorf("NewTracker(%v, %+v) = %p, %v; want ErrRate or ErrHighPass", tc.rate, tc.cfg, tr, err)
		}
	}
}

func TestTrackerDoesNotAllocate(t *testing.T) {
	tr, err := NewTracker(50, Config{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(50, func() {
		for range frameSamples {
			tr.Add(math.Sin(float64(i)), math.Cos(float64(i)))
			i++
		}
		tr.TakePeak()
		_ = tr.Running()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame, want 0", allocs)
	}
}

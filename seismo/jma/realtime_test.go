package jma

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"shindo.dev/seismo/accelcsv"
	"shindo.dev/seismo/internal/jmatest"
	"shindo.dev/seismo/resample"
)

// runRealtime streams a record through a meter, updating every 500 ms as a
// station does, and returns the running maximum.
func runRealtime(tb testing.TB, rate float64, ns, ew, ud []float64, cfg RealtimeConfig) float64 {
	tb.Helper()
	rt, err := NewRealtime(rate, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	every := int(math.Round(rate / 2))
	for i := range ns {
		rt.Push(ns[i], ew[i], ud[i])
		if (i+1)%every == 0 {
			rt.Update()
		}
	}
	return rt.Max()
}

type rateCase struct {
	rate       float64
	ns, ew, ud []float64
}

// atRates returns the record at its own 100 Hz and decimated to 50 Hz.
func atRates(rec *accelcsv.Record) []rateCase {
	return []rateCase{
		{rec.RateHz, rec.NS, rec.EW, rec.UD},
		{rec.RateHz / 2, resample.Halve(rec.NS), resample.Halve(rec.EW), resample.Halve(rec.UD)},
	}
}

func TestRealtimeMaxConvergesToOfficial(t *testing.T) {
	t.Parallel()
	for _, ref := range jmatest.References {
		t.Run(ref.File, func(t *testing.T) {
			t.Parallel()
			rec := jmatest.Load(t, ref.File)
			official, err := Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range atRates(rec) {
				got := runRealtime(t, rc.rate, rc.ns, rc.ew, rc.ud, RealtimeConfig{})
				if d := got - official.I; math.Abs(d) > 0.05 {
					t.Errorf("%g Hz: running max %.4f, official %.4f (diff %+.4f)", rc.rate, got, official.I, d)
				}
			}
		})
	}
}

// TestRealtimeEdgeTreatment measures how the window edges move the running
// maximum away from the official intensity, for several treatments, and
// prints the table (go test ./jma -run EdgeTreatment -v). The default is
// held to the 0.05 bound here and in TestRealtimeMaxConvergesToOfficial; the
// other rows document why it is the default.
func TestRealtimeEdgeTreatment(t *testing.T) {
	t.Parallel()
	type treatment struct {
		name string
		cfg  RealtimeConfig
	}
	none := time.Duration(-1)
	treatments := []treatment{
		{"span 16 s, no taper, no hold-back", RealtimeConfig{Taper: none, HoldBack: none}},
		{"span 16 s, taper 0.5 s, no hold-back", RealtimeConfig{HoldBack: none}},
		{"span 16 s, no taper, hold-back 1 s", RealtimeConfig{Taper: none}},
		{"span 16 s, taper 0.5 s, hold-back 0.5 s", RealtimeConfig{HoldBack: 500 * time.Millisecond}},
		{"span 16 s, taper 0.5 s, hold-back 1 s (default)", RealtimeConfig{}},
		{"span 16 s, taper 1 s, hold-back 1 s", RealtimeConfig{Taper: time.Second}},
		{"span 16 s, taper 1 s, hold-back 2 s", RealtimeConfig{Taper: time.Second, HoldBack: 2 * time.Second}},
		{"span 8 s, taper 0.5 s, hold-back 1 s", RealtimeConfig{Span: 8 * time.Second}},
		{"span 30 s, taper 0.5 s, hold-back 1 s", RealtimeConfig{Span: 30 * time.Second}},
		{"span 60 s, taper 0.5 s, hold-back 1 s", RealtimeConfig{Span: 60 * time.Second}},
		{"window 20 s, span 16 s, taper 0.5 s, hold-back 1 s", RealtimeConfig{Window: 20 * time.Second}},
		{"window 10 s, span 16 s, taper 0.5 s, hold-back 1 s", RealtimeConfig{Window: 10 * time.Second}},
	}
	type recCase struct {
		name     string
		official float64
		rates    []rateCase
	}
	var recs []recCase
	for _, ref := range jmatest.References {
		rec := jmatest.Load(t, ref.File)
		official, err := Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, recCase{ref.File, official.I, atRates(rec)})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-56s", "running max − official I (100 Hz record)")
	for _, r := range recs {
		fmt.Fprintf(&b, " %15s", strings.TrimSuffix(r.name, ".csv"))
	}
	fmt.Fprintf(&b, " %8s\n", "worst")
	// The floor: what decimation alone does to the official value.
	fmt.Fprintf(&b, "%-50s %3.0fHz", "official method, decimated record", recs[0].rates[1].rate)
	worstDecimation := 0.0
	for _, r := range recs {
		rc := r.rates[1]
		res, err := Instrumental(rc.rate, rc.ns, rc.ew, rc.ud)
		if err != nil {
			t.Fatal(err)
		}
		worstDecimation = math.Max(worstDecimation, math.Abs(res.I-r.official))
		fmt.Fprintf(&b, " %+15.4f", res.I-r.official)
	}
	fmt.Fprintf(&b, " %8.4f\n", worstDecimation)
	for _, tr := range treatments {
		for _, rateIdx := range []int{0, 1} {
			fmt.Fprintf(&b, "%-50s %3.0fHz", tr.name, recs[0].rates[rateIdx].rate)
			worst := 0.0
			for _, r := range recs {
				rc := r.rates[rateIdx]
				d := runRealtime(t, rc.rate, rc.ns, rc.ew, rc.ud, tr.cfg) - r.official
				worst = math.Max(worst, math.Abs(d))
				fmt.Fprintf(&b, " %+15.4f", d)
			}
			fmt.Fprintf(&b, " %8.4f\n", worst)
			if tr.cfg == (RealtimeConfig{}) && worst > 0.05 {
				t.Errorf("default treatment: worst error %.4f > 0.05", worst)
			}
		}
	}
	t.Logf("\n%s", b.String())
}

func TestRealtimeStartsQuietAndTracksOnset(t *testing.T) {
	t.Parallel()
	rt, err := NewRealtime(50, RealtimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Update(); got != MinIntensity {
		t.Errorf("empty window: %v, want MinIntensity", got)
	}
	// 10 s of a 2 Hz circular motion at 50 gal, then 10 s of silence. The
	// motion ramps up over 2 s: an abrupt onset rings through the filter
	// (in the official method too) and would blur the exact value.
	for i := 0; i < 500; i++ {
		s, c := math.Sincos(2 * math.Pi * 2 * float64(i) / 50)
		amp := 50.0
		if i < 100 {
			amp *= 0.5 * (1 - math.Cos(math.Pi*float64(i)/100))
		}
		rt.Push(amp*c, amp*s, 0)
	}
	rt.Update()
	want := 2*math.Log10(50*Weight(2)) + 0.94
	if d := rt.Last() - want; math.Abs(d) > 0.02 {
		t.Errorf("steady motion: %.4f, want %.4f", rt.Last(), want)
	}
	for i := 0; i < 500; i++ {
		rt.Push(0, 0, 0)
	}
	rt.Update()
	if rt.Max() < rt.Last() || math.Abs(rt.Max()-want) > 0.05 {
		t.Errorf("max %.4f last %.4f, want max ≈ %.4f", rt.Max(), rt.Last(), want)
	}
	rt.ResetMax()
	if rt.Max() != MinIntensity {
		t.Errorf("after ResetMax: %v", rt.Max())
	}
}

func TestRealtimeUpdateDoesNotAllocate(t *testing.T) {
	rt, err := NewRealtime(50, RealtimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(20, func() {
		for j := 0; j < 25; j++ {
			rt.Push(math.Sin(float64(i)), math.Cos(float64(i)), 0.1)
			i++
		}
		rt.Update()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per update, want 0", allocs)
	}
}

func TestNewRealtimeRejectsImpossibleWindow(t *testing.T) {
	t.Parallel()
	if _, err := NewRealtime(50, RealtimeConfig{Span: time.Second, Taper: time.Second}); err == nil {
		t.Error("1 s span with 1 s tapers: want error")
	}
	if _, err := NewRealtime(50, RealtimeConfig{Window: 100 * time.Millisecond}); err == nil {
		t.Error("0.1 s window: want error")
	}
	if _, err := NewRealtime(-1, RealtimeConfig{}); err == nil {
		t.Error("negative rate: want error")
	}
}

package pwave

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"shindo.dev/seismo/synth"
)

const rate = 50

// feed runs samples through m, returning the measurement after each.
func feed(m *Meter, ud []float64) []Measurement {
	out := make([]Measurement, len(ud))
	for i, a := range ud {
		m.Add(a)
		out[i] = m.Measurement()
	}
	return out
}

// noise is n samples of white noise of rms gal.
func noise(rng *rand.Rand, n int, rms float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rms * rng.NormFloat64()
	}
	return x
}

// TestSinusoid: for a sinusoidal displacement u = A·sin(2πt/T) from rest,
// τc is T (r = ∫v²/∫u² = (2π/T)² over whole cycles) and Pd is A: the
// definitions the relations take, within what the 0.075 Hz high-pass and
// a 3 s window leave of them. The ground starts moving at once (v jumps
// to Aω), so the acceleration starts with an impulse of Aω.
func TestSinusoid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ periodS, ampCm float64 }{{1, 0.2}, {1.5, 1}, {0.5, 0.2}} {
		rng := rand.New(rand.NewPCG(1, 2))
		const startMs = 1_800_000_000_000
		pre := noise(rng, 30*rate, 0.12) // background, so the pick has a reference
		w := 2 * math.Pi / tc.periodS
		wave := make([]float64, 10*rate)
		for i := range wave {
			tt := float64(i) / rate
			wave[i] = -tc.ampCm*w*w*math.Sin(w*tt) + 0.12*rng.NormFloat64() // acceleration of u
		}
		wave[0] += tc.ampCm * w * rate
		m := New(rate, startMs)
		feed(m, pre)
		got := feed(m, wave)
		last := got[len(got)-1]
		if !last.Picked() {
			t.Fatalf("T %.1f s: no pick", tc.periodS)
		}
		if at := last.OnsetMs - startMs - 30_000; at < 0 || at > 200 {
			t.Errorf("T %.1f s: picked %d ms after the onset, want within 200", tc.periodS, at)
		}
		if last.WindowMs != WindowMs {
			t.Errorf("window %d ms, want %d", last.WindowMs, WindowMs)
		}
		if d := last.TauCS/tc.periodS - 1; math.Abs(d) > 0.1 {
			t.Errorf("T %.1f s: τc %.3f s", tc.periodS, last.TauCS)
		}
		if d := last.PdCm/tc.ampCm - 1; math.Abs(d) > 0.25 {
			t.Errorf("T %.1f s: Pd %.3f cm, amplitude %.3f", tc.periodS, last.PdCm, tc.ampCm)
		}
		t.Logf("T %.1f s A %.2f cm: τc %.3f s, Pd %.3f cm", tc.periodS, tc.ampCm, last.TauCS, last.PdCm)
	}
}

// TestNoiseAlone: an hour of a good sensor's background (0.12 gal rms per
// axis, synth.DefaultNoiseGal) never picks.
func TestNoiseAlone(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	m := New(rate, 0)
	for range 60 {
		for _, a := range noise(rng, 60*rate, synth.DefaultNoiseGal) {
			m.Add(a + 3) // and an offset, which the high-pass removes
			if m.Measurement().Picked() {
				t.Fatalf("picked noise at %d ms", m.Measurement().OnsetMs)
			}
		}
	}
}

// TestHoldAndRearm: a pick is reported for HoldMs, then the meter is ready
// for the next event; an onset before the LTA has warmed up is not picked.
func TestHoldAndRearm(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	burst := func() []float64 {
		x := noise(rng, 2*rate, 20)
		return append(x, noise(rng, 100*rate, 0.12)...)
	}
	m := New(rate, 0)
	feed(m, noise(rng, 2*rate, 0.12))
	if got := feed(m, burst()); got[len(got)-1].Picked() {
		t.Fatalf("picked %v 2 s after start, before the background is known", got[len(got)-1])
	}
	feed(m, noise(rng, 30*rate, 0.12))
	got := feed(m, burst())
	first := got[0].OnsetMs
	if first == 0 {
		t.Fatal("no pick of the first burst")
	}
	for i, g := range got {
		ms := int64(i) * 1000 / rate
		if held := g.OnsetMs == first; held != (ms < HoldMs) && ms != HoldMs {
			t.Fatalf("at %d ms after the burst: %+v", ms, g)
		}
	}
	got = feed(m, burst())
	if !got[0].Picked() || got[0].OnsetMs == first {
		t.Errorf("second burst: %+v, want a new pick", got[0])
	}
}

// TestWeakOnsetHasNoTauC: a wave that barely stands above the noise is
// picked, with Pd, but τc — which would be the noise's long period after
// double integration — is left unknown.
func TestWeakOnsetHasNoTauC(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	m := New(rate, 0)
	feed(m, noise(rng, 30*rate, 0.12))
	weak := make([]float64, 5*rate)
	for i := range weak {
		weak[i] = 1.5*math.Sin(2*math.Pi*8*float64(i)/rate) + 0.12*rng.NormFloat64() // 8 Hz: tiny displacement
	}
	got := feed(m, weak)
	last := got[len(got)-1]
	if !last.Picked() || last.PdCm <= 0 {
		t.Fatalf("weak onset: %+v, want a pick with Pd", last)
	}
	if last.TauCS != 0 {
		t.Errorf("τc %.2f s from a displacement of %.4f cm, want unknown", last.TauCS, last.PdCm)
	}
}

// TestNotFinite: infinities and NaN from a broken sensor do not poison the
// meter for good.
func TestNotFinite(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	m := New(rate, 0)
	feed(m, []float64{math.Inf(1), math.NaN(), math.MaxFloat64, -math.MaxFloat64})
	feed(m, noise(rng, 30*rate, 0.12))
	got := feed(m, noise(rng, 5*rate, 20))
	last := got[len(got)-1]
	if !last.Picked() || math.IsNaN(last.PdCm) || math.IsNaN(last.TauCS) || math.IsInf(last.PdCm, 0) {
		t.Errorf("after non-finite input: %+v", last)
	}
}

// TestRelations: the magnitudes invert the published relations.
func TestRelations(t *testing.T) {
	t.Parallel()
	for _, m := range []float64{4, 5.5, 7} {
		for _, r := range []float64{10, 50} {
			pd := math.Pow(10, -3.463+0.729*m-1.374*math.Log10(r)) // Wu & Zhao (2006)
			if got := MagnitudePd(pd, r); math.Abs(got-m) > 1e-9 {
				t.Errorf("MagnitudePd(%g, %g) = %g, want %g", pd, r, got, m)
			}
		}
		tc := math.Pow(10, 0.296*m-1.716) // Wu et al. (2007)
		if got := MagnitudeTauC(tc); math.Abs(got-m) > 1e-9 {
			t.Errorf("MagnitudeTauC(%g) = %g, want %g", tc, got, m)
		}
	}
}

// TestSynthetic: on seismo/synth's waveforms, P is picked within a second
// of its arrival at stations 5–80 km from an M6.4, and τc, which depends
// on the spectrum's shape alone, gives the magnitude within 1 at each
// station and within 0.5 over them (the detector takes a median).
func TestSynthetic(t *testing.T) {
	t.Parallel()
	ev, err := synth.Scenario("hualien-m6")
	if err != nil {
		t.Fatal(err)
	}
	var mags []float64
	for k, km := range []float64{5, 15, 30, 50, 80} {
		az := float64(k) * 1.3
		pos := synth.Position{Lat: ev.Lat + km/111*math.Cos(az), Lon: ev.Lon + km/111/math.Cos(ev.Lat*math.Pi/180)*math.Sin(az)}
		start := ev.Origin.Add(-30 * time.Second)
		g := synth.New(pos, start, synth.Config{Seed: uint64(k + 1)})
		g.AddEvent(ev)
		ns, ew, ud := make([]float64, 50*rate), make([]float64, 50*rate), make([]float64, 50*rate)
		g.Read(ns, ew, ud)
		got := feed(New(rate, start.UnixMilli()), ud)
		last := got[len(got)-1]
		arrival := ev.Origin.Add(time.Duration(ev.HypocentralKm(pos) / synth.DefaultModel().AlphaKmS * float64(time.Second)))
		if d := last.OnsetMs - arrival.UnixMilli(); d < -200 || d > 1000 {
			t.Errorf("%.0f km: picked %+d ms from the P arrival", km, d)
			continue
		}
		mag := MagnitudeTauC(last.TauCS)
		if math.Abs(mag-ev.Mag) > 1 {
			t.Errorf("%.0f km: τc %.2f s, M %.1f for M%.1f", km, last.TauCS, mag, ev.Mag)
		}
		mags = append(mags, mag)
		t.Logf("%.0f km: pick %+d ms, Pd %.3f cm (M %.1f), τc %.2f s (M %.1f)", km, last.OnsetMs-arrival.UnixMilli(),
			last.PdCm, MagnitudePd(last.PdCm, ev.HypocentralKm(pos)), last.TauCS, mag)
	}
	mean := 0.0
	for _, m := range mags {
		mean += m / float64(len(mags))
	}
	if math.Abs(mean-ev.Mag) > 0.5 {
		t.Errorf("mean τc magnitude %.2f for M%.1f", mean, ev.Mag)
	}
}

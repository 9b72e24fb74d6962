package synth

import (
	"math"
	"testing"
)

// TestLin2009PGA checks the relation against values worked by hand from
// its equation and the pga row of its table (rock, unspecified style,
// VS30 620 m/s): M7.0 at 20 km is about 0.13 g, M4.5 at 20 km about 0.02
// g; it falls with distance and grows with magnitude everywhere.
func TestLin2009PGA(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mag, r, wantGal float64 }{
		// ln y = 1.0109 − 1.5184·0.1722·0.7 + (−1.1634 + 0.1722·0.7)·ln √(20² + e^3.0368) − 0.4741·ln(620/1130)
		{7.0, 20, 980.665 * math.Exp(1.0109-1.5184*0.1722*0.7+(-1.1634+0.1722*0.7)*math.Log(math.Sqrt(400+math.Exp(2*1.5184)))-0.4741*math.Log(620.0/1130))},
		// ln y = 1.0109 + 0.3822·(−1.8) + (−1.1634 − 0.1722·1.8)·ln √(20² + e^3.0368) − 0.4741·ln(620/1130)
		{4.5, 20, 980.665 * math.Exp(1.0109-0.3822*1.8+(-1.1634-0.1722*1.8)*math.Log(math.Sqrt(400+math.Exp(2*1.5184)))-0.4741*math.Log(620.0/1130))},
	} {
		if got := Lin2009PGA(c.mag, c.r); math.Abs(got/c.wantGal-1) > 1e-9 {
			t.Errorf("Lin2009PGA(%g, %g) = %.3f gal, want %.3f", c.mag, c.r, got, c.wantGal)
		}
	}
	if g := Lin2009PGA(7.0, 20) / gal; g < 0.1 || g > 0.2 {
		t.Errorf("M7.0 at 20 km: %.3f g, want about 0.13", g)
	}
	if g := Lin2009PGA(4.5, 20) / gal; g < 0.01 || g > 0.04 {
		t.Errorf("M4.5 at 20 km: %.3f g, want about 0.02", g)
	}
	for mag := 4.0; mag <= 7.5; mag += 0.5 {
		for r := 5.0; r < 300; r *= 1.5 {
			if Lin2009PGA(mag, r*1.5) >= Lin2009PGA(mag, r) || Lin2009PGA(mag+0.5, r) <= Lin2009PGA(mag, r) {
				t.Fatalf("M%.1f at %.0f km: not monotonic", mag, r)
			}
		}
	}
}

// TestMotionLin2009 holds the time series of an event played with
// MotionLin2009 to the relation: over many stations the median PGA is
// Lin (2009)'s within the sampling error of its scatter, whatever the
// stochastic model would have given, and the stations scatter about it
// with roughly its σ. An event without a Motion is left as it was.
func TestMotionLin2009(t *testing.T) {
	t.Parallel()
	m := DefaultModel()
	for _, c := range []struct{ mag, epi float64 }{{4.5, 30}, {6.0, 20}, {7.0, 60}} {
		ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: c.mag, Origin: testOrigin, Motion: MotionLin2009}
		pos := north(c.epi)
		const seeds = 40
		var lnPGA []float64
		for seed := range uint64(seeds) {
			ns, ew, _ := record(ev, pos, Config{Seed: seed, NoiseGal: -1})
			lnPGA = append(lnPGA, math.Log(math.Sqrt(peak(ns)*peak(ew))))
		}
		med := math.Exp(median(lnPGA))
		want := Lin2009PGA(c.mag, ev.HypocentralKm(pos))
		own := m.PredictPGA(c.mag, ev.HypocentralKm(pos), RateHz/2)
		var ss float64
		mean := 0.0
		for _, v := range lnPGA {
			mean += v / seeds
		}
		for _, v := range lnPGA {
			ss += (v - mean) * (v - mean)
		}
		sd := math.Sqrt(ss / (seeds - 1))
		t.Logf("M%.1f at %g km: median PGA %.2f gal, Lin (2009) %.2f, the model's own %.2f; σ ln %.2f", c.mag, c.epi, med, want, own, sd)
		// σ/√n ≈ 0.085 for the median of 40, plus the model's own
		// peak-to-prediction scatter.
		if d := math.Log(med / want); math.Abs(d) > 0.3 {
			t.Errorf("M%.1f at %g km: median PGA %.2f gal, Lin (2009) %.2f (ln ratio %+.2f)", c.mag, c.epi, med, want, d)
		}
		if sd < 0.3 || sd > 0.8 {
			t.Errorf("M%.1f at %g km: σ of ln PGA over stations %.2f, want about %.2f", c.mag, c.epi, sd, lin09Sigma)
		}
	}
	ev := Event{Lat: 23.5, Lon: 121, DepthKm: 10, Mag: 6, Origin: testOrigin}
	plain := ev
	plain.Motion = MotionStochastic
	a, _, _ := record(ev, north(20), Config{Seed: 3, NoiseGal: -1})
	b, _, _ := record(plain, north(20), Config{Seed: 3, NoiseGal: -1})
	if peak(a) != peak(b) {
		t.Error("the stochastic motion changed")
	}
}

func TestParseMotion(t *testing.T) {
	t.Parallel()
	for _, m := range Motions() {
		if got, err := ParseMotion(m.String()); err != nil || got != m {
			t.Errorf("ParseMotion(%q) = %q, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMotion("nga-west2"); err == nil {
		t.Error("an unknown model parsed")
	}
}

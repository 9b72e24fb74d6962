package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Motion names the relation an event's amplitudes follow.
//
// The stochastic model (Model) sets both the shape and the size of every
// station's motion. The detector's magnitude table is fitted to the same
// model, so an event played with it tests the detector against itself. An
// event played with another Motion keeps the model's waveforms (spectra,
// durations, P before S) but scales each station's by the ratio of that
// relation's peak ground acceleration, with its scatter, to the model's
// own prediction: amplitudes that owe nothing to the detector's tables.
type Motion string

const (
	// MotionStochastic is the model's own amplitudes.
	MotionStochastic Motion = ""
	// MotionLin2009 follows Lin (2009)'s PGA relation for crustal
	// earthquakes in Taiwan (Lin2009PGA), with its scatter.
	MotionLin2009 Motion = "lin2009"
)

// Motions are the relations an event may follow.
func Motions() []Motion { return []Motion{MotionStochastic, MotionLin2009} }

// ParseMotion reads a Motion by name; "stochastic" and "" are the model's.
func ParseMotion(s string) (Motion, error) {
	switch s {
	case "", "stochastic":
		return MotionStochastic, nil
	case string(MotionLin2009):
		return MotionLin2009, nil
	}
	return "", fmt.Errorf("unknown ground-motion model %q (want stochastic or lin2009)", s)
}

func (m Motion) String() string {
	if m == MotionStochastic {
		return "stochastic"
	}
	return string(m)
}

// Lin (2009) for PGA on rock, crustal events: Lin, P.-S. (2009),
// "Ground-motion attenuation relationship and path-effect study using
// Taiwan data set", PhD dissertation, National Central University, Taiwan;
// fitted to the Taiwan Strong Motion Instrumentation Program's records and
// used in Taiwan's probabilistic hazard maps (Cheng et al. 2013). The form
// and coefficients are those of its equation 4.1 and table 4.1 as
// tabulated in GEM's OpenQuake hazard library (gsim/lin_2009.py, class
// Lin2009, row pga):
//
//	ln y = C1 + C3(8.5−M)² + f(M) + (C4 + C5(M−6.3))·ln √(R² + e^(2H))
//	       + C6·Fn + C7·Fr + C8·ln(Vs30/1130)
//	f(M) = C2(M−6.3) for M ≤ 6.3, −H·C5·(M−6.3) above
//
// y is the geometric mean of the horizontal PGAs in g, R the rupture
// distance in km; σ is the total standard deviation of ln y.
const (
	lin09C1    = 1.0109
	lin09C2    = 0.3822
	lin09C3    = 0.0
	lin09C4    = -1.1634
	lin09C5    = 0.1722
	lin09H     = 1.5184
	lin09C8    = -0.4741
	lin09Sigma = 0.5363
)

// lin09Vs30 is the site the relation is evaluated for: the stochastic
// model's generic rock (Boore & Joyner 1997, VS30 ≈ 620 m/s), so that
// Config.SiteGain means the same under either.
const lin09Vs30 = 620

// gal is 1 g in gal.
const gal = 980.665

// Lin2009PGA is Lin (2009)'s median PGA (gal) of an event of magnitude mw
// at rupture distance rKm, on generic rock, for a fault of unspecified
// style (neither of the normal or reverse terms). Scenarios have no
// rupture plane: their hypocentral distance stands for R, which under-
// rates the near-fault motion of large events as the stochastic model's
// saturation distance (EffectiveKm) does.
func Lin2009PGA(mw, rKm float64) float64 {
	d := mw - 6.3
	ln := lin09C1 + lin09C3*(8.5-mw)*(8.5-mw)
	if d > 0 {
		ln += -lin09H * lin09C5 * d
	} else {
		ln += lin09C2 * d
	}
	ln += (lin09C4 + lin09C5*d) * math.Log(math.Sqrt(rKm*rKm+math.Exp(2*lin09H)))
	ln += lin09C8 * math.Log(lin09Vs30/1130.0)
	return math.Exp(ln) * gal
}

// motionScale is the factor by which the model's motion of ev at hypoKm is
// scaled under ev.Motion: 1 for the model's own; else the relation's PGA,
// drawn with its scatter from seed (one draw per station and event,
// truncated at ±2σ), over the model's predicted PGA for motion up to
// maxHz.
func (m Model) motionScale(ev Event, hypoKm, maxHz float64, seed uint64) float64 {
	if ev.Motion != MotionLin2009 {
		return 1
	}
	eps := rand.New(rand.NewPCG(seed, 0x6c696e3039)).NormFloat64()
	eps = max(-2, min(2, eps))
	target := Lin2009PGA(ev.Mag, hypoKm) * math.Exp(lin09Sigma*eps)
	return target / m.PredictPGA(ev.Mag, hypoKm, maxHz)
}

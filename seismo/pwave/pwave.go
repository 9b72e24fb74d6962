// Package pwave measures the first seconds of a P wave at a station, on
// line, for an early magnitude that does not wait for the strongest
// shaking: the peak displacement Pd and the characteristic period τc of
// Kanamori (2005) and Wu & Kanamori (2005), the parameters Taiwan's
// early-warning research put to use.
//
// # Method
//
// The vertical acceleration is integrated to velocity and displacement,
// each stage followed by a causal two-pole Butterworth high-pass at
// 0.075 Hz: Wu, Kanamori, Allen & Hauksson (2007, Geophys. J. Int. 170,
// 711–717) filter the displacement with a one-way 0.075 Hz Butterworth
// high-pass, and Shieh, Wu & Allen (2008, Geophys. Res. Lett. 35, L20301)
// found two poles give the least scatter in magnitude. Filtering the
// acceleration and velocity as well keeps a sensor's offset and the
// integration's drift out of the displacement.
//
// A P wave is picked by the ratio of a short-term to a long-term average
// of the squared, high-passed vertical acceleration (STA 0.5 s, LTA 30 s,
// ratio 8, and at least 0.5 gal rms over the short term, far above a good
// MEMS sensor's noise). From the pick on, over a window that grows to 3 s:
//
//   - Pd is the peak absolute displacement, cm (Wu & Zhao 2006, Geophys.
//     Res. Lett. 33, L16312);
//   - τc = 2π / √r with r = ∫v² dt / ∫u² dt over the window, u the
//     displacement and v the velocity (Kanamori 2005, Annu. Rev. Earth
//     Planet. Sci. 33, 195–214; Wu & Kanamori 2005, Bull. Seismol. Soc.
//     Am. 95, 347–353).
//
// The measurement is reported for a minute after the pick, then the meter
// re-arms. What it picks may be a P wave or, far from an event, the S wave;
// only the network, which knows where the event is, can tell, so the
// magnitudes here (MagnitudePd, MagnitudeTauC) are applied by the core to
// picks it explains as P.
package pwave

import (
	"math"

	"shindo.dev/seismo/internal/iir"
)

// Parameters of the method (package documentation).
const (
	CornerHz   = 0.075
	WindowMs   = 3000
	HoldMs     = 60_000
	staSeconds = 0.5
	ltaSeconds = 30
	pickRatio  = 8
	pickMinGal = 0.5
	// minSNR is the least ratio of Pd to the displacement noise (rms over
	// the long term before the pick) for which τc is given.
	minSNR = 5
	// warmSeconds is how long the long-term average must have run before
	// a pick: a meter just started has no background to compare with.
	warmSeconds = 10
)

// Measurement is the P wave a station picked and what its first seconds
// showed. The zero value means no pick.
type Measurement struct {
	OnsetMs  int64   // time of the pick, Unix ms (0: none)
	WindowMs int32   // length of P measured, ms (grows to WindowMs)
	PdCm     float64 // peak vertical displacement in the window, cm
	TauCS    float64 // characteristic period over the window, s
}

// Picked reports whether m holds a pick.
func (m Measurement) Picked() bool { return m.OnsetMs != 0 }

// Meter follows one station's vertical acceleration. It is not safe for
// concurrent use.
type Meter struct {
	rateHz float64
	dt     float64
	stepMs float64

	hpA, hpV, hpU iir.HighPass
	primed        bool
	vel, disp     float64 // integrator states (before their high-pass)
	lastA, lastV  float64 // previous filtered acceleration and velocity

	sta, lta float64
	noise2   float64 // long-term mean square displacement before the pick
	aSTA     float64 // smoothing factors
	aLTA     float64
	samples  int

	n        int // samples since the pick
	u2, v2   float64
	m        Measurement // picked while m.OnsetMs != 0 (a pick follows the warm-up, so it is never at 0)
	startMs  int64
	sampleNo int64
}

// New returns a meter for a stream of rateHz samples whose first sample is
// at startMs.
func New(rateHz float64, startMs int64) *Meter {
	return &Meter{
		rateHz:  rateHz,
		dt:      1 / rateHz,
		stepMs:  1000 / rateHz,
		hpA:     iir.NewHighPass(CornerHz, rateHz),
		hpV:     iir.NewHighPass(CornerHz, rateHz),
		hpU:     iir.NewHighPass(CornerHz, rateHz),
		aSTA:    1 / (staSeconds * rateHz),
		aLTA:    1 / (ltaSeconds * rateHz),
		startMs: startMs,
	}
}

// Add takes the next vertical acceleration sample, gal.
func (p *Meter) Add(ud float64) {
	t := p.startMs + int64(math.Round(float64(p.sampleNo)*p.stepMs))
	p.sampleNo++
	if math.IsNaN(ud) || math.IsInf(ud, 0) {
		ud = 0
	}
	if !p.primed {
		p.hpA.Prime(ud)
		p.primed = true
	}
	a := p.hpA.Step(ud)
	p.vel += (a + p.lastA) * p.dt / 2
	p.lastA = a
	v := p.hpV.Step(p.vel)
	p.disp += (v + p.lastV) * p.dt / 2
	p.lastV = v
	u := p.hpU.Step(p.disp)
	if !p.hpA.Finite() || !p.hpV.Finite() || !p.hpU.Finite() {
		p.restart()
		return
	}

	e := a * a
	p.sta += (e - p.sta) * p.aSTA
	if p.m.OnsetMs != 0 {
		p.measure(t, u, v)
		return
	}
	p.samples++
	warm := float64(p.samples) >= warmSeconds*p.rateHz
	if warm && p.sta >= pickRatio*p.lta && p.sta >= pickMinGal*pickMinGal {
		p.n, p.u2, p.v2 = 0, 0, 0
		p.m = Measurement{OnsetMs: t}
		p.measure(t, u, v)
		return
	}
	// The long-term average stops at the pick, so the event does not
	// raise its own background.
	p.lta += (e - p.lta) * p.aLTA
	p.noise2 += (u*u - p.noise2) * p.aLTA
}

func (p *Meter) measure(t int64, u, v float64) {
	if t-p.m.OnsetMs >= HoldMs {
		p.m = Measurement{}
		return
	}
	if t-p.m.OnsetMs >= WindowMs {
		return
	}
	p.n++
	p.u2 += u * u
	p.v2 += v * v
	p.m.WindowMs = int32(math.Round(float64(p.n) * p.stepMs))
	p.m.PdCm = max(p.m.PdCm, math.Abs(u))
	// τc of a displacement that barely rises above the noise is the
	// noise's period, long after double integration: it is left unknown.
	if p.u2 > 0 && p.v2 > 0 && p.m.PdCm >= minSNR*math.Sqrt(p.noise2) {
		p.m.TauCS = 2 * math.Pi * math.Sqrt(p.u2/p.v2)
	} else {
		p.m.TauCS = 0
	}
}

// restart drops a state poisoned by an infinite input.
func (p *Meter) restart() {
	q := New(p.rateHz, p.startMs)
	q.sampleNo = p.sampleNo
	*p = *q
}

// Measurement returns the current pick and its parameters (zero when
// there is none).
func (p *Meter) Measurement() Measurement { return p.m }

// MagnitudePd is the magnitude of the relation of Wu & Zhao (2006,
// Geophys. Res. Lett. 33, L16312), fitted to southern California's
// network: log Pd = −3.463 + 0.729 M − 1.374 log R, Pd in cm and R the
// hypocentral distance in km.
func MagnitudePd(pdCm, hypoKm float64) float64 {
	return (math.Log10(pdCm) + 3.463 + 1.374*math.Log10(max(hypoKm, 1))) / 0.729
}

// MagnitudeTauC is the magnitude of the τc relation of Wu, Kanamori, Allen
// & Hauksson (2007, Geophys. J. Int. 170, 711–717) for southern
// California: log τc = 0.296 M − 1.716, τc in s.
func MagnitudeTauC(tauCS float64) float64 {
	return (math.Log10(tauCS) + 1.716) / 0.296
}

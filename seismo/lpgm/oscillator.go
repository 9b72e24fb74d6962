package lpgm

import "math"

// Damping is the oscillator's damping ratio h that JMA's definition fixes.
const Damping = 0.05

// NumPeriods is the number of natural periods of the spectrum: 1.6 s to
// 7.8 s in 0.2 s steps.
const NumPeriods = 32

// Period returns the i-th natural period in seconds (0 ≤ i < NumPeriods):
// 1.6 + 0.2·i, computed from integer tenths so that 3.8 is 3.8 and not
// 1.6 + 11·0.2 = 3.8000000000000003.
func Period(i int) float64 { return float64(16+2*i) / 10 }

// Periods returns all NumPeriods natural periods, shortest first.
func Periods() [NumPeriods]float64 {
	var p [NumPeriods]float64
	for i := range p {
		p[i] = Period(i)
	}
	return p
}

// step advances one oscillator ẍ + 2hωẋ + ω²x = −a(t) by one sample
// interval Δt, exactly when a(t) is linear between the samples (Nigam &
// Jennings 1969, "Calculation of response spectra from strong-motion
// earthquake records", BSSA 59(2)):
//
//	x₁ = a11·x₀ + a12·ẋ₀ + b11·a₀ + b12·a₁
//	ẋ₁ = a21·x₀ + a22·ẋ₀ + b21·a₀ + b22·a₁
//
// The a's are the free-vibration transition matrix exp(MΔt); the b's are the
// exact response to the linear ramp of acceleration from a₀ to a₁.
type step struct {
	a11, a12, a21, a22 float64
	b11, b12, b21, b22 float64
}

// newStep returns the step matrices for natural period periodS, damping h
// (0 < h < 1) and sample interval dt.
func newStep(periodS, h, dt float64) step {
	w := 2 * math.Pi / periodS
	q := math.Sqrt(1 - h*h)
	wd := w * q
	e := math.Exp(-h * w * dt)
	s, c := math.Sincos(wd * dt)
	hq := h / q

	w2 := w * w
	w3 := w2 * w
	// The two families of terms in Nigam & Jennings' b coefficients.
	p := (2*h*h - 1) / (w2 * dt)
	r := 2 * h / (w3 * dt)

	var st step
	st.a11 = e * (hq*s + c)
	st.a12 = e * s / wd
	st.a21 = -w / q * e * s
	st.a22 = e * (c - hq*s)

	st.b11 = e*((p+h/w)*s/wd+(r+1/w2)*c) - r
	st.b12 = -e*(p*s/wd+r*c) - 1/w2 + r
	st.b21 = e*((p+h/w)*(c-hq*s)-(r+1/w2)*(wd*s+h*w*c)) + 1/(w2*dt)
	st.b22 = -e*(p*(c-hq*s)-r*(wd*s+h*w*c)) - 1/(w2*dt)
	return st
}

// newSteps returns the step matrices of every period of the spectrum.
func newSteps(dt float64) *[NumPeriods]step {
	var st [NumPeriods]step
	for i := range st {
		st[i] = newStep(Period(i), Damping, dt)
	}
	return &st
}

// bank is the state of the NumPeriods oscillators driven by one component,
// plus the ground velocity they ride on. The zero value is at rest, waiting
// for its first sample.
type bank struct {
	x, v    [NumPeriods]float64 // relative displacement (cm) and velocity (cm/s)
	vg      float64             // ground velocity, cm/s
	prev    float64             // the previous acceleration sample, gal
	started bool
}

// push advances the bank by one acceleration sample (gal) and returns the
// largest |absolute velocity| over the periods at this sample, raising
// sva[i] to period i's |absolute velocity| where it is larger. A NaN in the
// state is never reported by either. The first sample only fixes the start
// of the first linear piece: the oscillators and the ground are at rest
// there.
func (b *bank) push(st *[NumPeriods]step, halfDt, a float64, sva *[NumPeriods]float64) float64 {
	if !b.started {
		b.prev, b.started = a, true
		return 0
	}
	a0 := b.prev
	// The trapezoidal rule is the exact integral of a linear piece.
	b.vg += halfDt * (a0 + a)
	var peak float64
	for i := range st {
		c := &st[i]
		x, v := b.x[i], b.v[i]
		b.x[i] = c.a11*x + c.a12*v + c.b11*a0 + c.b12*a
		v = c.a21*x + c.a22*v + c.b21*a0 + c.b22*a
		b.v[i] = v
		// Comparisons rather than max: they are false for NaN, so a NaN
		// in the state cannot reach the peaks (Tracker checks the state
		// itself), and they do not chain the loop on max's NaN handling,
		// which made it twice as slow.
		u := math.Abs(v + b.vg)
		if u > sva[i] {
			sva[i] = u
		}
		if u > peak {
			peak = u
		}
	}
	b.prev = a
	return peak
}

// finite reports whether the bank's state holds only finite numbers.
func (b *bank) finite() bool {
	s := b.vg
	for i := range b.x {
		s += b.x[i] + b.v[i]
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

package jma

import "math"

// HighPassHz is the corner of the drift-removing high-pass used for PGV.
const HighPassHz = 0.2

// PGA is the peak of the three-component vector acceleration (gal), with no
// filtering.
func PGA(ns, ew, ud []float64) float64 {
	n := min(len(ns), len(ew), len(ud))
	var peak2 float64
	for i := 0; i < n; i++ {
		peak2 = max(peak2, ns[i]*ns[i]+ew[i]*ew[i]+ud[i]*ud[i])
	}
	return math.Sqrt(peak2)
}

// PGV is the peak of the three-component vector velocity (cm/s) of a record
// that starts at rest, each component integrated by a VelocityFilter.
func PGV(rateHz float64, ns, ew, ud []float64) float64 {
	n := min(len(ns), len(ew), len(ud))
	fx, fy, fz := NewVelocityFilter(rateHz), NewVelocityFilter(rateHz), NewVelocityFilter(rateHz)
	var peak2 float64
	for i := 0; i < n; i++ {
		x, y, z := fx.Step(ns[i]), fy.Step(ew[i]), fz.Step(ud[i])
		peak2 = max(peak2, x*x+y*y+z*z)
	}
	return math.Sqrt(peak2)
}

// VelocityFilter turns acceleration (gal) into velocity (cm/s), one sample
// at a time, causally. Its transfer function is s²/B3(s) — an integrator 1/s
// times a 3rd-order Butterworth high-pass s³/B3(s) at HighPassHz — which has
// no pole at zero, so an offset or slow drift in the acceleration cannot
// make the velocity run away. It is discretised with the bilinear transform
// (the integrator becomes the trapezoidal rule), pre-warped so the corner
// sits exactly at HighPassHz, as two sections: s/(s+ω) and s/(s²+ωs+ω²).
// The zero value is not usable; call NewVelocityFilter.
type VelocityFilter struct {
	// First-order high-pass section.
	b0, a1 float64 // b1 = −b0
	x1, y1 float64
	// Second-order band-pass section (the integrating one).
	c0, d1, d2 float64 // c1 = 0, c2 = −c0
	u1, u2     float64 // its inputs
	v1, v2     float64 // its outputs
}

// NewVelocityFilter returns a filter at rest for samples at rateHz.
func NewVelocityFilter(rateHz float64) VelocityFilter {
	w := 2 * math.Pi * HighPassHz
	k := w / math.Tan(w/(2*rateHz)) // pre-warped 2/T
	var f VelocityFilter
	// s/(s+ω) → K(1−z⁻¹) / ((K+ω) + (ω−K)z⁻¹)
	f.b0 = k / (k + w)
	f.a1 = (w - k) / (k + w)
	// s/(s²+ωs+ω²) → K(1−z⁻²) / ((K²+ωK+ω²) + 2(ω²−K²)z⁻¹ + (K²−ωK+ω²)z⁻²)
	a0 := k*k + w*k + w*w
	f.c0 = k / a0
	f.d1 = 2 * (w*w - k*k) / a0
	f.d2 = (k*k - w*k + w*w) / a0
	return f
}

// Step filters one acceleration sample and returns the velocity.
func (f *VelocityFilter) Step(a float64) float64 {
	hp := f.b0*(a-f.x1) - f.a1*f.y1
	f.x1, f.y1 = a, hp
	v := f.c0*(hp-f.u2) - f.d1*f.v1 - f.d2*f.v2
	f.u2, f.u1 = f.u1, hp
	f.v2, f.v1 = f.v1, v
	return v
}

// Package iir holds the recursive filters the station measurements share.
package iir

import "math"

// HighPass is a 2nd-order Butterworth high-pass, s²/(s² + √2·ωc·s + ωc²),
// discretised with the bilinear transform pre-warped so the corner sits
// exactly at its frequency. The zero value is not usable; call NewHighPass.
type HighPass struct {
	b0, a1, a2 float64 // b1 = −2·b0, b2 = b0
	x1, x2     float64 // the previous two inputs
	y1, y2     float64 // the previous two outputs
}

// NewHighPass returns the filter for a corner and a sample rate, at rest.
func NewHighPass(cornerHz, rateHz float64) HighPass {
	w := 2 * math.Pi * cornerHz
	k := w / math.Tan(w/(2*rateHz)) // pre-warped 2/Δt
	a0 := k*k + math.Sqrt2*w*k + w*w
	return HighPass{
		b0: k * k / a0,
		a1: 2 * (w*w - k*k) / a0,
		a2: (k*k - math.Sqrt2*w*k + w*w) / a0,
	}
}

// Prime puts the filter in the steady state of an input that has always
// been a: its output is zero and stays zero while the input stays at a. A
// sensor's offset is then removed from the first sample on, instead of
// ringing through the filter as a step.
func (f *HighPass) Prime(a float64) {
	f.x1, f.x2, f.y1, f.y2 = a, a, 0, 0
}

// Step filters one sample. The numerator is written as b0·(x − 2x₁ + x₂)
// so that a constant input gives exactly zero.
func (f *HighPass) Step(x float64) float64 {
	y := f.b0*(x-2*f.x1+f.x2) - f.a1*f.y1 - f.a2*f.y2
	f.x2, f.x1 = f.x1, x
	f.y2, f.y1 = f.y1, y
	return y
}

// Finite reports whether the filter's state holds only finite numbers: an
// infinite input poisons it for good, and its owner restarts it.
func (f *HighPass) Finite() bool {
	s := f.y1 + f.y2
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

package fft

import (
	"fmt"
	"math"
)

// RealPlan transforms real sequences of even length n through a complex
// transform of length n/2, half the work of transforming them as complex
// numbers with zero imaginary parts.
type RealPlan struct {
	n    int
	half *Plan
	tw   []complex128 // exp(−2πi·k/n), k < n/2
}

// NewRealPlan returns a plan for real sequences of length n (even, ≥ 2).
func NewRealPlan(n int) (*RealPlan, error) {
	if n < 2 || n%2 != 0 {
		return nil, fmt.Errorf("real fft length %d: must be even and at least 2", n)
	}
	half, err := NewPlan(n / 2)
	if err != nil {
		return nil, err
	}
	rp := &RealPlan{n: n, half: half, tw: make([]complex128, n/2)}
	for k := range rp.tw {
		rp.tw[k] = cis(-2 * math.Pi * float64(k) / float64(n))
	}
	return rp, nil
}

// Len is the length of the real sequences.
func (rp *RealPlan) Len() int { return rp.n }

// WorkLen is the scratch length Forward and Inverse need.
func (rp *RealPlan) WorkLen() int { return rp.n/2 + rp.half.WorkLen() }

// Forward computes the non-negative-frequency half X[0..n/2] (n/2+1 lines)
// of the transform of x; the other half is its mirror conjugate.
func (rp *RealPlan) Forward(x []float64, spec, work []complex128) {
	h := rp.n / 2
	if len(x) != rp.n || len(spec) != h+1 || len(work) < rp.WorkLen() {
		panic(fmt.Sprintf("fft: real forward got %d samples, %d lines, %d scratch; plan needs %d, %d, %d",
			len(x), len(spec), len(work), rp.n, h+1, rp.WorkLen()))
	}
	z, scratch := work[:h], work[h:]
	for j := range z {
		z[j] = complex(x[2*j], x[2*j+1])
	}
	rp.half.Forward(z, scratch)
	// z holds E + i·O, the transforms of the even and odd samples.
	for k := 0; k <= h; k++ {
		zk := z[k%h]
		zc := z[(h-k)%h]
		zc = complex(real(zc), -imag(zc))
		e := (zk + zc) * 0.5
		o := mulNegI(zk-zc) * 0.5
		w := complex128(-1) // exp(−iπ), at k = h
		if k < h {
			w = rp.tw[k]
		}
		spec[k] = e + w*o
	}
}

// Inverse rebuilds x from the half spectrum Forward produced (including the
// 1/n scaling). spec is used as scratch and left undefined.
func (rp *RealPlan) Inverse(spec []complex128, x []float64, work []complex128) {
	h := rp.n / 2
	if len(x) != rp.n || len(spec) != h+1 || len(work) < rp.WorkLen() {
		panic(fmt.Sprintf("fft: real inverse got %d lines, %d samples, %d scratch; plan needs %d, %d, %d",
			len(spec), len(x), len(work), h+1, rp.n, rp.WorkLen()))
	}
	z, scratch := work[:h], work[h:]
	for k := 0; k < h; k++ {
		xk := spec[k]
		xc := spec[h-k]
		xc = complex(real(xc), -imag(xc))
		e := (xk + xc) * 0.5
		w := rp.tw[k]
		o := (xk - xc) * complex(real(w), -imag(w)) * 0.5
		// Z = E + i·O, conjugated for the inverse-by-forward trick.
		zk := e + complex(-imag(o), real(o))
		z[k] = complex(real(zk), -imag(zk))
	}
	rp.half.Forward(z, scratch)
	scale := 1 / float64(h)
	for j, v := range z {
		x[2*j] = real(v) * scale
		x[2*j+1] = -imag(v) * scale
	}
}

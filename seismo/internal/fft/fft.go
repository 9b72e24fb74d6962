// Package fft computes discrete Fourier transforms of any length.
//
// A Plan is immutable once built and may be shared between goroutines; each
// caller brings its own scratch buffer (Plan.WorkLen elements), so a hot loop
// transforms without allocating. Lengths made of the factors 2, 3, 4 and 5 (and
// other small primes) use a mixed-radix Stockham autosort transform; a length
// with a prime factor above maxRadix goes through Bluestein's chirp-z algorithm
// on a power-of-two plan, so every length costs O(n log n).
//
// Conventions: Forward computes X[k] = Σ x[j]·exp(−2πi·jk/n) in place;
// Inverse computes x[j] = (1/n)·Σ X[k]·exp(+2πi·jk/n) in place.
package fft

import (
	"fmt"
	"math"
	"math/bits"
)

// maxRadix is the largest prime handled by the generic O(p²) butterfly.
// Beyond it Bluestein's algorithm is cheaper.
const maxRadix = 31

// Plan holds the precomputed twiddle factors for one transform length.
type Plan struct {
	n      int
	stages []stage
	blue   *bluestein
}

// stage is one Stockham pass: radix p over sub-transforms of length span,
// repeated stride times.
type stage struct {
	p      int
	stride int          // s: product of the radices of earlier stages
	m      int          // span / p
	tw     []complex128 // tw[j*(p-1)+k-1] = exp(−2πi·j·k/span)
	roots  []complex128 // exp(−2πi·r/p), generic radix only
}

// NewPlan returns a plan for transforms of length n (n ≥ 1).
func NewPlan(n int) (*Plan, error) {
	if n < 1 {
		return nil, fmt.Errorf("fft length %d: must be positive", n)
	}
	factors := factorize(n)
	if factors[len(factors)-1] > maxRadix {
		b, err := newBluestein(n)
		if err != nil {
			return nil, err
		}
		return &Plan{n: n, blue: b}, nil
	}
	p := &Plan{n: n}
	span, stride := n, 1
	for _, r := range factors {
		st := stage{p: r, stride: stride, m: span / r}
		st.tw = make([]complex128, st.m*(r-1))
		for j := 0; j < st.m; j++ {
			for k := 1; k < r; k++ {
				st.tw[j*(r-1)+k-1] = cis(-2 * math.Pi * float64(j*k) / float64(span))
			}
		}
		if r != 2 && r != 3 && r != 4 && r != 5 {
			st.roots = make([]complex128, r)
			for i := range st.roots {
				st.roots[i] = cis(-2 * math.Pi * float64(i) / float64(r))
			}
		}
		p.stages = append(p.stages, st)
		span /= r
		stride *= r
	}
	return p, nil
}

// MustPlan is NewPlan for lengths known to be valid at compile time.
func MustPlan(n int) *Plan {
	p, err := NewPlan(n)
	if err != nil {
		panic(err)
	}
	return p
}

// Len is the transform length.
func (p *Plan) Len() int { return p.n }

// WorkLen is the scratch length Forward and Inverse need.
func (p *Plan) WorkLen() int {
	if p.blue != nil {
		return 2 * p.blue.m
	}
	return p.n
}

// Forward transforms x (length Len) in place, using work (length ≥ WorkLen) as
// scratch.
func (p *Plan) Forward(x, work []complex128) {
	if len(x) != p.n || len(work) < p.WorkLen() {
		panic(fmt.Sprintf("fft: got %d samples and %d scratch, plan needs %d and %d",
			len(x), len(work), p.n, p.WorkLen()))
	}
	if p.blue != nil {
		p.blue.forward(x, work)
		return
	}
	src, dst := x, work[:p.n]
	for i := range p.stages {
		p.stages[i].run(src, dst)
		src, dst = dst, src
	}
	if len(p.stages)%2 == 1 {
		copy(x, src)
	}
}

// Inverse undoes Forward, including the 1/n scaling.
func (p *Plan) Inverse(x, work []complex128) {
	for i, v := range x {
		x[i] = complex(real(v), -imag(v))
	}
	p.Forward(x, work)
	scale := 1 / float64(p.n)
	for i, v := range x {
		x[i] = complex(real(v)*scale, -imag(v)*scale)
	}
}

func (st *stage) run(x, y []complex128) {
	switch st.p {
	case 4:
		st.radix4(x, y)
	case 2:
		st.radix2(x, y)
	case 3:
		st.radix3(x, y)
	case 5:
		st.radix5(x, y)
	default:
		st.generic(x, y)
	}
}

// mulNegI returns −i·z without a full complex multiplication.
func mulNegI(z complex128) complex128 { return complex(imag(z), -real(z)) }

func (st *stage) radix2(x, y []complex128) {
	s, m := st.stride, st.m
	for j := 0; j < m; j++ {
		w := st.tw[j]
		in0 := x[s*j : s*j+s]
		in1 := x[s*(j+m) : s*(j+m)+s]
		out := y[s*2*j : s*2*j+2*s]
		in1 = in1[:len(in0)]
		o0, o1 := out[:len(in0)], out[s:s+len(in0)]
		for q := range in0 {
			a, b := in0[q], in1[q]
			o0[q] = a + b
			o1[q] = (a - b) * w
		}
	}
}

func (st *stage) radix4(x, y []complex128) {
	s, m := st.stride, st.m
	if s == 1 {
		// First pass: one butterfly per j, so skip the inner loop machinery.
		in0, in1, in2, in3 := x[:m], x[m:2*m], x[2*m:3*m], x[3*m:4*m]
		tws := st.tw[:3*m]
		for j := range in0 {
			tw := tws[3*j : 3*j+3]
			a0, a1, a2, a3 := in0[j], in1[j], in2[j], in3[j]
			t0, t1 := a0+a2, a0-a2
			t2, t3 := a1+a3, mulNegI(a1-a3)
			o := y[4*j : 4*j+4]
			o[0] = t0 + t2
			o[1] = (t1 + t3) * tw[0]
			o[2] = (t0 - t2) * tw[1]
			o[3] = (t1 - t3) * tw[2]
		}
		return
	}
	for j := 0; j < m; j++ {
		tw := st.tw[3*j : 3*j+3]
		w1, w2, w3 := tw[0], tw[1], tw[2]
		in0 := x[s*j : s*j+s]
		in1 := x[s*(j+m) : s*(j+m)+s]
		in2 := x[s*(j+2*m) : s*(j+2*m)+s]
		in3 := x[s*(j+3*m) : s*(j+3*m)+s]
		out := y[s*4*j : s*4*j+4*s]
		o0, o1, o2, o3 := out[:s], out[s:2*s], out[2*s:3*s], out[3*s:4*s]
		// Equal lengths, stated so the compiler drops the bounds checks.
		in1, in2, in3 = in1[:len(in0)], in2[:len(in0)], in3[:len(in0)]
		o0, o1, o2, o3 = o0[:len(in0)], o1[:len(in0)], o2[:len(in0)], o3[:len(in0)]
		if j == 0 {
			for q := range in0 {
				a0, a1, a2, a3 := in0[q], in1[q], in2[q], in3[q]
				t0, t1 := a0+a2, a0-a2
				t2, t3 := a1+a3, mulNegI(a1-a3)
				o0[q] = t0 + t2
				o1[q] = t1 + t3
				o2[q] = t0 - t2
				o3[q] = t1 - t3
			}
			continue
		}
		for q := range in0 {
			a0, a1, a2, a3 := in0[q], in1[q], in2[q], in3[q]
			t0, t1 := a0+a2, a0-a2
			t2, t3 := a1+a3, mulNegI(a1-a3)
			o0[q] = t0 + t2
			o1[q] = (t1 + t3) * w1
			o2[q] = (t0 - t2) * w2
			o3[q] = (t1 - t3) * w3
		}
	}
}

func (st *stage) radix3(x, y []complex128) {
	sn := -math.Sqrt(3) / 2 // imaginary part of exp(−2πi/3); its real part is −1/2
	s, m := st.stride, st.m
	for j := 0; j < m; j++ {
		w1, w2 := st.tw[2*j], st.tw[2*j+1]
		in0 := x[s*j : s*j+s]
		in1 := x[s*(j+m) : s*(j+m)+s]
		in2 := x[s*(j+2*m) : s*(j+2*m)+s]
		out := y[s*3*j : s*3*j+3*s]
		o0, o1, o2 := out[:s], out[s:2*s], out[2*s:]
		in1, in2 = in1[:len(in0)], in2[:len(in0)]
		o0, o1, o2 = o0[:len(in0)], o1[:len(in0)], o2[:len(in0)]
		for q := range in0 {
			a0, a1, a2 := in0[q], in1[q], in2[q]
			t1, t2 := a1+a2, a1-a2
			base := complex(real(a0)-0.5*real(t1), imag(a0)-0.5*imag(t1))
			rot := complex(-sn*imag(t2), sn*real(t2)) // i·sn·t2
			o0[q] = a0 + t1
			o1[q] = (base + rot) * w1
			o2[q] = (base - rot) * w2
		}
	}
}

func (st *stage) radix5(x, y []complex128) {
	c1, c2 := math.Cos(2*math.Pi/5), math.Cos(4*math.Pi/5)
	s1, s2 := math.Sin(2*math.Pi/5), math.Sin(4*math.Pi/5)
	s, m := st.stride, st.m
	for j := 0; j < m; j++ {
		tw := st.tw[4*j : 4*j+4]
		in0 := x[s*j : s*j+s]
		in1 := x[s*(j+m) : s*(j+m)+s]
		in2 := x[s*(j+2*m) : s*(j+2*m)+s]
		in3 := x[s*(j+3*m) : s*(j+3*m)+s]
		in4 := x[s*(j+4*m) : s*(j+4*m)+s]
		out := y[s*5*j : s*5*j+5*s]
		o0, o1, o2, o3, o4 := out[:s], out[s:2*s], out[2*s:3*s], out[3*s:4*s], out[4*s:]
		in1, in2, in3, in4 = in1[:len(in0)], in2[:len(in0)], in3[:len(in0)], in4[:len(in0)]
		o0, o1, o2, o3, o4 = o0[:len(in0)], o1[:len(in0)], o2[:len(in0)], o3[:len(in0)], o4[:len(in0)]
		for q := range in0 {
			a0 := in0[q]
			t1, t2 := in1[q]+in4[q], in2[q]+in3[q]
			t3, t4 := in1[q]-in4[q], in2[q]-in3[q]
			p1 := complex(real(a0)+c1*real(t1)+c2*real(t2), imag(a0)+c1*imag(t1)+c2*imag(t2))
			p2 := complex(real(a0)+c2*real(t1)+c1*real(t2), imag(a0)+c2*imag(t1)+c1*imag(t2))
			// q1 = −i·(s1·t3 + s2·t4), q2 = −i·(s2·t3 − s1·t4)
			q1 := complex(s1*imag(t3)+s2*imag(t4), -(s1*real(t3) + s2*real(t4)))
			q2 := complex(s2*imag(t3)-s1*imag(t4), -(s2*real(t3) - s1*real(t4)))
			o0[q] = a0 + t1 + t2
			o1[q] = (p1 + q1) * tw[0]
			o2[q] = (p2 + q2) * tw[1]
			o3[q] = (p2 - q2) * tw[2]
			o4[q] = (p1 - q1) * tw[3]
		}
	}
}

// generic is the direct O(p²) butterfly for the remaining small primes.
func (st *stage) generic(x, y []complex128) {
	var a, b [maxRadix]complex128
	p, s, m := st.p, st.stride, st.m
	for j := 0; j < m; j++ {
		for q := 0; q < s; q++ {
			for r := 0; r < p; r++ {
				a[r] = x[q+s*(j+r*m)]
			}
			for k := 0; k < p; k++ {
				var sum complex128
				for r := 0; r < p; r++ {
					sum += a[r] * st.roots[(r*k)%p]
				}
				b[k] = sum
			}
			o := q + s*p*j
			y[o] = b[0]
			for k := 1; k < p; k++ {
				y[o+k*s] = b[k] * st.tw[j*(p-1)+k-1]
			}
		}
	}
}

// factorize splits n into radices: fours first (fewest passes), then primes in
// increasing order. For n = 1 it returns [1], a single copying pass.
func factorize(n int) []int {
	var f []int
	for n%4 == 0 {
		f = append(f, 4)
		n /= 4
	}
	for d := 2; d*d <= n; d++ {
		for n%d == 0 {
			f = append(f, d)
			n /= d
		}
	}
	if n > 1 {
		f = append(f, n)
	}
	if len(f) == 0 {
		f = []int{1}
	}
	return f
}

func cis(theta float64) complex128 {
	s, c := math.Sincos(theta)
	return complex(c, s)
}

// bluestein evaluates a length-n DFT as a convolution of length m (a power of
// two ≥ 2n−1).
type bluestein struct {
	n, m  int
	chirp []complex128 // exp(−iπ·j²/n), j < n
	bfft  []complex128 // FFT of the conjugate chirp, wrapped to length m
	inner *Plan
}

func newBluestein(n int) (*bluestein, error) {
	m := 1 << bits.Len(uint(2*n-2))
	inner, err := NewPlan(m)
	if err != nil {
		return nil, err
	}
	b := &bluestein{n: n, m: m, inner: inner, chirp: make([]complex128, n), bfft: make([]complex128, m)}
	for j := 0; j < n; j++ {
		// j² mod 2n keeps the angle small and exact for large j.
		jj := (j * j) % (2 * n)
		b.chirp[j] = cis(-math.Pi * float64(jj) / float64(n))
	}
	b.bfft[0] = complex(real(b.chirp[0]), -imag(b.chirp[0]))
	for j := 1; j < n; j++ {
		c := complex(real(b.chirp[j]), -imag(b.chirp[j]))
		b.bfft[j] = c
		b.bfft[m-j] = c
	}
	work := make([]complex128, m)
	inner.Forward(b.bfft, work)
	return b, nil
}

func (b *bluestein) forward(x, work []complex128) {
	a, scratch := work[:b.m], work[b.m:2*b.m]
	for j := 0; j < b.n; j++ {
		a[j] = x[j] * b.chirp[j]
	}
	clear(a[b.n:])
	b.inner.Forward(a, scratch)
	for i := range a {
		a[i] *= b.bfft[i]
	}
	b.inner.Inverse(a, scratch)
	for k := 0; k < b.n; k++ {
		x[k] = a[k] * b.chirp[k]
	}
}

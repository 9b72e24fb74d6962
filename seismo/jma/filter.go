package jma

import (
	"math"
	"math/bits"
	"sync"

	"shindo.dev/seismo/internal/fft"
)

// Weight is JMA's filter gain H(f) = F1·F2·F3 at frequency f in Hz (the sign
// of f is ignored; H(0) = 0).
func Weight(f float64) float64 {
	f = math.Abs(f)
	if f == 0 {
		return 0
	}
	f1 := math.Sqrt(1 / f)
	y := f / 10
	y2 := y * y
	// Horner form of 1 + 0.694y² + 0.241y⁴ + 0.0557y⁶ + 0.009664y⁸ + 0.00134y¹⁰ + 0.000155y¹².
	poly := 1 + y2*(0.694+y2*(0.241+y2*(0.0557+y2*(0.009664+y2*(0.00134+y2*0.000155)))))
	f2 := 1 / math.Sqrt(poly)
	x := f / 0.5
	f3 := math.Sqrt(1 - math.Exp(-x*x*x))
	return f1 * f2 * f3
}

// spectralFilter applies H(f) to components on a grid of n lines at one
// sample rate. It is immutable and shared; callers bring scratch buffers.
type spectralFilter struct {
	plan   *fft.Plan
	weight []float64 // H at line k, already divided by n (the inverse scaling)

	real *fft.RealPlan // nil for odd n
	half []float64     // H at lines 0..n/2, unscaled (RealPlan scales)
}

func newSpectralFilter(n int, rateHz float64) (*spectralFilter, error) {
	plan, err := fft.NewPlan(n)
	if err != nil {
		return nil, err
	}
	f := &spectralFilter{plan: plan, weight: make([]float64, n)}
	df := rateHz / float64(n)
	for k := range f.weight {
		line := k
		if k > n/2 {
			line = k - n // negative frequencies: H is even
		}
		f.weight[k] = Weight(float64(line)*df) / float64(n)
	}
	if n%2 == 0 {
		if f.real, err = fft.NewRealPlan(n); err != nil {
			return nil, err
		}
		f.half = make([]float64, n/2+1)
		for k := range f.half {
			f.half[k] = Weight(float64(k) * df)
		}
	}
	return f, nil
}

// workLen is the scratch both apply and applyReal need.
func (f *spectralFilter) workLen() int {
	w := f.plan.WorkLen()
	if f.real != nil {
		w = max(w, f.real.WorkLen())
	}
	return w
}

// apply filters two real signals packed as re + i·im in place. Because H is
// real and even, filtering the packed signal filters each part separately.
// The inverse transform is done as a forward transform of the conjugate
// (cheaper than a separate inverse pass), so on return the imaginary part is
// the negated filtered signal: callers only square it.
func (f *spectralFilter) apply(x, work []complex128) {
	f.plan.Forward(x, work)
	for k, v := range x {
		w := f.weight[k]
		x[k] = complex(real(v)*w, -imag(v)*w)
	}
	f.plan.Forward(x, work)
}

// applyReal filters one real signal in place through the half-length real
// transform; spec (n/2+1 lines) is scratch. Only for even n.
func (f *spectralFilter) applyReal(x []float64, spec, work []complex128) {
	f.real.Forward(x, spec, work)
	for k, w := range f.half {
		spec[k] *= complex(w, 0)
	}
	f.real.Inverse(spec, x, work)
}

// filterCache shares the filters of power-of-two lengths, the only lengths
// that recur (padded records and real-time windows). Other lengths are built
// per call so arbitrary record lengths cannot grow the cache without bound.
var filterCache struct {
	sync.Mutex
	m map[filterKey]*spectralFilter
}

type filterKey struct {
	n    int
	rate float64
}

func cachedFilter(n int, rateHz float64) (*spectralFilter, error) {
	if bits.OnesCount(uint(n)) != 1 {
		return newSpectralFilter(n, rateHz)
	}
	key := filterKey{n, rateHz}
	filterCache.Lock()
	defer filterCache.Unlock()
	if f, ok := filterCache.m[key]; ok {
		return f, nil
	}
	f, err := newSpectralFilter(n, rateHz)
	if err != nil {
		return nil, err
	}
	if filterCache.m == nil {
		filterCache.m = make(map[filterKey]*spectralFilter)
	}
	filterCache.m[key] = f
	return f, nil
}

// nextPow2 returns the smallest power of two ≥ n.
func nextPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// topK finds the k-th largest of a stream of values with a min-heap of the k
// largest seen so far. Most values of a long record lose against the root in
// one comparison, so a pass costs little more than reading the values.
type topK struct {
	heap []float64
	k    int
}

func (t *topK) reset(k int) {
	t.k = k
	t.heap = t.heap[:0]
}

func (t *topK) add(v float64) {
	h := t.heap
	if len(h) < t.k {
		h = append(h, v)
		// Sift up.
		i := len(h) - 1
		for i > 0 {
			p := (i - 1) / 2
			if h[p] <= h[i] {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		t.heap = h
		return
	}
	if v <= h[0] {
		return
	}
	h[0] = v
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		s := l
		if r := l + 1; r < n && h[r] < h[l] {
			s = r
		}
		if h[i] <= h[s] {
			break
		}
		h[i], h[s] = h[s], h[i]
		i = s
	}
}

// kth returns the k-th largest value added, or false if fewer than k were.
func (t *topK) kth() (float64, bool) {
	if len(t.heap) < t.k || t.k == 0 {
		return 0, false
	}
	return t.heap[0], true
}

package fft

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

func TestRealPlanMatchesComplex(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4, 6, 10, 16, 30, 64, 1000, 4096} {
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		x := make([]float64, n)
		cx := make([]complex128, n)
		for i := range x {
			x[i] = rng.NormFloat64()
			cx[i] = complex(x[i], 0)
		}
		want := naiveDFT(cx)
		rp, err := NewRealPlan(n)
		if err != nil {
			t.Fatal(err)
		}
		spec := make([]complex128, n/2+1)
		work := make([]complex128, rp.WorkLen())
		rp.Forward(x, spec, work)
		for k := range spec {
			if d := cmplx.Abs(spec[k] - want[k]); d > 1e-8*float64(n) {
				t.Fatalf("n=%d: X[%d] = %v, want %v", n, k, spec[k], want[k])
			}
		}
		back := make([]float64, n)
		rp.Inverse(spec, back, work)
		for i := range x {
			if math.Abs(back[i]-x[i]) > 1e-9 {
				t.Fatalf("n=%d: inverse x[%d] = %v, want %v", n, i, back[i], x[i])
			}
		}
	}
	if _, err := NewRealPlan(7); err == nil {
		t.Error("odd length: want error")
	}
}

package fft

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strconv"
	"testing"
)

func naiveDFT(x []complex128) []complex128 {
	n := len(x)
	out := make([]complex128, n)
	for k := range out {
		var sum complex128
		for j, v := range x {
			sum += v * cis(-2*math.Pi*float64((j*k)%n)/float64(n))
		}
		out[k] = sum
	}
	return out
}

func TestForwardMatchesNaiveDFT(t *testing.T) {
	t.Parallel()
	lengths := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 25, 30, 31, 37, 49, 60, 64, 97, 120, 128, 210, 243, 256, 500, 1000, 1024, 1031}
	for _, n := range lengths {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		x := make([]complex128, n)
		for i := range x {
			x[i] = complex(rng.NormFloat64(), rng.NormFloat64())
		}
		want := naiveDFT(x)
		p, err := NewPlan(n)
		if err != nil {
			t.Fatalf("NewPlan(%d): %v", n, err)
		}
		got := append([]complex128(nil), x...)
		work := make([]complex128, p.WorkLen())
		p.Forward(got, work)
		tol := 1e-9 * math.Sqrt(float64(n)) * float64(n)
		for k := range want {
			if d := cmplx.Abs(got[k] - want[k]); d > tol {
				t.Fatalf("n=%d: X[%d] = %v, want %v (|diff| %g)", n, k, got[k], want[k], d)
			}
		}
		p.Inverse(got, work)
		for k := range x {
			if d := cmplx.Abs(got[k] - x[k]); d > 1e-9 {
				t.Fatalf("n=%d: inverse x[%d] = %v, want %v", n, k, got[k], x[k])
			}
		}
	}
}

func TestLargePrimeUsesBluestein(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(30011)
	if err != nil {
		t.Fatal(err)
	}
	if p.blue == nil {
		t.Fatal("30011 is prime: want the Bluestein path")
	}
	// A unit impulse at j transforms to exp(−2πi·jk/n): check a few lines.
	x := make([]complex128, p.Len())
	x[7] = 1
	p.Forward(x, make([]complex128, p.WorkLen()))
	for _, k := range []int{0, 1, 1234, 30010} {
		want := cis(-2 * math.Pi * float64((7*k)%30011) / 30011)
		if d := cmplx.Abs(x[k] - want); d > 1e-9 {
			t.Errorf("X[%d] = %v, want %v", k, x[k], want)
		}
	}
}

func TestNewPlanRejectsBadLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -4} {
		if _, err := NewPlan(n); err == nil {
			t.Errorf("NewPlan(%d): want error", n)
		}
	}
}

func BenchmarkForward(b *testing.B) {
	for _, n := range []int{2048, 4096, 8192, 6000} {
		p := MustPlan(n)
		x := make([]complex128, n)
		for i := range x {
			x[i] = complex(float64(i%7), float64(i%3))
		}
		work := make([]complex128, p.WorkLen())
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				p.Forward(x, work)
			}
		})
	}
}

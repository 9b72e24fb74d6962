package jma

import (
	"math"
	"testing"
)

func TestPGA(t *testing.T) {
	t.Parallel()
	got := PGA([]float64{1, -3, 0}, []float64{0, 4, 1}, []float64{2, 0, 0})
	if got != 5 {
		t.Errorf("PGA = %v, want 5", got)
	}
}

// TestVelocityFilterIntegratesSines checks the gain of the velocity filter
// against 1/(2πf) times the Butterworth high-pass magnitude.
func TestVelocityFilterIntegratesSines(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{50, 100} {
		for _, f := range []float64{0.1, 0.2, 0.5, 1, 2, 5} {
			vf := NewVelocityFilter(rate)
			const amp = 100.0 // gal
			n := int(120 * rate)
			var peak float64
			for i := 0; i < n; i++ {
				v := vf.Step(amp * math.Sin(2*math.Pi*f*float64(i)/rate))
				if i > n/2 { // past the transient
					peak = max(peak, math.Abs(v))
				}
			}
			r := f / HighPassHz
			butter := r * r * r / math.Sqrt(1+math.Pow(r, 6))
			// The trapezoidal rule integrates with gain θ·cot θ (θ = πf/rate,
			// −3 % at 5 Hz and 50 Hz), inherent to the bilinear transform.
			theta := math.Pi * f / rate
			want := amp / (2 * math.Pi * f) * butter * theta / math.Tan(theta)
			if rel := math.Abs(peak-want) / want; rel > 0.01 {
				t.Errorf("%g Hz at %g Hz: peak velocity %.4f, want %.4f (%.2f %%)", f, rate, peak, want, 100*rel)
			}
		}
	}
}

func TestVelocityFilterIgnoresOffset(t *testing.T) {
	t.Parallel()
	vf := NewVelocityFilter(50)
	var last float64
	for i := 0; i < 50*120; i++ {
		last = vf.Step(25) // a 25 gal sensor offset
	}
	if math.Abs(last) > 1e-3 {
		t.Errorf("velocity after 2 min of constant offset = %g cm/s, want ≈ 0", last)
	}
}

func TestPGVOfRecords(t *testing.T) {
	t.Parallel()
	// A 1 Hz circular motion of 100 gal: velocity magnitude 100/(2π) cm/s.
	const rate = 100.0
	n := int(60 * rate)
	ns, ew, ud := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range ns {
		s, c := math.Sincos(2 * math.Pi * float64(i) / rate)
		ns[i], ew[i] = 100*c, 100*s
	}
	got := PGV(rate, ns, ew, ud)
	want := 100 / (2 * math.Pi)
	// The abrupt start adds a transient of the size of the motion itself.
	if got < want || got > 1.5*want {
		t.Errorf("PGV = %.3f, want between %.3f and %.3f", got, want, 1.5*want)
	}
}

package resample

import (
	"math"
	"testing"
)

func TestHalvePassesLowAndStopsAliases(t *testing.T) {
	t.Parallel()
	const rate, n = 100.0, 4000
	tests := []struct {
		freq     float64
		wantGain float64
		tol      float64
	}{
		{1, 1, 1e-3},
		{10, 1, 1e-3},
		{20, 1, 2e-2},
		{30, 0, 1e-3}, // would alias to 20 Hz at 50 Hz
		{45, 0, 1e-3},
	}
	for _, tt := range tests {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Sin(2 * math.Pi * tt.freq * float64(i) / rate)
		}
		y := Halve(x)
		if len(y) != n/2 {
			t.Fatalf("len = %d, want %d", len(y), n/2)
		}
		// Amplitude from the RMS (√2·rms for a sine; samples at 50 Hz rarely
		// hit the crest) away from the edges, where the filter sees zeros.
		mid := y[200 : len(y)-200]
		var ss float64
		for _, v := range mid {
			ss += v * v
		}
		gain := math.Sqrt(2 * ss / float64(len(mid)))
		if math.Abs(gain-tt.wantGain) > tt.tol {
			t.Errorf("%g Hz: gain %.5f, want %g ± %g", tt.freq, gain, tt.wantGain, tt.tol)
		}
	}
}

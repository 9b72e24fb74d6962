// Package resample changes the sample rate of acceleration records.
//
// Halve turns a record into one at half the rate the proper way: a
// zero-phase low-pass below the new Nyquist frequency first (so energy above
// it cannot alias into the band that intensity measures), then every second
// sample. It is how 100 Hz strong-motion records are replayed through a 50 Hz
// station.
package resample

import "math"

// taps is the length of the anti-alias filter: long enough for a transition
// band of about 2.5 % of the input rate with a Blackman window (stopband
// below −70 dB).
const taps = 201

// cutoff is the filter's half-amplitude point as a fraction of the input
// rate: 0.225 (22.5 Hz at 100 Hz) keeps the pass band flat to about 21 Hz and
// reaches the stopband before the new Nyquist frequency (0.25, 25 Hz).
const cutoff = 0.225

var kernel = lowPass(taps, cutoff)

// lowPass builds a windowed-sinc low-pass with unit gain at 0 Hz.
func lowPass(n int, fc float64) []float64 {
	h := make([]float64, n)
	mid := (n - 1) / 2
	var sum float64
	for i := range h {
		x := float64(i - mid)
		v := 2 * fc
		if x != 0 {
			v = math.Sin(2*math.Pi*fc*x) / (math.Pi * x)
		}
		// Blackman window.
		w := 0.42 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n-1)) + 0.08*math.Cos(4*math.Pi*float64(i)/float64(n-1))
		h[i] = v * w
		sum += h[i]
	}
	for i := range h {
		h[i] /= sum
	}
	return h
}

// Halve low-passes x and keeps every second sample (x[0], x[2], …). The
// filter is centred (zero phase), and the record is taken as zero outside
// its ends.
func Halve(x []float64) []float64 {
	mid := (taps - 1) / 2
	out := make([]float64, (len(x)+1)/2)
	for o := range out {
		c := 2 * o
		var s float64
		lo := max(0, c-mid)
		hi := min(len(x)-1, c+mid)
		for j := lo; j <= hi; j++ {
			s += x[j] * kernel[j-c+mid]
		}
		out[o] = s
	}
	return out
}

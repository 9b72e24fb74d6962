package lpgm

import (
	"encoding/binary"
	"math"
	"testing"
)

// floats reads data as little-endian float64s, so the fuzzer reaches every
// bit pattern: NaNs, infinities, subnormals, huge values.
func floats(data []byte) []float64 {
	out := make([]float64, len(data)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
	}
	return out
}

// encode is the inverse of floats, for seeds.
func encode(xs ...float64) []byte {
	b := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// FuzzTracker feeds a 50 Hz tracker arbitrary samples (NS, EW alternate in
// data), repeated to make the stream long enough for restarts and decays,
// taking a peak every frame: it must never panic and never report NaN, an
// infinity or a negative peak.
func FuzzTracker(f *testing.F) {
	f.Add(encode(0, 0, 1, -1, 100, 50, -300, 20), uint8(10))
	f.Add(encode(math.NaN(), 0, 0, math.Inf(1), 1e300, -1e300), uint8(60))
	f.Add(encode(MaxGal, -MaxGal, -MaxGal, MaxGal), uint8(200))
	f.Add(encode(5e-324, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64), uint8(3))
	f.Add(encode(17, 17, 17.001, 16.999), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, repeat uint8) {
		tr, err := NewTracker(50, Config{})
		if err != nil {
			t.Fatal(err)
		}
		xs := floats(data)
		n := 0
		for range int(repeat) + 1 {
			for i := 0; i+1 < len(xs); i += 2 {
				if p := tr.Add(xs[i], xs[i+1]); !finite(p) || p < 0 {
					t.Fatalf("Add(%v, %v) = %v", xs[i], xs[i+1], p)
				}
				if n++; n%frameSamples == 0 {
					if p := tr.TakePeak(); !finite(p) || p < 0 {
						t.Fatalf("frame peak %v", p)
					}
				}
			}
		}
		r := tr.Running()
		if !finite(r.SvaCms) || !finite(tr.Max()) || r.SvaCms != tr.Max() {
			t.Fatalf("running Sva %v, max %v", r.SvaCms, tr.Max())
		}
		for i := range NumPeriods {
			if !finite(r.NS[i]) || !finite(r.EW[i]) {
				t.Fatalf("running spectrum at %g s: %v %v", Period(i), r.NS[i], r.EW[i])
			}
		}
		if c := r.Class(); c < 0 || c > 4 {
			t.Fatalf("class %d", c)
		}
	})
}

// FuzzStation computes the offline spectra of arbitrary records at
// arbitrary rates: either an error, or finite spectra whose maximum is
// where Result says.
func FuzzStation(f *testing.F) {
	f.Add(encode(0, 0, 1, -1, 100, 50, -300, 20), 50.0)
	f.Add(encode(0, 0, 1, -1, 100, 50, -300), 100.0)
	f.Add(encode(math.NaN(), 0, 0, 1), 50.0)
	f.Add(encode(MaxGal, -MaxGal, -MaxGal, MaxGal), 1000.0)
	f.Add(encode(1, 2, 3, 4), 10.0)
	f.Add(encode(1, 2), math.Inf(1))
	f.Fuzz(func(t *testing.T, data []byte, rate float64) {
		xs := floats(data)
		// NS and EW are the two halves; an odd count makes them mismatch.
		ns, ew := xs[:len(xs)/2], xs[len(xs)/2:]
		r, err := Station(rate, ns, ew)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !finite(r.SvaCms) || r.SvaCms < 0 {
			t.Fatalf("Sva %v", r.SvaCms)
		}
		spec := r.NS
		if r.Component == EW {
			spec = r.EW
		}
		if got := spec[int(math.Round((r.PeriodS-1.6)/0.2))]; got != r.SvaCms {
			t.Fatalf("Sva %v at %g s %v, spectrum there %v", r.SvaCms, r.PeriodS, r.Component, got)
		}
		for i := range NumPeriods {
			if !finite(r.NS[i]) || !finite(r.EW[i]) || r.NS[i] > r.SvaCms || r.EW[i] > r.SvaCms {
				t.Fatalf("spectrum at %g s: %v %v, max %v", Period(i), r.NS[i], r.EW[i], r.SvaCms)
			}
		}
	})
}

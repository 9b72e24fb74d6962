package lpgm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkTrackerStationSecond is one station-second of real-time work at
// 50 Hz: 50 samples of NS and EW through the 2 × 32 oscillators and two
// frame peaks.
func BenchmarkTrackerStationSecond(b *testing.B) {
	tr, err := NewTracker(50, Config{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ns, ew := make([]float64, 50), make([]float64, 50)
	for i := range ns {
		ns[i], ew[i] = 10*rng.NormFloat64(), 10*rng.NormFloat64()
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range ns {
			tr.Add(ns[i], ew[i])
			if i == 24 || i == 49 {
				tr.TakePeak()
			}
		}
	}
}

// BenchmarkStation300s is the offline spectra of a 300 s, 100 Hz record.
func BenchmarkStation300s(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	ns, ew := make([]float64, 30000), make([]float64, 30000)
	for i := range ns {
		ns[i], ew[i] = 10*rng.NormFloat64(), 10*rng.NormFloat64()
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Station(100, ns, ew); err != nil {
			b.Fatal(err)
		}
	}
}

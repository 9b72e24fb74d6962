package jma

import (
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkRealtimeUpdate is one station's work per 500 ms at 50 Hz: push 25
// samples and recompute the 60 s window.
func BenchmarkRealtimeUpdate(b *testing.B) {
	rt, err := NewRealtime(50, RealtimeConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		rt.Push(rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
	}
	b.ReportAllocs()
	for b.Loop() {
		for j := 0; j < 25; j++ {
			rt.Push(rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
		}
		rt.Update()
	}
}

// BenchmarkInstrumental60s is the official intensity of a 60 s, 100 Hz
// three-component record.
func BenchmarkInstrumental60s(b *testing.B) {
	const n = 6000
	rng := rand.New(rand.NewPCG(3, 4))
	ns, ew, ud := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range ns {
		env := math.Exp(-math.Pow(float64(i-2000)/800, 2))
		ns[i], ew[i], ud[i] = 100*env*rng.NormFloat64(), 100*env*rng.NormFloat64(), 50*env*rng.NormFloat64()
	}
	if _, err := Instrumental(100, ns, ew, ud); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Instrumental(100, ns, ew, ud); err != nil {
			b.Fatal(err)
		}
	}
}

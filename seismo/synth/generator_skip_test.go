package synth

import (
	"testing"
	"time"
)

// TestSkip: a stream that skips part of an earthquake goes on with the
// motion where it then is, sample for sample what an unbroken stream reads
// there; skipping past an event's end drops it.
func TestSkip(t *testing.T) {
	ev, err := Scenario("hualien")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	ev.Origin = start.Add(2 * time.Second)
	pos := Position{Lat: 24.0, Lon: 121.6}
	cfg := Config{Seed: 7, NoiseGal: -1}
	whole, broken := New(pos, start, cfg), New(pos, start, cfg)
	whole.AddEvent(ev)
	broken.AddEvent(ev)
	const n, skip = 3000, 1700 // 60 s, 34 s skipped in the shaking
	a := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	whole.Read(a[0], a[1], a[2])
	broken.Skip(skip)
	b := [3][]float64{make([]float64, n-skip), make([]float64, n-skip), make([]float64, n-skip)}
	broken.Read(b[0], b[1], b[2])
	moving := false
	for axis := range 3 {
		for i := range n - skip {
			if a[axis][skip+i] != b[axis][i] {
				t.Fatalf("axis %d, sample %d after the skip: %v, unbroken %v", axis, i, b[axis][i], a[axis][skip+i])
			}
			moving = moving || b[axis][i] != 0
		}
	}
	if !moving {
		t.Fatal("no motion after the skip: the test shows nothing")
	}
	if got := broken.Next(); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("next sample at %v, want a minute after the start", got)
	}
	broken.Skip(50 * 3600) // an hour: the earthquake is over
	if len(broken.arrivals) != 0 {
		t.Fatalf("%d arrivals kept after their end", len(broken.arrivals))
	}
}

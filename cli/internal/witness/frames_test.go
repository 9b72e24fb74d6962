package witness

import (
	"math"
	"testing"
)

func TestFramesDistinctAndDecodable(t *testing.T) {
	t.Parallel()
	base := int64(1_764_607_200_000) // a 500 ms boundary
	seen := map[[3]int32]string{}
	for _, st := range []string{"WIT00001", "WIT00002", "WIT00003"} {
		for f := range int64(200) {
			first := base + f*frameMs
			ns, ew, ud := sensorSamples(st, first)
			if len(ns) != frameSamples || len(ew) != frameSamples || len(ud) != frameSamples {
				t.Fatalf("%s %d: %d/%d/%d samples", st, first, len(ns), len(ew), len(ud))
			}
			for i := range ns {
				key := [3]int32{ns[i], ew[i], ud[i]}
				if prev, dup := seen[key]; dup {
					t.Fatalf("%s %d sample %d repeats %s", st, first, i, prev)
				}
				seen[key] = st
				if ud[i] < -2048 || ud[i] > 2047 || ns[i] < 0 || ns[i] > nsFrames*frameSamples {
					t.Fatalf("%s %d sample %d out of range: %d %d %d", st, first, i, ns[i], ew[i], ud[i])
				}
			}
			var have [frameSamples]bool
			var n, e, u [frameSamples]int32
			for i := range have {
				have[i], n[i], e[i], u[i] = true, ns[i], ew[i], ud[i]
			}
			// Found a day later in another slot, it still names its frame.
			if got, ok := sensorOrigin(st, first+86_400_000, &have, &n, &e, &u); !ok || got != first {
				t.Fatalf("%s %d: decoded as %d, %v", st, first, got, ok)
			}
			other := "WIT00009"
			if _, ok := sensorOrigin(other, first, &have, &n, &e, &u); ok {
				t.Fatalf("%s's frame taken for %s's", st, other)
			}

			end := first + frameMs
			in, pga, pgv := intensityValues(st, end)
			if in < -11 || in >= -3 || pga < 0 || pga > 1 || pgv < 0 || pgv > 1 || math.IsNaN(float64(in)) {
				t.Fatalf("%s %d: intensity %g, PGA %g, PGV %g out of the quiet range", st, end, in, pga, pgv)
			}
			if got, ok := intensityOrigin(st, end-3_600_000, in, pga, pgv); !ok || got != end {
				t.Fatalf("%s %d: intensity decoded as %d, %v", st, end, got, ok)
			}
		}
	}
}

func TestSensorOriginOfPartialAndForeignFrames(t *testing.T) {
	t.Parallel()
	first := int64(1_764_607_200_500)
	ns, ew, ud := sensorSamples("WIT00001", first)
	var have [frameSamples]bool
	var n, e, u [frameSamples]int32
	for i := 10; i < 20; i++ {
		have[i], n[i], e[i], u[i] = true, ns[i], ew[i], ud[i]
	}
	if got, ok := sensorOrigin("WIT00001", first+frameMs, &have, &n, &e, &u); !ok || got != first {
		t.Fatalf("partial frame decoded as %d, %v", got, ok)
	}
	u[15]++
	if _, ok := sensorOrigin("WIT00001", first, &have, &n, &e, &u); ok {
		t.Fatal("a frame with one wrong value decoded as the witness's")
	}
	var none [frameSamples]bool
	if _, ok := sensorOrigin("WIT00001", first, &none, &n, &e, &u); ok {
		t.Fatal("an empty slot decoded")
	}
	if _, ok := intensityOrigin("WIT00001", first, float32(math.NaN()), 0, 0); ok {
		t.Fatal("NaN intensity decoded")
	}
}

func TestNearestIndex(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ near, r, m, want int64 }{
		{100, 100, 16, 100},
		{100, 99, 16, 99},
		{100, 5, 16, 101}, // 101 ≡ 5 (mod 16)
		{100, 13, 16, 93},
		{100, 11, 16, 107}, // 107 is nearer than 91
		{100, 4, 16, 100},  // itself
		{3, 15, 16, -1},    // below zero is nearer than 15
		{1 << 30, 0, 1 << 20, 1 << 30},
	} {
		if got := nearestIndex(c.near, c.r, c.m); got != c.want {
			t.Errorf("nearestIndex(%d, %d, %d) = %d, want %d", c.near, c.r, c.m, got, c.want)
		}
	}
}

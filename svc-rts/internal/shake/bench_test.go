package shake

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// benchNetwork places n stations at random over Taiwan's box (21.9–25.3°N,
// 120–122°E) with one frame per tick of history.
func benchNetwork(b *testing.B, n int) (*Engine, []string, []Place) {
	r := rand.New(rand.NewPCG(1, 1))
	ids := make([]string, n)
	places := make([]Place, n)
	byID := make(map[string]Place, n)
	for i := range n {
		ids[i] = fmt.Sprintf("S%05d", i)
		places[i] = Place{Lat: 21.9 + 3.4*r.Float64(), Lon: 120 + 2*r.Float64(), Code: uint32(100 + r.IntN(900))}
		byID[ids[i]] = places[i]
	}
	e := New(Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(id string) (Place, bool) {
		p, ok := byID[id]
		return p, ok
	}})
	for k := range int64(historyLen) {
		for i, id := range ids {
			e.Apply(id, Frame{WindowEndMs: t0 + k*TickMs, Intensity: quiet(i, k)})
		}
	}
	return e, ids, places
}

// quiet is background noise: real-time intensity around −1.
func quiet(i int, k int64) float32 { return float32(-1 + 0.5*math.Sin(float64(i)+float64(k))) }

// BenchmarkTick is the work of one tick: every station's frame applied,
// then the snapshot with its detections computed. "quiet" is background
// noise only; "event" repeats a 90 s cycle in which a wave spreads at
// 3.5 km/s from off Hualien for 60 s, triggering every station it has
// reached (up to all of them, each detection growing, re-estimated and
// serialised every tick), then 30 s of quiet. Run it for a whole number of
// cycles (-benchtime=180x).
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		for _, mode := range []string{"quiet", "event"} {
			b.Run(fmt.Sprintf("stations=%d/%s", n, mode), func(b *testing.B) {
				e, ids, places := benchNetwork(b, n)
				const cycle, shaking = 180, 120 // ticks
				tick := t0 + (historyLen-1)*TickMs
				k := int64(0)
				for b.Loop() {
					tick += TickMs
					k++
					phase := k % cycle
					for i, id := range ids {
						v := quiet(i, k)
						if mode == "event" && phase < shaking {
							p := places[i]
							d := math.Hypot((p.Lat-23.77)*111, (p.Lon-121.67)*102)
							if d < 3.5*float64(phase)/2 {
								v = float32(2 + 3*math.Exp(-d/100))
							}
						}
						e.Apply(id, Frame{WindowEndMs: tick, Intensity: v, PGA: 1, PGV: 0.1})
					}
					e.Snapshot(tick)
				}
			})
		}
	}
}

package verify

import (
	"math"
	"sync"
	"time"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/seismo/pwave"
)

// Bounds on a frame's values: beyond them no ground motion, and no honest
// station, could be.
const (
	minIntensity = -12    // a silent record's is −11.06 (seismo/jma.MinIntensity)
	maxIntensity = 10     // JMA's scale ends at 7
	maxPGAGal    = 1e4    // about 10 g; the largest ever recorded is near 4,000 gal
	maxPGVCms    = 1e3    //
	maxSvaCms    = 1e3    // ten times the bottom of JMA's top long-period class
	maxPdCm      = 1e3    // 10 m of displacement in the first 3 s of P
	maxTauCS     = 100    // τc of the largest earthquakes is near 10 s
	maxPWindowMs = 3000   // P is measured over 3 s at most
	maxPAgeMs    = 61_000 // a pick is reported for a minute (seismo/pwave)
	maxRateHz    = 1000   // stations sample at 50 Hz
	maxScaleGal  = 100    // a count of more than 100 gal would be no sensor
	maxSamples   = 1000   // per axis and frame; a datagram holds far fewer
)

// Bounded reports whether a signed packet's content is plausible: the
// frame's time within freshness of its send time (so also of the server
// clock), and every value finite and within what ground motion can be.
// A station holding a valid key could otherwise, with one packet, move its
// own clock into the year 9999 and vanish from the network's view.
func Bounded(p *stationv1.Packet, freshness time.Duration) bool {
	sent := p.GetSentAtMs()
	near := func(ms int64) bool {
		d := time.Duration(ms-sent) * time.Millisecond
		return ms > 0 && d <= freshness && d >= -freshness
	}
	within := func(v float32, lo, hi float64) bool {
		f := float64(v)
		return !math.IsNaN(f) && f >= lo && f <= hi
	}
	switch {
	case p.GetIntensity() != nil:
		f := p.GetIntensity()
		return near(f.GetWindowEndMs()) && within(f.GetIntensity(), minIntensity, maxIntensity) &&
			within(f.GetPgaGal(), 0, maxPGAGal) && within(f.GetPgvCms(), 0, maxPGVCms) && within(f.GetSvaCms(), 0, maxSvaCms) && pBounded(f.GetPWave(), f.GetWindowEndMs(), within)
	case p.GetSensor() != nil:
		f := p.GetSensor()
		n := len(f.GetNs())
		return near(f.GetFirstSampleMs()) && f.GetRateHz() >= 1 && f.GetRateHz() <= maxRateHz &&
			within(f.GetScaleGal(), math.SmallestNonzeroFloat32, maxScaleGal) &&
			n <= maxSamples && len(f.GetEw()) == n && len(f.GetUd()) == n
	}
	return true // a probe carries nothing
}

// pBounded checks a frame's P-wave measurement: picked within the minute
// before the frame's end, over at most 3 s, with values within reason.
func pBounded(w *stationv1.PWave, endMs int64, within func(float32, float64, float64) bool) bool {
	if w == nil {
		return true
	}
	// A pick is reported for pwave.HoldMs, the frame ending up to a frame
	// after that.
	age := endMs - w.GetOnsetMs()
	return age >= 0 && age <= pwave.HoldMs+1000 && w.GetWindowMs() <= pwave.WindowMs &&
		within(w.GetPdCm(), 0, maxPdCm) && within(w.GetTaucS(), 0, maxTauCS)
}

// buckets are the stations' token buckets.
type buckets struct {
	mu sync.Mutex
	m  map[string]*bucket // known stations only: the lookup comes first
}

type bucket struct {
	tokens float64
	last   time.Time
}

// take draws a token from station's bucket (rate per second, burst at
// once); rate 0 means no bound.
func (b *buckets) take(station string, now time.Time, rate, burst float64) bool {
	if rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.m[station]
	if k == nil {
		k = &bucket{tokens: burst, last: now}
		b.m[station] = k
	}
	if dt := now.Sub(k.last).Seconds(); dt > 0 {
		k.tokens = min(burst, k.tokens+dt*rate)
	}
	k.last = now
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

package synth

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// RateHz is the generator's sample rate, the station's.
const RateHz = 50

// DefaultNoiseGal is the default background noise, rms per axis.
const DefaultNoiseGal = 0.12

// Config tunes a Generator. The zero value is usable.
type Config struct {
	// Seed makes the output reproducible; give each station its own
	// (StationSeed).
	Seed uint64
	// NoiseGal is the background noise, rms per axis (0: DefaultNoiseGal;
	// negative: none).
	NoiseGal float64
	// SiteGain scales the event motion, for stations on softer or harder
	// ground than generic rock (0: 1).
	SiteGain float64
	// Model is the ground-motion model (nil: DefaultModel).
	Model *Model
}

// Generator streams one station's synthetic 50 Hz acceleration. It is not
// safe for concurrent use; run one per station.
type Generator struct {
	pos      Position
	start    time.Time
	next     int64 // index of the next sample
	noise    float64
	gain     float64
	seed     uint64
	model    Model
	rng      *rand.Rand
	arrivals []*arrival
}

// New returns a generator for a station at pos whose first sample is at
// start.
func New(pos Position, start time.Time, cfg Config) *Generator {
	g := &Generator{
		pos:   pos,
		start: start,
		noise: cfg.NoiseGal,
		gain:  cfg.SiteGain,
		seed:  cfg.Seed,
		model: DefaultModel(),
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x6e6f697365)),
	}
	if g.noise == 0 {
		g.noise = DefaultNoiseGal
	}
	if g.noise < 0 {
		g.noise = 0
	}
	if g.gain == 0 {
		g.gain = 1
	}
	if cfg.Model != nil {
		g.model = *cfg.Model
	}
	return g
}

// AddEvent makes the station feel ev. Its motion is rendered when the
// stream reaches the P arrival; an event whose motion has already passed is
// ignored.
func (g *Generator) AddEvent(ev Event) {
	first := g.model.firstSample(ev, g.pos, g.start, RateHz)
	g.arrivals = append(g.arrivals, &arrival{ev: ev, first: first, seed: mix(g.seed, ev)})
}

// Next is the time of the next sample Read returns.
func (g *Generator) Next() time.Time {
	return g.start.Add(time.Duration(g.next) * time.Second / RateHz)
}

// Read fills ns, ew and ud with the next samples (gal) and returns how many
// it wrote: the length of the shortest slice.
func (g *Generator) Read(ns, ew, ud []float64) int {
	n := min(len(ns), len(ew), len(ud))
	ns, ew, ud = ns[:n], ew[:n], ud[:n]
	if g.noise > 0 {
		for i := range ns {
			ns[i] = g.noise * g.rng.NormFloat64()
			ew[i] = g.noise * g.rng.NormFloat64()
			ud[i] = g.noise * g.rng.NormFloat64()
		}
	} else {
		clear(ns)
		clear(ew)
		clear(ud)
	}
	from, to := g.next, g.next+int64(n)
	kept := g.arrivals[:0]
	for _, a := range g.arrivals {
		if a.first < to && !a.ready {
			a.ns, a.ew, a.ud = g.model.render(a.ev, g.pos, a.seed, RateHz, g.gain)
			a.ready = true
		}
		if a.ready {
			lo, hi := max(from, a.first), min(to, a.end())
			for t := lo; t < hi; t++ {
				i, j := t-from, t-a.first
				ns[i] += float64(a.ns[j])
				ew[i] += float64(a.ew[j])
				ud[i] += float64(a.ud[j])
			}
		}
		if a.end() > to {
			kept = append(kept, a)
		}
	}
	clear(g.arrivals[len(kept):]) // let played-out waveforms be collected
	g.arrivals = kept
	g.next = to
	return n
}

// Skip moves the stream n samples on without producing them, as a station
// that lost that stretch (its CPU starved, its clock jumped) would: the
// next Read continues after it, with the events' motion where it then is.
func (g *Generator) Skip(n int) {
	if n <= 0 {
		return
	}
	to := g.next + int64(n)
	kept := g.arrivals[:0]
	for _, a := range g.arrivals {
		if a.end() > to {
			kept = append(kept, a)
		}
	}
	clear(g.arrivals[len(kept):])
	g.arrivals = kept
	g.next = to
}

// StationSeed derives a station's seed from a network-wide seed and the
// station's ID, so every station differs and each is reproducible.
func StationSeed(base uint64, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return splitmix(base ^ h.Sum64())
}

// mix derives the seed of one event at one station.
func mix(seed uint64, ev Event) uint64 {
	s := splitmix(seed)
	for _, v := range []uint64{
		math.Float64bits(ev.Lat), math.Float64bits(ev.Lon),
		math.Float64bits(ev.DepthKm), math.Float64bits(ev.Mag),
		uint64(ev.Origin.UnixNano()),
	} {
		s = splitmix(s ^ v)
	}
	return s
}

// splitmix is the SplitMix64 finaliser, a fast well-mixing bijection.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Package simnet records the input of svc-rts for its tests and benchmarks:
// a network of stations over Taiwan, each running the station pipeline
// (seismo/measure) on synthetic ground motion (seismo/synth), so the engine
// is exercised with the frames real stations send — background noise,
// earthquakes arriving with their P and S waves, and local disturbances
// that shake a single station.
package simnet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"shindo.dev/lib/township"
	"shindo.dev/seismo/measure"
	"shindo.dev/seismo/pwave"
	"shindo.dev/seismo/synth"
	"shindo.dev/svc-rts/internal/detect"
)

// Station is one simulated station.
type Station struct {
	ID       string
	Lat, Lon float64
	Code     uint32 // postal code of the nearest township seat
}

// Frame is one intensity frame of one station.
type Frame struct {
	Station     int // index into the station list
	WindowEndMs int64
	Intensity   float32
	PGA, PGV    float32
	SvaCms      float32 // long-period absolute velocity response
	P           detect.PWave
}

// taiwan is a coarse outline of the island (lon, lat), enough to keep
// simulated stations on land.
var taiwan = [][2]float64{
	{121.54, 25.30}, {121.75, 25.15}, {122.00, 25.01}, {121.85, 24.75}, {121.87, 24.60},
	{121.80, 24.45}, {121.76, 24.30}, {121.69, 24.20}, {121.62, 24.00}, {121.50, 23.50},
	{121.40, 23.00}, {121.15, 22.75}, {120.90, 22.35}, {120.88, 22.10}, {120.85, 21.90},
	{120.70, 21.95}, {120.58, 22.35}, {120.27, 22.60}, {120.12, 23.00}, {120.12, 23.45},
	{120.15, 23.70}, {120.33, 24.00}, {120.50, 24.28}, {120.70, 24.55}, {120.92, 24.82},
	{121.15, 25.05}, {121.40, 25.18},
}

// OnLand reports whether (lat, lon) lies inside the outline of Taiwan.
func OnLand(lat, lon float64) bool {
	in := false
	for i, j := 0, len(taiwan)-1; i < len(taiwan); j, i = i, i+1 {
		xi, yi, xj, yj := taiwan[i][0], taiwan[i][1], taiwan[j][0], taiwan[j][1]
		if (yi > lat) != (yj > lat) && lon < (xj-xi)*(lat-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// Grid lays stations on a grid of step degrees over Taiwan's land, each
// moved at random by up to a third of a step (deterministic by seed), with
// IDs S0001, S0002, … in order of latitude then longitude.
func Grid(step float64, seed uint64) []Station {
	r := rand.New(rand.NewPCG(seed, 0x67726964))
	var out []Station
	for lat := 21.9; lat < 25.35; lat += step {
		for lon := 120.0; lon < 122.05; lon += step {
			la := lat + (r.Float64()-0.5)*step*2/3
			lo := lon + (r.Float64()-0.5)*step*2/3
			if !OnLand(la, lo) {
				continue
			}
			la, lo = math.Round(la*1e4)/1e4, math.Round(lo*1e4)/1e4
			out = append(out, Station{ID: fmt.Sprintf("S%04d", len(out)+1), Lat: la, Lon: lo, Code: nearestTownship(la, lo)})
		}
	}
	return out
}

func nearestTownship(lat, lon float64) uint32 {
	best, code := math.Inf(1), uint32(0)
	for _, t := range township.Sample() {
		dy, dx := t.Lat-lat, (t.Lon-lon)*math.Cos(lat*math.Pi/180)
		if d := dx*dx + dy*dy; d < best {
			best, code = d, t.Code
		}
	}
	return code
}

// Disturbance is local shaking felt by one station only (traffic, works,
// someone bumping the sensor), made as a small event 3 km under the station
// that no other station feels.
type Disturbance struct {
	Station int // index into the station list
	At      time.Time
	Mag     float64 // 3.5 gives a real-time intensity of about 2.4
}

// Options describe a recording.
type Options struct {
	// Start is the first sample's time; it is rounded down to the 500 ms
	// grid so frames end on ticks.
	Start    time.Time
	Duration time.Duration
	// Events are felt by every station.
	Events       []synth.Event
	Disturbances []Disturbance
	// Seed varies the noise and the motion of every station.
	Seed uint64
}

// Record runs every station through the recording and returns its frames,
// per station in time order. The result depends only on the arguments.
func Record(stations []Station, opts Options) [][]Frame {
	startMs := opts.Start.UnixMilli() / measure.FrameMs * measure.FrameMs
	start := time.UnixMilli(startMs)
	frames := int(opts.Duration / (measure.FrameMs * time.Millisecond))
	out := make([][]Frame, len(stations))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				out[i] = record(i, stations[i], start, frames, opts)
			}
		})
	}
	for i := range stations {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func record(idx int, st Station, start time.Time, frames int, opts Options) []Frame {
	pos := synth.Position{Lat: st.Lat, Lon: st.Lon}
	gen := synth.New(pos, start, synth.Config{Seed: synth.StationSeed(opts.Seed, st.ID)})
	for _, ev := range opts.Events {
		gen.AddEvent(ev)
	}
	for _, d := range opts.Disturbances {
		if d.Station == idx {
			gen.AddEvent(synth.Event{Name: "local", Lat: st.Lat, Lon: st.Lon, DepthKm: 3, Mag: d.Mag, Origin: d.At})
		}
	}
	p, err := measure.New(measure.Config{StartMs: start.UnixMilli()})
	if err != nil {
		panic(err) // the default configuration is valid
	}
	out := make([]Frame, 0, frames)
	var ns, ew, ud [measure.FrameSamples]float64
	for range frames {
		gen.Read(ns[:], ew[:], ud[:])
		for k := range ns {
			if p.Add(ns[k], ew[k], ud[k]) {
				f := p.Intensity()
				out = append(out, Frame{Station: idx, WindowEndMs: f.WindowEndMs, Intensity: f.Intensity, PGA: f.PGAGal, PGV: f.PGVCms, SvaCms: f.SvaCms, P: pWave(f.P)})
			}
		}
	}
	return out
}

// pWave is what a station's frame carries of its P-wave measurement.
func pWave(m pwave.Measurement) detect.PWave {
	return detect.PWave{OnsetMs: m.OnsetMs, WindowMs: m.WindowMs, PdCm: float32(m.PdCm), TauCS: float32(m.TauCS)}
}

package measure

import (
	"errors"
	"fmt"
	"math"

	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/lpgm"
	"shindo.dev/seismo/pwave"
)

const (
	// RateHz is the station sample rate.
	RateHz = 50
	// FrameSamples is the number of samples per axis in one 500 ms frame.
	FrameSamples = RateHz / 2
	// FrameMs is the length of a frame.
	FrameMs = 500
	// DefaultScaleGal is the default count size: 0.001 gal, the resolution of
	// JMA's published records and well below a MEMS sensor's noise.
	DefaultScaleGal = 0.001
)

// ErrScale is returned for a count size that is not a positive finite
// number.
var ErrScale = errors.New("scale must be a positive finite number of gal per count")

// Config sets up a Pipeline.
type Config struct {
	// StartMs is the time of the first sample, Unix milliseconds.
	StartMs int64
	// ScaleGal is the size of one count in gal (default DefaultScaleGal).
	ScaleGal float64
	// Realtime tunes the real-time intensity (zero value: jma's defaults).
	Realtime jma.RealtimeConfig
}

// IntensityFrame mirrors shindo.station.v1.IntensityFrame.
type IntensityFrame struct {
	WindowEndMs int64
	Intensity   float32 // real-time JMA instrumental intensity, unrounded
	PGAGal      float32 // peak three-component vector acceleration, this frame
	PGVCms      float32 // peak three-component vector velocity, this frame
	// SvaCms is the peak absolute velocity response (h = 5 %, T 1.6–7.8 s,
	// both horizontal components) reached during this frame, cm/s; its
	// running maximum over an event gives the long-period ground-motion
	// class (lpgm.Class).
	SvaCms float32
	// P is the P wave the station picked in the last minute and what the
	// first seconds of it showed, as of the end of this frame (zero: no
	// pick).
	P pwave.Measurement
}

// SensorFrame mirrors shindo.station.v1.SensorFrame.
type SensorFrame struct {
	FirstSampleMs int64
	RateHz        uint32
	ScaleGal      float32 // counts × ScaleGal = gal
	NS, EW, UD    []int32
}

// Clone returns a copy that does not share the sample slices.
func (f SensorFrame) Clone() SensorFrame {
	f.NS = append([]int32(nil), f.NS...)
	f.EW = append([]int32(nil), f.EW...)
	f.UD = append([]int32(nil), f.UD...)
	return f
}

// Pipeline measures one station's stream.
type Pipeline struct {
	startMs int64
	scale   float64 // the float32 scale, widened: what a receiver multiplies by
	rt      *jma.Realtime
	vel     [3]jma.VelocityFilter
	lp      *lpgm.Tracker
	pw      *pwave.Meter

	n     int   // samples in the current frame
	frame int64 // index of the current frame

	// Two sets of counts, alternating by frame, so that a returned
	// SensorFrame stays intact while the next frame fills.
	counts [2][3][FrameSamples]int32
	pga2   float64
	pgv2   float64

	intensity IntensityFrame
	sensor    SensorFrame
}

// New returns a pipeline at rest.
func New(cfg Config) (*Pipeline, error) {
	if cfg.ScaleGal == 0 {
		cfg.ScaleGal = DefaultScaleGal
	}
	scale := float64(float32(cfg.ScaleGal))
	if !(scale > 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("%w: %v", ErrScale, cfg.ScaleGal)
	}
	rt, err := jma.NewRealtime(RateHz, cfg.Realtime)
	if err != nil {
		return nil, fmt.Errorf("real-time intensity: %w", err)
	}
	lp, err := lpgm.NewTracker(RateHz, lpgm.Config{})
	if err != nil {
		return nil, fmt.Errorf("long-period ground motion: %w", err)
	}
	p := &Pipeline{startMs: cfg.StartMs, scale: scale, rt: rt, lp: lp, pw: pwave.New(RateHz, cfg.StartMs)}
	for i := range p.vel {
		p.vel[i] = jma.NewVelocityFilter(RateHz)
	}
	return p, nil
}

// Add feeds the next sample (gal per axis). It returns true when the sample
// completes a frame; Intensity and Sensor then return that frame.
func (p *Pipeline) Add(ns, ew, ud float64) bool {
	var g [3]float64
	buf := &p.counts[p.frame&1]
	for axis, a := range [3]float64{ns, ew, ud} {
		c := p.quantize(a)
		buf[axis][p.n] = c
		g[axis] = float64(c) * p.scale
	}
	p.rt.Push(g[0], g[1], g[2])
	p.pga2 = max(p.pga2, g[0]*g[0]+g[1]*g[1]+g[2]*g[2])
	vx, vy, vz := p.vel[0].Step(g[0]), p.vel[1].Step(g[1]), p.vel[2].Step(g[2])
	p.pgv2 = max(p.pgv2, vx*vx+vy*vy+vz*vz)
	p.lp.Add(g[0], g[1])
	p.pw.Add(g[2])
	p.n++
	if p.n < FrameSamples {
		return false
	}
	first := p.startMs + p.frame*FrameMs
	p.intensity = IntensityFrame{
		WindowEndMs: first + FrameMs,
		Intensity:   float32(p.rt.Update()),
		PGAGal:      float32(math.Sqrt(p.pga2)),
		PGVCms:      float32(math.Sqrt(p.pgv2)),
		SvaCms:      float32(p.lp.TakePeak()),
		P:           p.pw.Measurement(),
	}
	p.sensor = SensorFrame{
		FirstSampleMs: first,
		RateHz:        RateHz,
		ScaleGal:      float32(p.scale),
		NS:            buf[0][:],
		EW:            buf[1][:],
		UD:            buf[2][:],
	}
	p.n, p.pga2, p.pgv2 = 0, 0, 0
	p.frame++
	return true
}

// quantize converts gal to counts, saturating at the int32 range (a count
// size far below a sensor's range would otherwise wrap around).
func (p *Pipeline) quantize(a float64) int32 {
	c := math.Round(a / p.scale)
	switch {
	case c >= math.MaxInt32:
		return math.MaxInt32
	case c <= math.MinInt32:
		return math.MinInt32
	case c != c: // NaN from a broken sensor reads as zero
		return 0
	}
	return int32(c)
}

// Intensity returns the intensity frame completed by the last Add that
// returned true.
func (p *Pipeline) Intensity() IntensityFrame { return p.intensity }

// Sensor returns the sensor frame completed by the last Add that returned
// true. Its sample slices stay valid while the next frame fills and are
// reused after that: encode or Clone the frame before the next Add returns
// true.
func (p *Pipeline) Sensor() SensorFrame { return p.sensor }

// MaxIntensity is the running maximum of the real-time intensity since the
// start or the last ResetMax.
func (p *Pipeline) MaxIntensity() float64 { return p.rt.Max() }

// ResetMax starts a new running maximum.
func (p *Pipeline) ResetMax() { p.rt.ResetMax() }

// NextSampleMs is the time of the sample the next Add takes.
func (p *Pipeline) NextSampleMs() int64 {
	return p.startMs + p.frame*FrameMs + int64(p.n)*(1000/RateHz)
}

package jma

import (
	"fmt"
	"math"
	"time"
)

// RealtimeConfig shapes Realtime. Zero fields take the defaults below.
type RealtimeConfig struct {
	// Window is the span a0 is ranked over (default 60 s): the real-time
	// intensity is the intensity of the last Window of signal.
	Window time.Duration
	// Span is how much recent signal each update filters (default 16 s). It
	// must be long enough for the filter's impulse response (a few seconds:
	// the low cut is at 0.5 Hz); more only costs time.
	Span time.Duration
	// Taper is the raised-cosine ramp applied to each end of the filtered
	// span (default 0.5 s), so the artificial cuts do not ring through the
	// filter. Negative means none.
	Taper time.Duration
	// HoldBack is how old a sample must be before its filtered value is
	// ranked (default 1 s): a zero-phase filter needs the sample's future.
	// It is the latency of the real-time value. Negative means none.
	HoldBack time.Duration
}

// Defaults for RealtimeConfig, chosen from the measurements printed by
// TestRealtimeEdgeTreatment.
const (
	DefaultWindow   = 60 * time.Second
	DefaultSpan     = 16 * time.Second
	DefaultTaper    = 500 * time.Millisecond
	DefaultHoldBack = time.Second
)

func (c RealtimeConfig) withDefaults() RealtimeConfig {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Span == 0 {
		c.Span = DefaultSpan
	}
	if c.Taper == 0 {
		c.Taper = DefaultTaper
	}
	if c.HoldBack == 0 {
		c.HoldBack = DefaultHoldBack
	}
	c.Taper = max(c.Taper, 0)
	c.HoldBack = max(c.HoldBack, 0)
	return c
}

// Realtime computes the real-time intensity and its running maximum.
//
// Each Update filters the most recent Span of samples with the official
// method (mean removed, both ends tapered, zero-padded to a power of two) and
// keeps the filtered composite of the samples that have just become HoldBack
// old: they now have enough future for the zero-phase filter, lie clear of
// the newest taper, and sit far from the oldest cut. Each sample's composite is
// computed once and kept for Window; a0 is ranked over those values. This
// gives the official method's answer for the last Window of a continuous
// stream, at the cost of one short transform per update instead of one
// over the whole window.
//
// Push samples as they arrive and call Update at the reporting interval
// (every 500 ms on a station; at least once per Span − HoldBack). Realtime
// allocates nothing after construction and is not safe for concurrent use.
type Realtime struct {
	k     int // samples that make 0.3 s
	span  int // samples filtered per update
	hold  int
	taper []float64

	raw    [3][]float64 // the last span samples per component
	head   int          // next write position in raw
	pushed int64        // samples pushed so far
	done   int64        // samples whose composite is in hist
	lost   int64        // samples dropped because Update came too late

	hist     []float64 // composite², the last Window of settled samples
	histHead int
	histLen  int

	filt       *spectralFilter
	horiz      []complex128 // NS + i·EW, then their filtered values
	vert       []float64    // UD, then its filtered values
	spec, work []complex128
	top        topK
	last, peak float64
}

// NewRealtime returns a real-time meter for samples at rateHz.
func NewRealtime(rateHz float64, cfg RealtimeConfig) (*Realtime, error) {
	k, err := ExceedanceSamples(rateHz)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	samples := func(d time.Duration) int { return int(math.Round(d.Seconds() * rateHz)) }
	r := &Realtime{
		k:    k,
		span: samples(cfg.Span),
		hold: samples(cfg.HoldBack),
	}
	window := samples(cfg.Window)
	nt := samples(cfg.Taper)
	if window < k {
		return nil, fmt.Errorf("real-time window %v shorter than 0.3 s", cfg.Window)
	}
	if r.span < 2*nt+r.hold+k {
		return nil, fmt.Errorf("real-time span %v too short for taper %v and hold-back %v", cfg.Span, cfg.Taper, cfg.HoldBack)
	}
	r.taper = make([]float64, nt)
	for i := range r.taper {
		r.taper[i] = 0.5 * (1 - math.Cos(math.Pi*(float64(i)+0.5)/float64(nt)))
	}
	for i := range r.raw {
		r.raw[i] = make([]float64, r.span)
	}
	r.hist = make([]float64, window)
	// Pad by at least a quarter span so the filter's response to one end
	// does not wrap around onto the other.
	n := nextPow2(r.span + r.span/4)
	if r.filt, err = cachedFilter(n, rateHz); err != nil {
		return nil, fmt.Errorf("build filter: %w", err)
	}
	r.horiz = make([]complex128, n)
	r.vert = make([]float64, n)
	r.spec = make([]complex128, n/2+1)
	r.work = make([]complex128, r.filt.workLen())
	r.top.heap = make([]float64, 0, k)
	r.Reset()
	return r, nil
}

// Push appends one sample (gal).
func (r *Realtime) Push(ns, ew, ud float64) {
	r.raw[0][r.head] = ns
	r.raw[1][r.head] = ew
	r.raw[2][r.head] = ud
	r.head++
	if r.head == r.span {
		r.head = 0
	}
	r.pushed++
}

// Update settles the samples that have become HoldBack old and returns the
// intensity of the last Window (unrounded). Until 0.3 s of signal has
// settled it returns MinIntensity.
func (r *Realtime) Update() float64 {
	return r.settle(r.pushed-int64(r.hold), false)
}

// Flush settles every pushed sample, treating the newest as the end of the
// record (no future, as in the official method), and returns the intensity.
// Use it when a record ends, not on a live stream.
func (r *Realtime) Flush() float64 {
	return r.settle(r.pushed, true)
}

func (r *Realtime) settle(upTo int64, final bool) float64 {
	if upTo > r.done {
		n := int(min(r.pushed, int64(r.span)))
		first := r.pushed - int64(n) // absolute index of the span's oldest sample
		full := n == r.span && first > 0
		// Skip the oldest taper when the span cuts a continuous stream;
		// before that the oldest edge is the true start of the data.
		lo := first
		if full {
			lo += int64(len(r.taper))
		}
		if r.done < lo {
			r.lost += lo - r.done
			r.done = lo
		}
		if upTo > r.done {
			r.load(n, full, !final)
			r.filt.apply(r.horiz, r.work)
			r.filt.applyReal(r.vert, r.spec, r.work)
			for i := int(r.done - first); i < int(upTo-first); i++ {
				h, z := r.horiz[i], r.vert[i]
				r.remember(real(h)*real(h) + imag(h)*imag(h) + z*z)
			}
			r.done = upTo
		}
	}
	if r.histLen < r.k {
		r.last = MinIntensity
		return r.last
	}
	r.top.reset(r.k)
	for _, v2 := range r.hist[:r.histLen] {
		r.top.add(v2)
	}
	v2, _ := r.top.kth()
	r.last = intensityOf(math.Sqrt(v2))
	r.peak = max(r.peak, r.last)
	return r.last
}

func (r *Realtime) remember(v2 float64) {
	r.hist[r.histHead] = v2
	r.histHead++
	if r.histHead == len(r.hist) {
		r.histHead = 0
	}
	if r.histLen < len(r.hist) {
		r.histLen++
	}
}

// load copies the span, oldest first, into the transform buffers with its
// mean removed (a sensor offset would otherwise be a step at each end),
// tapers the ends that are cuts, and zero-fills the padding.
func (r *Realtime) load(n int, taperOld, taperNew bool) {
	start := r.head - n
	if start < 0 {
		start += r.span
	}
	var mean [3]float64
	for c := range r.raw {
		var s float64
		j := start
		for i := 0; i < n; i++ {
			s += r.raw[c][j]
			j++
			if j == r.span {
				j = 0
			}
		}
		mean[c] = s / float64(n)
	}
	ns, ew, ud := r.raw[0], r.raw[1], r.raw[2]
	j := start
	for i := 0; i < n; i++ {
		r.horiz[i] = complex(ns[j]-mean[0], ew[j]-mean[1])
		r.vert[i] = ud[j] - mean[2]
		j++
		if j == r.span {
			j = 0
		}
	}
	clear(r.horiz[n:])
	clear(r.vert[n:])
	if n < 2*len(r.taper) {
		return
	}
	for i, w := range r.taper {
		if taperNew {
			e := n - 1 - i
			r.horiz[e] = complex(real(r.horiz[e])*w, imag(r.horiz[e])*w)
			r.vert[e] *= w
		}
		if taperOld {
			r.horiz[i] = complex(real(r.horiz[i])*w, imag(r.horiz[i])*w)
			r.vert[i] *= w
		}
	}
}

// Last is the value of the latest Update.
func (r *Realtime) Last() float64 { return r.last }

// Max is the largest value Update has returned since the start or the last
// ResetMax.
func (r *Realtime) Max() float64 { return r.peak }

// Lost counts samples that left the span before an Update settled them
// (Update called less often than every Span − HoldBack).
func (r *Realtime) Lost() int64 { return r.lost }

// ResetMax starts a new running maximum (for example, for a new event).
func (r *Realtime) ResetMax() { r.peak = MinIntensity }

// Reset forgets all samples and the running maximum.
func (r *Realtime) Reset() {
	for c := range r.raw {
		clear(r.raw[c])
	}
	clear(r.hist)
	r.head, r.histHead, r.histLen = 0, 0, 0
	r.pushed, r.done, r.lost = 0, 0, 0
	r.last, r.peak = MinIntensity, MinIntensity
}

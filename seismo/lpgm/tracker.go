package lpgm

import (
	"errors"
	"fmt"
	"math"

	"shindo.dev/seismo/internal/iir"
)

// ErrHighPass is returned for a high-pass corner that is not a finite
// number below a tenth of the sample rate.
var ErrHighPass = errors.New("high-pass corner must be a finite number of Hz below a tenth of the rate, or negative for none")

// DefaultHighPassHz is the default corner of the drift-removing high-pass
// applied to the acceleration in real time; see the package documentation
// for the measurements behind it.
const DefaultHighPassHz = 0.02

// Config shapes a Tracker. The zero value takes the defaults.
type Config struct {
	// HighPassHz is the corner of the 2nd-order Butterworth high-pass
	// applied to each component's acceleration before the ground velocity
	// and the oscillators (default DefaultHighPassHz). Negative means none:
	// only the first sample is subtracted as the sensor's offset, which is
	// exact for a record that starts at rest and has no drift, and lets the
	// ground velocity run away otherwise.
	HighPassHz float64
}

// Tracker follows the long-period ground motion of one station's stream in
// real time: it runs the NumPeriods oscillators of each horizontal
// component and the ground velocity sample by sample, keeps each period's
// running Sva, and reports the peak |absolute velocity| over all periods and
// both components reached since the previous TakePeak (one frame).
//
// Before anything else each component goes through a 2nd-order Butterworth
// high-pass (Config.HighPassHz), primed on the first sample so a constant
// offset never enters; see the package documentation for why and what it
// costs.
//
// A sample that is not finite or beyond ±MaxGal never reaches the state: the
// component's last good sample stands in for it (a gap of a few samples
// barely moves a long-period response, while restarting from rest in the
// middle of shaking would take a moving ground as the baseline and invent a
// transient). After a second of such samples without a good one the stream
// is taken as broken: the tracker starts again from rest and primes on the
// next good sample, which may carry a new offset. The reported peaks are
// never NaN or infinite.
//
// Feed samples with Add and call TakePeak at the end of every frame.
// A Tracker allocates nothing after construction and is not safe for
// concurrent use.
type Tracker struct {
	st     *[NumPeriods]step
	halfDt float64
	useHP  bool
	hp0    iir.HighPass // as built, to restart from
	hp     [2]iir.HighPass
	base   [2]float64 // the first sample, subtracted when there is no high-pass
	last   [2]float64 // the last good sample, held over bad ones
	banks  [2]bank
	primed bool

	bad        int // consecutive samples with a bad component
	restartBad int // how many make the stream broken: a second's worth
	sinceCheck int // samples since the state was last checked
	dropped    int64
	restarts   int64

	frame float64                // peak since the last TakePeak
	peak  float64                // running peak
	sva   [2][NumPeriods]float64 // running spectra
}

// NewTracker returns a tracker at rest for samples at rateHz.
func NewTracker(rateHz float64, cfg Config) (*Tracker, error) {
	if err := checkRate(rateHz); err != nil {
		return nil, err
	}
	if cfg.HighPassHz == 0 {
		cfg.HighPassHz = DefaultHighPassHz
	}
	t := &Tracker{
		st:         newSteps(1 / rateHz),
		halfDt:     0.5 / rateHz,
		restartBad: int(math.Ceil(rateHz)),
	}
	switch hz := cfg.HighPassHz; {
	case hz < 0 && !math.IsInf(hz, -1):
	case hz > 0 && hz < 0.1*rateHz:
		t.useHP = true
		t.hp0 = iir.NewHighPass(hz, rateHz)
	default: // NaN, infinite, or no longer a corner far below the band
		return nil, fmt.Errorf("%w: %g Hz at %g Hz", ErrHighPass, hz, rateHz)
	}
	return t, nil
}

// Add feeds one sample of each horizontal component (gal) and returns the
// largest |absolute velocity| (cm/s) over the periods and components at
// this sample.
func (t *Tracker) Add(ns, ew float64) float64 {
	okNS, okEW := validSample(ns), validSample(ew)
	if !okNS || !okEW {
		t.dropped++
		t.bad++
		if !t.primed {
			return 0
		}
		if t.bad >= t.restartBad {
			t.restart()
			return 0
		}
		if !okNS {
			ns = t.last[0]
		}
		if !okEW {
			ew = t.last[1]
		}
	} else {
		t.bad = 0
	}
	if !t.primed {
		t.prime(ns, ew)
	}
	t.last = [2]float64{ns, ew}
	var p float64
	for c, a := range [2]float64{ns, ew} {
		if t.useHP {
			a = t.hp[c].Step(a)
		} else {
			a -= t.base[c]
		}
		p = max(p, t.banks[c].push(t.st, t.halfDt, a, &t.sva[c]))
	}
	// Bounded input keeps the state bounded, so neither check can fire; if
	// one ever did, an infinity or NaN would otherwise stay in the
	// oscillators for good. NaN never reaches p (see bank.push), so the
	// whole state is checked once a second, which costs nothing per sample.
	if p > math.MaxFloat64 {
		t.poisoned()
		return 0
	}
	if t.sinceCheck++; t.sinceCheck >= t.restartBad {
		t.sinceCheck = 0
		if !t.stateFinite() {
			t.poisoned()
			return 0
		}
	}
	t.frame = max(t.frame, p)
	t.peak = max(t.peak, p)
	return p
}

func (t *Tracker) prime(ns, ew float64) {
	t.base = [2]float64{ns, ew}
	for c, a := range t.base {
		t.hp[c] = t.hp0
		t.hp[c].Prime(a)
	}
	t.primed = true
}

// stateFinite reports whether the filters and oscillators hold only
// finite numbers.
func (t *Tracker) stateFinite() bool {
	return t.hp[0].Finite() && t.hp[1].Finite() && t.banks[0].finite() && t.banks[1].finite()
}

// poisoned restarts a tracker whose state is no longer finite and drops
// the infinities that may have reached the running spectra on the way.
func (t *Tracker) poisoned() {
	t.restart()
	for c := range t.sva {
		for i, v := range t.sva[c] {
			if v > math.MaxFloat64 {
				t.sva[c][i] = 0
			}
		}
	}
}

// restart puts the filters and oscillators at rest, to be primed by the
// next good sample. The peaks are kept: they were measured on good data.
func (t *Tracker) restart() {
	t.banks = [2]bank{}
	t.primed = false
	t.bad = 0
	t.restarts++
}

// TakePeak returns the largest |absolute velocity| (cm/s) over all periods
// and both components since the previous TakePeak (or the start), and
// starts the next frame. Over an event, the largest TakePeak is the
// station's Sva.
func (t *Tracker) TakePeak() float64 {
	p := t.frame
	t.frame = 0
	return p
}

// Max returns the running peak since the start or the last ResetMax: the
// station's Sva so far.
func (t *Tracker) Max() float64 { return t.peak }

// Running returns the running spectra since the start or the last
// ResetMax, and their maximum.
func (t *Tracker) Running() Result { return newResult(&t.sva[0], &t.sva[1]) }

// ResetMax starts new running spectra and a new running peak (for example,
// for a new event). The oscillators keep running.
func (t *Tracker) ResetMax() {
	t.sva = [2][NumPeriods]float64{}
	t.peak, t.frame = 0, 0
}

// Reset forgets everything: state, peaks and counters.
func (t *Tracker) Reset() {
	t.restart()
	t.ResetMax()
	t.dropped, t.restarts = 0, 0
}

// Dropped counts the samples that were not finite or beyond ±MaxGal on
// either component.
func (t *Tracker) Dropped() int64 { return t.dropped }

// Restarts counts the times the tracker started again from rest: after a
// second of bad samples, or (never seen; a defence) a non-finite state.
func (t *Tracker) Restarts() int64 { return t.restarts }

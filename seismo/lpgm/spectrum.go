package lpgm

import (
	"errors"
	"fmt"
	"math"
)

// Limits on the input.
const (
	// MinRateHz is the lowest sample rate accepted: at 10 Hz a 1.6 s
	// oscillation is sampled 16 times a cycle, so the largest sample can
	// miss its true peak by at most 1 − cos(π/16) ≈ 2 %.
	MinRateHz = 10
	// MaxRateHz is the highest sample rate accepted: the closed-form step
	// coefficients subtract terms of order 1/(ω³Δt) to leave ones of order
	// Δt², so they lose digits as the rate grows (they still agree with a
	// matrix exponential to 2·10⁻⁷ at 1000 Hz, 10⁻¹⁰ at 100 Hz).
	MaxRateHz = 1000
	// MaxGal bounds an acceleration sample (about 100 g; the largest ground
	// accelerations recorded are near 4,000 gal). Larger values are not
	// ground motion, and keeping them out keeps every sum far from overflow.
	MaxGal = 1e5
)

// Errors returned for input the spectrum cannot be computed from.
var (
	ErrRate   = errors.New("sample rate must be a finite number of Hz from 10 to 1000")
	ErrEmpty  = errors.New("no samples")
	ErrLength = errors.New("components have different lengths")
	ErrSample = errors.New("sample is not a finite acceleration within ±MaxGal")
)

// Component names a horizontal component.
type Component int

// The two horizontal components.
const (
	NS Component = iota
	EW
)

// String is "NS" or "EW".
func (c Component) String() string {
	switch c {
	case NS:
		return "NS"
	case EW:
		return "EW"
	}
	return "?"
}

// Result is the long-period ground motion of a station.
type Result struct {
	// NS and EW are the absolute velocity response spectra, cm/s, at
	// Period(0) … Period(NumPeriods−1).
	NS, EW [NumPeriods]float64
	// SvaCms is the largest value of either spectrum, cm/s.
	SvaCms float64
	// PeriodS is the natural period where SvaCms is reached, s.
	PeriodS float64
	// Component is the component where SvaCms is reached.
	Component Component
}

// Class is the long-period ground-motion class of SvaCms.
func (r Result) Class() int { return Class(r.SvaCms) }

// newResult finds the maximum of two spectra. Ties go to the shorter period
// and to NS, so the answer does not depend on rounding noise in the order of
// evaluation.
func newResult(ns, ew *[NumPeriods]float64) Result {
	r := Result{NS: *ns, EW: *ew, PeriodS: Period(0)}
	for c, sp := range [2]*[NumPeriods]float64{ns, ew} {
		for i, v := range sp {
			if v > r.SvaCms {
				r.SvaCms, r.PeriodS, r.Component = v, Period(i), Component(c)
			}
		}
	}
	return r
}

// Class returns JMA's long-period ground-motion class (長周期地震動階級) of a
// peak absolute velocity response in cm/s: 0 below 5, 1 from 5, 2 from 15,
// 3 from 50 and 4 from 100. NaN is class 0.
func Class(svaCms float64) int {
	switch {
	case svaCms >= 100:
		return 4
	case svaCms >= 50:
		return 3
	case svaCms >= 15:
		return 2
	case svaCms >= 5:
		return 1
	}
	return 0
}

// Spectrum returns the absolute velocity response spectrum Sva (cm/s) of one
// component of acceleration (gal) sampled at rateHz, at the NumPeriods
// periods of Period, with damping Damping. The record's mean is removed, the
// record is taken as linear between samples, and the oscillators and the
// ground start at rest; Sva(T) is the largest |ẋ + v_g| over the samples.
func Spectrum(rateHz float64, acc []float64) ([]float64, error) {
	if err := checkRate(rateHz); err != nil {
		return nil, err
	}
	sva, err := spectrum(newSteps(1/rateHz), rateHz, acc)
	if err != nil {
		return nil, err
	}
	return sva[:], nil
}

// Station returns the spectra of the two horizontal components (gal, the
// same length, sampled at rateHz) and their largest value, as JMA defines a
// station's long-period ground motion.
func Station(rateHz float64, ns, ew []float64) (Result, error) {
	if err := checkRate(rateHz); err != nil {
		return Result{}, err
	}
	if len(ns) != len(ew) {
		return Result{}, fmt.Errorf("%w: ns %d, ew %d", ErrLength, len(ns), len(ew))
	}
	st := newSteps(1 / rateHz)
	sns, err := spectrum(st, rateHz, ns)
	if err != nil {
		return Result{}, fmt.Errorf("ns: %w", err)
	}
	sew, err := spectrum(st, rateHz, ew)
	if err != nil {
		return Result{}, fmt.Errorf("ew: %w", err)
	}
	return newResult(&sns, &sew), nil
}

func spectrum(st *[NumPeriods]step, rateHz float64, acc []float64) ([NumPeriods]float64, error) {
	var sva [NumPeriods]float64
	if len(acc) == 0 {
		return sva, ErrEmpty
	}
	var sum float64
	for i, a := range acc {
		if !validSample(a) {
			return sva, fmt.Errorf("%w: sample %d is %g", ErrSample, i, a)
		}
		sum += a
	}
	mean := sum / float64(len(acc))
	var b bank
	halfDt := 0.5 / rateHz
	for _, a := range acc {
		b.push(st, halfDt, a-mean, &sva)
	}
	return sva, nil
}

func checkRate(rateHz float64) error {
	if !(rateHz >= MinRateHz && rateHz <= MaxRateHz) {
		return fmt.Errorf("%w: %g", ErrRate, rateHz)
	}
	return nil
}

// validSample reports whether a is a finite acceleration within ±MaxGal.
func validSample(a float64) bool { return math.Abs(a) <= MaxGal }

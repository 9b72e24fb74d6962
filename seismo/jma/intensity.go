package jma

import (
	"errors"
	"fmt"
	"math"
)

// Errors returned for input the intensity cannot be computed from.
var (
	ErrRate     = errors.New("sample rate must be a positive finite number of Hz")
	ErrLength   = errors.New("components have different lengths")
	ErrTooShort = errors.New("record shorter than 0.3 s")
)

// MinA0 is the floor applied to a0 so that a silent record still has a finite
// intensity. It is far below any sensor's resolution.
const MinA0 = 1e-6

// MinIntensity is the intensity of a record whose a0 is at or below MinA0.
var MinIntensity = intensityOf(MinA0)

// Padding selects how a record is extended before the Fourier transform.
type Padding int

const (
	// PadPow2 zero-pads to the next power of two ≥ the record length, which
	// keeps the circular transform from wrapping the end onto the start.
	PadPow2 Padding = iota
	// PadNone transforms exactly the record (a circular signal). Only useful
	// for synthetic on-bin signals, where padding would create edge transients.
	PadNone
)

// Options tunes Instrumental. The zero value is the reference method.
type Options struct {
	Padding Padding
	// RemoveMean subtracts each component's mean before the transform.
	RemoveMean bool
}

// Result is an official instrumental intensity.
type Result struct {
	A0 float64 // gal: the level the composite exceeds for 0.3 s in total
	I  float64 // unrounded instrumental intensity, 2·log10(a0) + 0.94
}

// Reported is the intensity as JMA publishes it (one decimal).
func (r Result) Reported() float64 { return Reported(r.I) }

// Class is the intensity class of the reported value.
func (r Result) Class() Class { return ClassOf(r.I) }

// Instrumental computes the official JMA instrumental intensity of a
// three-component record (gal) sampled at rateHz, with default Options.
func Instrumental(rateHz float64, ns, ew, ud []float64) (Result, error) {
	return InstrumentalWith(Options{}, rateHz, ns, ew, ud)
}

// InstrumentalWith is Instrumental with explicit options.
func InstrumentalWith(opts Options, rateHz float64, ns, ew, ud []float64) (Result, error) {
	k, err := ExceedanceSamples(rateHz)
	if err != nil {
		return Result{}, err
	}
	n := len(ns)
	if len(ew) != n || len(ud) != n {
		return Result{}, fmt.Errorf("%w: ns %d, ew %d, ud %d", ErrLength, len(ns), len(ew), len(ud))
	}
	if n < k {
		return Result{}, fmt.Errorf("%w: %d samples at %g Hz, need %d", ErrTooShort, n, rateHz, k)
	}
	size := n
	if opts.Padding == PadPow2 {
		size = nextPow2(n)
	}
	filt, err := cachedFilter(size, rateHz)
	if err != nil {
		return Result{}, fmt.Errorf("build filter: %w", err)
	}
	var mns, mew, mud float64
	if opts.RemoveMean {
		mns, mew, mud = mean(ns), mean(ew), mean(ud)
	}
	horiz := make([]complex128, size) // NS + i·EW
	for i := 0; i < n; i++ {
		horiz[i] = complex(ns[i]-mns, ew[i]-mew)
	}
	work := make([]complex128, filt.workLen())
	filt.apply(horiz, work)
	vert := make([]float64, size)
	for i := 0; i < n; i++ {
		vert[i] = ud[i] - mud
	}
	if filt.real != nil {
		filt.applyReal(vert, make([]complex128, size/2+1), work)
	} else {
		// Odd length (PadNone only): filter UD as a complex signal.
		z := make([]complex128, size)
		for i, v := range vert {
			z[i] = complex(v, 0)
		}
		filt.apply(z, work)
		for i, v := range z {
			vert[i] = real(v)
		}
	}
	var top topK
	top.reset(k)
	for i := 0; i < n; i++ {
		h, z := horiz[i], vert[i]
		top.add(real(h)*real(h) + imag(h)*imag(h) + z*z)
	}
	v2, _ := top.kth()
	a0 := math.Sqrt(v2)
	return Result{A0: a0, I: intensityOf(a0)}, nil
}

// ExceedanceSamples returns k = ceil(0.3 s · rate), the number of samples
// that make 0.3 s: a0 is the k-th largest composite value. The rate is taken
// in integer millihertz so that exact decimal rates give exact answers (15
// at 50 Hz, 30 at 100 Hz, 6 at 20 Hz).
func ExceedanceSamples(rateHz float64) (int, error) {
	if !(rateHz > 0) || math.IsInf(rateHz, 0) || rateHz > 1e9 {
		return 0, fmt.Errorf("%w: %v", ErrRate, rateHz)
	}
	mhz := int64(math.Round(rateHz * 1000))
	if mhz < 1 {
		return 0, fmt.Errorf("%w: %v", ErrRate, rateHz)
	}
	// 0.3 s · mhz/1000 Hz = 3·mhz/10000 samples, rounded up.
	return int((3*mhz + 9999) / 10000), nil
}

func intensityOf(a0 float64) float64 {
	return 2*math.Log10(max(a0, MinA0)) + 0.94
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// Reported rounds an instrumental intensity the way JMA publishes it: round at
// the third decimal, then truncate to one decimal. The tiny epsilon lets a
// value written as an exact decimal (5.195, whose float64 is 5.19499999…)
// round as the decimal does; it is far below any meaningful difference.
func Reported(i float64) float64 {
	return float64(tenths(i)) / 10
}

// tenths is the reported value in integer tenths.
func tenths(i float64) int {
	n := math.Floor(100*i + 0.5 + 1e-9)
	return int(math.Floor(n / 10))
}

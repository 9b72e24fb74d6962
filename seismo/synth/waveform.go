package synth

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"

	"shindo.dev/seismo/internal/fft"
)

// Saragoni & Hart (1974) window shape, as used by Boore (2003).
const (
	windowEps = 0.2  // the peak is at ε of the window length
	windowEta = 0.05 // the window has fallen to η at its end
	windowLen = 2.0  // window length / ground-motion duration
)

// Rendering margins: the spectral shaping is zero-phase, so a little energy
// spreads before each onset and after each window; it is kept within the
// buffer and then muted before the P arrival.
const (
	preSeconds  = 2.0
	postSeconds = 4.0
	muteSeconds = 0.2 // raised-cosine ramp ending at the P arrival
)

// nearSurfaceVP is the P velocity under the station (km/s): rays refract
// towards the vertical in the slow near-surface layers, so P arrives mostly
// on the vertical component.
const nearSurfaceVP = 2.0

// arrival is one event's motion at one station, rendered on first use.
type arrival struct {
	ev    Event
	first int64 // sample index (from the generator's start) of ns[0]
	seed  uint64
	ready bool
	ns    []float32
	ew    []float32
	ud    []float32
}

// end is the sample index just past the arrival.
func (a *arrival) end() int64 {
	if !a.ready {
		return math.MaxInt64
	}
	return a.first + int64(len(a.ns))
}

// firstSample works out where an event's rendered motion starts at the
// station (sample index from start) without rendering it.
func (m Model) firstSample(ev Event, pos Position, start time.Time, rate float64) int64 {
	t0 := ev.HypocentralKm(pos)/m.AlphaKmS - preSeconds // after origin
	at := ev.Origin.Sub(start).Seconds() + t0
	return int64(math.Round(at * rate))
}

// plans caches transform plans by length: renders use a handful of powers
// of two, and building a plan costs as much as using it.
var plans sync.Map // int → *fft.Plan

func planFor(n int) *fft.Plan {
	if p, ok := plans.Load(n); ok {
		return p.(*fft.Plan)
	}
	p, _ := plans.LoadOrStore(n, fft.MustPlan(n))
	return p.(*fft.Plan)
}

// render computes the three-component motion (gal) of ev at pos, sampled at
// rate, as a buffer whose first sample is at origin + t0.
func (m Model) render(ev Event, pos Position, seed uint64, rate, siteGain float64) (ns, ew, ud []float32) {
	hyp := ev.HypocentralKm(pos)
	epi := ev.EpicentralKm(pos)
	tP, tS := hyp/m.AlphaKmS, hyp/m.BetaKmS
	t0 := tP - preSeconds
	durS, durP := m.DurationS(ev.Mag, hyp), m.durationP(ev.Mag, hyp)
	winS, winP := windowLen*durS, windowLen*durP
	end := math.Max(tS+winS, tP+winP) + postSeconds
	length := int(math.Ceil((end - t0) * rate))
	n := 1 << bits.Len(uint(length+int(2*rate))) // room for the filter's tails
	dt := 1 / rate

	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// Horizontal S (NS + i·EW), then vertical S + i·P.
	horiz := make([]complex128, n)
	mixed := make([]complex128, n)
	oS, nS := int(math.Round((tS-t0)*rate)), int(math.Round(winS*rate))
	oP, nP := int(math.Round((tP-t0)*rate)), int(math.Round(winP*rate))
	sNS := windowedNoise(rng, nS)
	sEW := windowedNoise(rng, nS)
	sUD := windowedNoise(rng, nS)
	pRay := windowedNoise(rng, nP)
	// A window too short to shape (under two samples) adds nothing.
	for i := 0; i < len(sNS) && oS+i < n; i++ {
		horiz[oS+i] = complex(sNS[i], sEW[i])
		mixed[oS+i] = complex(sUD[i], 0)
	}
	for i := 0; i < len(pRay) && oP+i < n; i++ {
		mixed[oP+i] += complex(0, pRay[i])
	}

	plan := planFor(n)
	work := make([]complex128, plan.WorkLen())
	plan.Forward(horiz, work)
	plan.Forward(mixed, work)

	specS := m.newSpectrum(waveS, ev.Mag, hyp)
	specP := m.newSpectrum(waveP, ev.Mag, hyp)
	df := rate / float64(n)
	// continuous spectrum → DFT lines, at the size ev.Motion gives
	scale := siteGain / dt * m.motionScale(ev, hyp, rate/2, seed)
	for k := 0; k <= n/2; k++ {
		f := float64(k) * df
		aS := specS.at(f) * scale
		aV := aS * m.VerticalS
		aP := specP.at(f) * scale
		kk := (n - k) % n
		// Both spectra are real and even, so each line pair can be shaped
		// independently. horiz: one real filter for both parts.
		horiz[k] *= complex(aS, 0)
		if kk != k {
			horiz[kk] *= complex(aS, 0)
		}
		// mixed = U + i·P with different filters: split the line pair into
		// the spectra of U and P, shape each, and recombine.
		zk, zc := mixed[k], conj(mixed[kk])
		u := (zk + zc) * 0.5              // spectrum of U at k
		p := (zk - zc) * complex(0, -0.5) // spectrum of P at k
		mixed[k] = complex(aV, 0)*u + complex(0, aP)*p
		if kk != k {
			// At −k the spectra are the conjugates.
			mixed[kk] = complex(aV, 0)*conj(u) + complex(0, aP)*conj(p)
		}
	}
	plan.Inverse(horiz, work)
	plan.Inverse(mixed, work)

	// P polarisation: along the ray, refracted towards the vertical.
	sinI := math.Min(1, nearSurfaceVP/m.AlphaKmS*epi/hyp)
	cosI := math.Sqrt(1 - sinI*sinI)
	az := ev.azimuth(pos)
	pN, pE, pZ := sinI*math.Cos(az), sinI*math.Sin(az), cosI

	ns, ew, ud = make([]float32, length), make([]float32, length), make([]float32, length)
	muteEnd := oP
	muteStart := oP - int(math.Round(muteSeconds*rate))
	for i := range ns {
		w := 1.0
		switch {
		case i < muteStart:
			w = 0
		case i < muteEnd:
			x := float64(i-muteStart) / float64(muteEnd-muteStart)
			w = 0.5 * (1 - math.Cos(math.Pi*x))
		}
		h, mx := horiz[i], mixed[i]
		p := imag(mx)
		ns[i] = float32(w * (real(h) + pN*p))
		ew[i] = float32(w * (imag(h) + pE*p))
		ud[i] = float32(w * (real(mx) + pZ*p))
	}
	return ns, ew, ud
}

func conj(z complex128) complex128 { return complex(real(z), -imag(z)) }

// windowedNoise is n samples of Gaussian noise under the Saragoni & Hart
// window, normalised so that the mean squared DFT amplitude over any
// transform length holding it is 1 (Parseval: Σ|X_k|²/N = Σx²), as Boore
// (2003) prescribes before multiplying by the target spectrum.
func windowedNoise(rng *rand.Rand, n int) []float64 {
	if n < 2 {
		return nil
	}
	b := -windowEps * math.Log(windowEta) / (1 + windowEps*(math.Log(windowEps)-1))
	c := b / windowEps
	a := math.Pow(math.E/windowEps, b)
	x := make([]float64, n)
	var sum2 float64
	for i := range x {
		t := float64(i) / float64(n-1) // time / window length
		w := a * math.Pow(t, b) * math.Exp(-c*t)
		x[i] = w * rng.NormFloat64()
		sum2 += x[i] * x[i]
	}
	if sum2 == 0 {
		return x
	}
	norm := 1 / math.Sqrt(sum2)
	for i := range x {
		x[i] *= norm
	}
	return x
}

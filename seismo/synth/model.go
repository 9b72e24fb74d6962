package synth

import (
	"math"
	"sort"
)

// Model holds the parameters of the stochastic point-source model. Units:
// km, s, g/cm³, bar, Hz.
type Model struct {
	StressBar   float64 // Brune stress parameter Δσ
	DensityGCC  float64 // ρ at the source
	BetaKmS     float64 // shear-wave velocity at the source, and of the crust for arrivals
	AlphaKmS    float64 // P-wave velocity of the crust
	RadiationS  float64 // average S radiation pattern RθΦ
	RadiationP  float64 // average P radiation pattern
	Partition   float64 // share of S energy on one horizontal component
	FreeSurface float64 // free-surface amplification
	PCornerMul  float64 // P corner frequency / S corner frequency

	Q0, QEta     float64 // Q(f) = Q0·f^QEta for S
	QPMul        float64 // Q_P / Q_S
	SpreadKneeKm float64 // geometric spreading 1/R to here, R^-0.5 beyond
	DurPerKm     float64 // path duration, s per km
	KappaS       float64 // high-frequency diminution κ0
	VerticalS    float64 // S amplitude on UD relative to a horizontal component

	// SiteFreq and SiteAmp tabulate the site amplification (linear in
	// log f–log amp between points, constant beyond).
	SiteFreq, SiteAmp []float64
}

// DefaultModel is the western-North-America model described in the package
// documentation.
func DefaultModel() Model {
	return Model{
		StressBar:   100,  // Boore (1983): fits WNA PGA and PGV for M 5.0–7.7
		DensityGCC:  2.8,  // Boore (2003)
		BetaKmS:     3.5,  // Boore (2003)
		AlphaKmS:    6.06, // √3·β, a Poisson solid
		RadiationS:  0.55, // Boore & Boatwright (1984), as used by Boore (2003)
		RadiationP:  0.55 * 0.52 / 0.63,
		Partition:   1 / math.Sqrt2, // Boore (2003)
		FreeSurface: 2,              // Boore (2003)
		PCornerMul:  1.5,            // Madariaga (1976)

		Q0:           180, // Raoof et al. (1999), used by Atkinson & Silva (2000)
		QEta:         0.45,
		QPMul:        2.25, // (VP/VS)²·3/4 with losses in shear only
		SpreadKneeKm: 40,   // Atkinson & Silva (2000)
		DurPerKm:     0.05, // Atkinson & Silva (2000)
		KappaS:       0.035,
		VerticalS:    0.5, // V/H of strong-motion PGA is commonly 0.5–0.7 (Bozorgnia & Campbell 2004)

		// Boore & Joyner (1997), generic rock (VS30 ≈ 620 m/s).
		SiteFreq: []float64{0.01, 0.09, 0.16, 0.51, 0.84, 1.25, 2.26, 3.17, 6.05, 16.6, 61.2},
		SiteAmp:  []float64{1.00, 1.10, 1.18, 1.42, 1.58, 1.74, 2.06, 2.25, 2.58, 3.13, 4.00},
	}
}

// Moment is the seismic moment (dyne·cm) of moment magnitude mw, as in
// Boore (2003): log10 M0 = 1.5·M + 16.05.
func Moment(mw float64) float64 { return math.Pow(10, 1.5*mw+16.05) }

// CornerHz is the Brune corner frequency of the S spectrum:
// fc = 4.906e6·β·(Δσ/M0)^(1/3), β in km/s, Δσ in bar, M0 in dyne·cm.
func (m Model) CornerHz(mw float64) float64 {
	return 4.906e6 * m.BetaKmS * math.Cbrt(m.StressBar/Moment(mw))
}

// SaturationKm is the finite-fault pseudo-depth h of Yenier & Atkinson
// (2015): 10^(−0.405 + 0.235·M).
func SaturationKm(mw float64) float64 { return math.Pow(10, -0.405+0.235*mw) }

// EffectiveKm is the distance the point source is evaluated at.
func EffectiveKm(mw, hypoKm float64) float64 {
	h := SaturationKm(mw)
	return math.Sqrt(hypoKm*hypoKm + h*h)
}

// DurationS is the ground-motion duration of the S waves: the source
// duration 1/fc plus the path duration.
func (m Model) DurationS(mw, hypoKm float64) float64 {
	return 1/m.CornerHz(mw) + m.DurPerKm*hypoKm
}

// durationP is the same for the P waves, whose corner is higher.
func (m Model) durationP(mw, hypoKm float64) float64 {
	return 1/(m.PCornerMul*m.CornerHz(mw)) + m.DurPerKm*hypoKm
}

func (m Model) spreading(r float64) float64 {
	if r <= m.SpreadKneeKm {
		return 1 / r
	}
	return 1 / m.SpreadKneeKm * math.Sqrt(m.SpreadKneeKm/r)
}

func (m Model) siteAmp(f float64) float64 {
	fr, am := m.SiteFreq, m.SiteAmp
	if len(fr) == 0 {
		return 1
	}
	if f <= fr[0] {
		return am[0]
	}
	if f >= fr[len(fr)-1] {
		return am[len(am)-1]
	}
	i := sort.SearchFloat64s(fr, f) // fr[i-1] < f ≤ fr[i]
	t := math.Log(f/fr[i-1]) / math.Log(fr[i]/fr[i-1])
	return math.Exp(math.Log(am[i-1]) + t*math.Log(am[i]/am[i-1]))
}

// wave selects the S or P spectrum.
type wave int

const (
	waveS wave = iota
	waveP
)

// spectrum evaluates Fourier amplitude spectra of acceleration (cm/s, i.e.
// gal·s) for one event and distance, with the frequency-independent factors
// computed once.
type spectrum struct {
	m          Model
	w          wave
	level      float64 // C·M0, cm·s
	fc         float64
	r          float64 // effective distance, km
	g          float64 // geometric spreading at r
	velocity   float64 // wave speed, km/s
	q0         float64
	kappaTimes float64 // π·κ
}

func (m Model) newSpectrum(w wave, mw, hypoKm float64) spectrum {
	const r0 = 1e5 // reference distance 1 km, in cm
	r := EffectiveKm(mw, hypoKm)
	s := spectrum{m: m, w: w, r: r, g: m.spreading(r), kappaTimes: math.Pi * m.KappaS}
	rho := m.DensityGCC
	switch w {
	case waveS:
		beta := m.BetaKmS * 1e5 // cm/s
		s.level = m.RadiationS * m.Partition * m.FreeSurface / (4 * math.Pi * rho * beta * beta * beta * r0) * Moment(mw)
		s.fc = m.CornerHz(mw)
		s.velocity = m.BetaKmS
		s.q0 = m.Q0
	case waveP:
		alpha := m.AlphaKmS * 1e5
		s.level = m.RadiationP * m.FreeSurface / (4 * math.Pi * rho * alpha * alpha * alpha * r0) * Moment(mw)
		s.fc = m.PCornerMul * m.CornerHz(mw)
		s.velocity = m.AlphaKmS
		s.q0 = m.Q0 * m.QPMul
	}
	return s
}

// at is the acceleration spectrum at f Hz (f > 0).
func (s *spectrum) at(f float64) float64 {
	if f <= 0 {
		return 0
	}
	w := 2 * math.Pi * f
	x := f / s.fc
	source := s.level * w * w / (1 + x*x)
	q := s.q0 * math.Pow(f, s.m.QEta)
	path := s.g * math.Exp(-math.Pi*f*s.r/(q*s.velocity))
	site := s.m.siteAmp(f) * math.Exp(-s.kappaTimes*f)
	return source * path * site
}

// moments integrates m_k = 2∫(2πf)^k |A(f)|² df for k = 0, 2, 4 (the
// two-sided spectral moments of Boore 2003) with weight(f) applied to A,
// over 0.01–maxHz on a log grid.
func (s *spectrum) moments(maxHz float64, weight func(float64) float64) (m0, m2, m4 float64) {
	const steps = 2000
	lo, hi := math.Log(0.01), math.Log(maxHz)
	dl := (hi - lo) / steps
	for i := 0; i <= steps; i++ {
		f := math.Exp(lo + float64(i)*dl)
		a := s.at(f)
		if weight != nil {
			a *= weight(f)
		}
		w2 := (2 * math.Pi * f) * (2 * math.Pi * f)
		c := 2 * a * a * f * dl // df = f·d(ln f)
		if i == 0 || i == steps {
			c /= 2 // trapezoid ends
		}
		m0 += c
		m2 += c * w2
		m4 += c * w2 * w2
	}
	return m0, m2, m4
}

// peakFactor is the asymptotic Cartwright & Longuet-Higgins (1956) expected
// peak over rms for nz zero crossings (Davenport's form).
func peakFactor(nz float64) float64 {
	if nz < 2 {
		nz = 2
	}
	l := math.Sqrt(2 * math.Log(nz))
	return l + 0.5772/l
}

// PredictPGA is the model's random-vibration prediction of the peak
// acceleration (gal) of one horizontal component of S waves, at hypocentral
// distance hypoKm, for motion sampled up to maxHz (the Nyquist frequency,
// 25 Hz for a 50 Hz station).
func (m Model) PredictPGA(mw, hypoKm, maxHz float64) float64 {
	s := m.newSpectrum(waveS, mw, hypoKm)
	m0, m2, _ := s.moments(maxHz, nil)
	t := m.DurationS(mw, hypoKm)
	rms := math.Sqrt(m0 / t)
	nz := math.Sqrt(m2/m0) / math.Pi * t
	return rms * peakFactor(nz)
}

// PredictIntensity is the model's prediction of the JMA instrumental
// intensity of the S waves: the three components, filtered by the JMA
// weight, are taken as stationary Gaussian noise over the ground-motion
// duration, and a0 is the level their vector sum exceeds for 0.3 s in total.
// weight is the JMA filter gain (jma.Weight), passed in so this package does
// not depend on the intensity code it is tested against.
func (m Model) PredictIntensity(mw, hypoKm, maxHz float64, weight func(float64) float64) float64 {
	s := m.newSpectrum(waveS, mw, hypoKm)
	m0, _, _ := s.moments(maxHz, weight)
	t := m.DurationS(mw, hypoKm)
	sh := math.Sqrt(m0 / t)      // each horizontal component
	sz := m.VerticalS * sh       // vertical
	target := math.Min(0.3/t, 1) // fraction of the time above a0
	exceed := func(a float64) float64 {
		// P(x²+y²+z² > a²) with x, y ~ N(0, sh²), z ~ N(0, sz²): x²+y² is
		// exponential with mean 2sh², so integrate over z.
		const steps = 400
		p := math.Erfc(a / (sz * math.Sqrt2)) // |z| ≥ a
		dz := 2 * a / steps
		for i := 0; i <= steps; i++ {
			z := -a + float64(i)*dz
			c := math.Exp(-z*z/(2*sz*sz)) / (sz * math.Sqrt(2*math.Pi)) * math.Exp(-(a*a-z*z)/(2*sh*sh)) * dz
			if i == 0 || i == steps {
				c /= 2
			}
			p += c
		}
		return p
	}
	lo, hi := 0.0, 20*sh
	for range 100 {
		mid := (lo + hi) / 2
		if exceed(mid) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return 2*math.Log10(lo) + 0.94
}

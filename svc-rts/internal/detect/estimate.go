package detect

import (
	"cmp"
	"math"
	"slices"

	"shindo.dev/lib/township"
	"shindo.dev/seismo/pwave"
	"shindo.dev/seismo/synth"
)

// Estimates
//
// The epicentre and magnitude come from one grid search that explains both
// what the stations measured and when they triggered:
//
//   - amplitude: each station's highest real-time intensity so far against
//     the intensity that seismo/synth's ground-motion model predicts
//     (Model.PredictIntensity, tabulated in table.go) at its hypocentral
//     distance, for the best magnitude at that epicentre (0.1 steps,
//     2.0–8.5), with σ = 0.3 intensity units;
//   - timing: the arrivals against a constant-velocity crust (synth's VP =
//     6.06 km/s and VS = 3.5 km/s): a station's own P-wave pick
//     (seismo/pwave) when it has one from the 15 s before its trigger,
//     with σ = 0.7 s, and otherwise its onset less the trigger latency,
//     with σ = 1 s (a pick is timed to the sample; an onset to the tick,
//     and it lags the arrival by as long as the intensity takes to rise).
//     The P picks of stations not triggered yet that the detection's
//     wave can explain (State.timing) enter this fit too, with the picks'
//     σ, and not the amplitudes': they place an event its first triggered
//     stations see from one side only. A station triggers on
//     the P wave when it is near a large event and on the S wave when it
//     is far or the event small, so each onset is explained by whichever
//     of the two lies nearer the common origin. (With one phase for all,
//     an offshore M5.5 whose far stations trigger on S drifts 100 km out
//     to sea, its origin 30 s early, once most of the network has
//     triggered: shake's TestDetectionAccuracy.)
//
// The search runs on a flat map around the earliest station: ±100 km in
// 10 km steps, then ±10 km in 2 km steps and ±2 km in 0.5 km steps around
// the best point. It uses at most 48 stations, the 24 earliest and 24
// spread evenly over the rest (by onset, then ID), and at most 24 picks of
// stations not triggered, so its cost is bounded.
// Depth is fixed (Config.DepthKm). The trigger latency is 1.5 s: the
// real-time intensity's 1 s hold-back plus half a frame, and the time it
// takes to rise. The
// location is the epicentre's place in Chinese, as the apps show and speak
// it: its county and township, or the nearest county's coast at sea
// (lib/township).
//
// The real-time intensity grows while the waves arrive, so the magnitude
// from intensities starts low and rises with every update (the synthetic
// Hualien M7.4 read 5.4 ten seconds after its origin). The period of the
// first seconds of P does not wait for the shaking: while a detection is
// open its magnitude is at least the median τc magnitude of its P picks
// (pMagnitude; the relation of Wu, Kanamori, Allen & Hauksson 2007, cited
// in seismo/pwave), which reads 6.9 for the M7.4 at +10 s and 6.4–6.8 for
// the M6.4–6.9 scenarios. τc saturates near M7 (a 3 s window cannot show
// a longer rupture), so the intensities take over as they grow; and the
// final magnitude is theirs alone, the type fdsnws-event reports (Mi).
// Pd is measured and carried too, but the relation of Wu & Zhao (2006)
// reads the synthetic P waves about one unit high (seismo/pwave's
// TestSynthetic logs it), so it does not enter the magnitude.
// shake's TestDetectionAccuracy tabulates the errors
// (docs/BENCHMARKS.md).

// observation is one member station as the estimate sees it.
type observation struct {
	id       string
	lat, lon float64
	onset    int64   // Unix ms
	pick     int64   // its own P-wave pick, Unix ms; 0 for none
	peak     float64 // reported intensity (0.1 steps)
}

// pickObservations converts the P picks of stations not triggered for locate.
func pickObservations(picked []Picked) []observation {
	obs := make([]observation, len(picked))
	for k, p := range picked {
		obs[k] = observation{id: p.Station, lat: p.Lat, lon: p.Lon, pick: p.OnsetMs}
	}
	return obs
}

type estimate struct {
	lat, lon float64
	mag      float64
	originMs int64
}

const (
	maxObservations = 48
	sigmaIntensity  = 0.3
	sigmaTimeS      = 1.0
	sigmaPickS      = 0.7
	// maxPickLeadMs is how long before its trigger a station's pick may
	// lie to be the arrival that triggered it: a large event's P reaches
	// a station seconds before its shaking passes the alert level.
	maxPickLeadMs   = 15_000
	maxPickLagMs    = 500
	triggerLatencyS = 1.5
	// phaseRounds is how often the timing fit reassigns the phases.
	phaseRounds = 3
)

var velocities = func() [2]float64 {
	m := synth.DefaultModel()
	return [2]float64{m.AlphaKmS, m.BetaKmS}
}()

// locate runs the grid search over obs (not empty), which it reorders,
// and the P picks only of stations not triggered (pickOnly), which enter
// its timing and not its amplitudes.
func locate(obs, pickOnly []observation, depthKm float64) estimate {
	slices.SortFunc(obs, func(a, b observation) int {
		return cmp.Or(cmp.Compare(a.onset, b.onset), cmp.Compare(a.id, b.id))
	})
	sel := obs
	if len(obs) > maxObservations {
		const early = maxObservations / 2
		sel = slices.Clone(obs[:early])
		rest := obs[early:]
		for k := range maxObservations - early {
			sel = append(sel, rest[k*len(rest)/(maxObservations-early)])
		}
	}
	amplitudes := len(sel)
	sel = append(sel[:len(sel):len(sel)], pickOnly...)
	ref := sel[0]
	cosRef := math.Cos(ref.lat * radPerDeg)
	f := fit{
		depth2: depthKm * depthKm,
		x:      make([]float64, len(sel)),
		y:      make([]float64, len(sel)),
		t:      make([]float64, len(sel)),
		tw:     make([]float64, len(sel)),
		i:      make([]float64, amplitudes),
		r:      make([]float64, len(sel)),
		j:      make([]int, len(sel)),
		w:      make([]float64, len(sel)),
		a:      make([]float64, len(sel)),
	}
	for k, o := range sel {
		f.x[k] = (o.lon - ref.lon) * kmPerDeg * cosRef
		f.y[k] = (o.lat - ref.lat) * kmPerDeg
		f.t[k], f.tw[k] = float64(o.onset-ref.onset)/1000-triggerLatencyS, 1
		if lead := o.onset - o.pick; o.pick != 0 && (k >= amplitudes || lead <= maxPickLeadMs && lead >= -maxPickLagMs) {
			f.t[k], f.tw[k] = float64(o.pick-ref.onset)/1000, (sigmaTimeS*sigmaTimeS)/(sigmaPickS*sigmaPickS)
		}
		if k < amplitudes {
			f.i[k] = o.peak
		}
	}
	var bx, by float64
	best := result{cost: math.Inf(1)}
	for _, stage := range [...]struct{ half, step float64 }{{100, 10}, {10, 2}, {2, 0.5}} {
		cx, cy := bx, by
		n := int(math.Round(stage.half / stage.step))
		for iy := -n; iy <= n; iy++ {
			for ix := -n; ix <= n; ix++ {
				x, y := cx+float64(ix)*stage.step, cy+float64(iy)*stage.step
				if r := f.misfit(x, y); r.cost < best.cost {
					best, bx, by = r, x, y
				}
			}
		}
	}
	return estimate{
		lat:      ref.lat + by/kmPerDeg,
		lon:      ref.lon + bx/(kmPerDeg*cosRef),
		mag:      tableMinMag + float64(best.row)*tableMagStep,
		originMs: ref.onset + int64(math.Round(best.t0*1000)),
	}
}

type fit struct {
	depth2           float64
	x, y, t, i, r, w []float64
	tw               []float64 // weight of each time: 1 for a trigger, more for a pick
	a                []float64 // each onset less its chosen phase's travel time
	j                []int
}

type result struct {
	cost float64
	row  int     // magnitude row of the table
	t0   float64 // origin relative to the earliest onset, s
}

// misfit evaluates an epicentre at (x, y) km from the earliest station.
func (f *fit) misfit(x, y float64) result {
	for k := range f.x {
		dx, dy := f.x[k]-x, f.y[k]-y
		f.r[k] = math.Sqrt(dx*dx + dy*dy + f.depth2)
		f.j[k], f.w[k] = distIndex(f.r[k])
	}
	amp := func(row int) float64 {
		s := 0.0
		for k := range f.i {
			d := f.i[k] - predicted(row, f.j[k], f.w[k])
			s += d * d
		}
		return s
	}
	// Magnitude: every fifth row, then the rows around the best.
	bestRow, bestAmp := 0, math.Inf(1)
	for row := 0; row < tableMags; row += 5 {
		if a := amp(row); a < bestAmp {
			bestRow, bestAmp = row, a
		}
	}
	lo, hi := max(bestRow-4, 0), min(bestRow+4, tableMags-1)
	for row := lo; row <= hi; row++ {
		if row%5 == 0 {
			continue
		}
		if a := amp(row); a < bestAmp {
			bestRow, bestAmp = row, a
		}
	}
	// Timing: each station triggers on the P or the S wave (near stations
	// of a large event on P; far ones, and those of a small event, on S),
	// so each onset is explained by whichever arrival lies nearer the
	// common origin. The origin starts from the all-P and the all-S fits
	// and is refined by reassigning the phases; the better end is kept.
	bestTime, t0 := math.Inf(1), 0.0
	wsum := 0.0
	for _, w := range f.tw {
		wsum += w
	}
	for _, v := range velocities {
		origin := 0.0
		for k := range f.t {
			origin += f.tw[k] * (f.t[k] - f.r[k]/v)
		}
		origin /= wsum
		for range phaseRounds {
			sum := 0.0
			for k := range f.t {
				p, s := f.t[k]-f.r[k]/velocities[0], f.t[k]-f.r[k]/velocities[1]
				if math.Abs(p-origin) <= math.Abs(s-origin) {
					f.a[k] = p
				} else {
					f.a[k] = s
				}
				sum += f.tw[k] * f.a[k]
			}
			origin = sum / wsum
		}
		s := 0.0
		for k := range f.a {
			d := f.a[k] - origin
			s += f.tw[k] * d * d
		}
		if s < bestTime {
			bestTime, t0 = s, origin
		}
	}
	return result{
		cost: bestAmp/(sigmaIntensity*sigmaIntensity) + bestTime/(sigmaTimeS*sigmaTimeS),
		row:  bestRow,
		t0:   t0,
	}
}

// place names the epicentre as the apps show and speak it: county and
// township in Chinese (花蓮縣壽豐鄉), or the nearest county's coast at sea
// (township.Place), with the postal code of the township it lies in or
// nearest to.
func place(lat, lon float64) (string, uint32) {
	t, _ := township.Nearest(lat, lon)
	return township.Place(lat, lon), t.Code
}

// P-wave magnitude (pMagnitude).
const (
	// pSlackMs is how far a station's pick may lie from the P arrival the
	// estimate predicts for it to count as a P pick.
	pSlackMs = 2500
	// minPStations is how many P picks with a τc the magnitude needs.
	minPStations = 3
)

// pMagnitude is the median τc magnitude (pwave.MagnitudeTauC) of the
// members whose complete P-wave measurement the estimate e explains as a P
// pick, when at least minPStations, and at least half of those P picks,
// have a τc. A station gives τc only where the displacement stands well
// above its noise; where most cannot, the event's P waves are weak, and
// the few that can are the noisiest (an M4.5 off Yilan gave 4.8, 6.6 and
// 7.2 from 3 of its 22 P picks).
func pMagnitude(ev *event, e estimate, depthKm float64) (float64, bool) {
	var mags []float64
	picks := 0
	for _, m := range ev.members {
		if !m.p.complete() {
			continue
		}
		epi := distKm(e.lat, e.lon, m.lat, m.lon)
		arrival := float64(e.originMs) + math.Sqrt(epi*epi+depthKm*depthKm)/velocities[0]*1000
		if math.Abs(float64(m.p.OnsetMs)-arrival) > pSlackMs {
			continue
		}
		picks++
		if m.p.TauCS > 0 {
			mags = append(mags, pwave.MagnitudeTauC(float64(m.p.TauCS)))
		}
	}
	if len(mags) < minPStations || 2*len(mags) < picks {
		return 0, false
	}
	slices.Sort(mags)
	n := len(mags)
	return min(max((mags[(n-1)/2]+mags[n/2])/2, MinMagnitude), MaxMagnitude), true
}

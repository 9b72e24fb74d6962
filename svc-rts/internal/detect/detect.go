// Package detect is svc-rts's network trigger: it turns the stations
// triggered at each tick into detections (earthquakes in progress) with an
// ID, a serial, a final flag and estimates of origin time, epicentre,
// magnitude and maximum intensity.
//
// # Determinism
//
// A State advances one tick at a time (Step) and its result is a pure
// function of the sequence of triggered-station lists it was given, which
// the engine derives from station frames alone. Two cores fed the same
// frames therefore publish the same detections with the same IDs and
// serials. Nothing depends on map order, wall-clock time or arrival order;
// every choice breaks ties by station ID. (Floating-point estimates are
// reproducible on one architecture and Go version; cores should run the
// same build.)
//
// # Rules
//
// A station is triggered at a tick when its latest frame (no older than
// 3 s) has real-time intensity at or above the alert threshold. Its pick
// is the tick at which it became triggered (its onset); the pick lasts
// while the station stays triggered.
//
//   - Association: a pick joins an open detection when the station lies
//     within RadiusKm of one of the detection's stations, or when the wave
//     that triggered the detection's first station can have reached it by
//     its onset (within 150 km of that station, at most its distance / VS
//   - 3 s later), or when the detection's estimate explains its onset as
//     the arrival of the P or S wave (±3 s) within the estimate's reach:
//     250 km, or farther where the model predicts, at the estimated
//     magnitude, an intensity no more than one unit below the alert
//     threshold (a large earthquake triggers islands hundreds of km away)
//     — in a sparse network the wavefront reaches stations farther apart
//     than RadiusKm —
//     and its onset is no earlier
//     than Window before the detection's first trigger (an older trigger
//     is something else: a noisy site). Picks are taken in
//     onset order (then station ID), repeatedly, so a detection grows
//     along with the wavefront; the earliest detection wins a pick that
//     two could take.
//   - New detection: among the picks no detection took, MinStations
//     stations pairwise within RadiusKm whose onsets lie within Window of
//     each other. Candidate groups are tried in onset order (then station
//     ID), greedily; a group whose first pick an open detection explains
//     (as above — one founded a moment before in the same tick included)
//     joins it instead of founding another.
//   - ID: "<onset of its earliest station, Unix ms>-<that station's box
//     ID>" ("x" outside every box). It derives from the frames only.
//   - Serial: 1 when created, +1 at every tick where a published field
//     changed: stations, max level, origin time, epicentre, magnitude,
//     location, or final.
//   - Final: when none of its stations has been triggered for EndAfter, or
//     MaxDuration after its first trigger. A final detection never changes
//     again; it stays in the list for Linger so every client sees it end,
//     then leaves. Picks of a finished detection never found another one.
//   - Intensity flash: the townships of its stations, each at the highest
//     level one of them reached since it joined; its own serial grows
//     whenever that list changes. It is not a change of the detection
//     (no serial of its own bumps the detection's).
//   - Long-period ground motion: stations whose long-period class reached 1
//     or more (Sva 5 cm/s, JMA) while the detection is open, whether
//     triggered or not (long-period waves outlast the shaking that
//     triggers), each at its highest; with several open detections a
//     station goes to the one whose epicentre is nearest.
//
// Estimates are described in estimate.go.
package detect

import (
	"cmp"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/lpgm"
	"shindo.dev/seismo/pwave"
)

// Defaults of Config.
const (
	DefaultMinStations = 3
	DefaultRadiusKm    = 60
	DefaultWindow      = 10 * time.Second
	DefaultEndAfter    = 10 * time.Second
	DefaultLinger      = 30 * time.Second
	DefaultMaxDuration = 5 * time.Minute
	// DefaultDepthKm is the depth every detection reports: intensities and
	// trigger times of a surface network barely constrain depth, and most
	// felt Taiwanese earthquakes are shallow.
	DefaultDepthKm = 10

	// DefaultAlertIntensity is svc-rts's default alert-intensity.
	DefaultAlertIntensity = 1.5
)

// Config tunes the trigger. Zero fields take the defaults.
type Config struct {
	MinStations int           // stations to declare a detection
	RadiusKm    float64       // between founding stations, and to join one
	Window      time.Duration // span of the founding stations' onsets
	EndAfter    time.Duration // quiet time that makes a detection final
	Linger      time.Duration // how long a final detection stays listed
	MaxDuration time.Duration // a detection is final this long after its first trigger at the latest
	DepthKm     float64       // reported depth
	// AlertIntensity is the real-time intensity at which a station is
	// triggered (svc-rts's alert-intensity); it sets how far an estimate
	// reaches.
	AlertIntensity float64
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.MinStations == 0 {
		c.MinStations = DefaultMinStations
	}
	if c.RadiusKm == 0 {
		c.RadiusKm = DefaultRadiusKm
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.EndAfter == 0 {
		c.EndAfter = DefaultEndAfter
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = DefaultMaxDuration
	}
	if c.DepthKm == 0 {
		c.DepthKm = DefaultDepthKm
	}
	if c.AlertIntensity == 0 {
		c.AlertIntensity = DefaultAlertIntensity
	}
	return c
}

// Validate checks a configuration after WithDefaults.
func (c Config) Validate() error {
	var errs []error
	if c.MinStations < 2 || c.MinStations > 1000 {
		errs = append(errs, errors.New("detect-stations must be between 2 and 1000"))
	}
	if !(c.RadiusKm >= 1 && c.RadiusKm <= 500) {
		errs = append(errs, errors.New("detect-radius-km must be between 1 and 500"))
	}
	if c.Window < 500*time.Millisecond || c.Window > time.Minute {
		errs = append(errs, errors.New("detect-window must be between 500ms and 1m"))
	}
	if c.EndAfter < time.Second || c.Linger < 0 || c.MaxDuration < c.EndAfter {
		errs = append(errs, errors.New("detect-end-after must be at least 1s, detect-linger not negative, detect-max-duration at least detect-end-after"))
	}
	if !(c.DepthKm > 0 && c.DepthKm <= 700) {
		errs = append(errs, errors.New("depth must be between 0 and 700 km"))
	}
	return errors.Join(errs...)
}

// Trigger is a station triggered at a tick.
type Trigger struct {
	Station   string
	Lat, Lon  float64
	Box       uint32 // area of the station, when InBox
	InBox     bool
	Code      uint32  // township postal code, 0 if unknown
	Intensity float32 // real-time intensity of its latest frame
	P         PWave   // the P-wave measurement of that frame, zero for none
}

// Picked is a station that picked a P wave at a tick without being
// triggered: its shaking is still below the alert level, because it is far
// or the event young, but the time of its pick helps place the event.
type Picked struct {
	Station  string
	Lat, Lon float64
	OnsetMs  int64 // the pick, Unix ms
}

// PWave is a station's own measurement of the first seconds of a wave it
// picked (station.v1.PWave, seismo/pwave).
type PWave struct {
	OnsetMs  int64 // time of the pick, Unix ms; 0 for none
	WindowMs int32 // length measured, up to pwave.WindowMs
	PdCm     float32
	TauCS    float32 // 0 when the station could not tell
}

// complete reports whether w covers the whole window the magnitude
// relations are fitted to.
func (w PWave) complete() bool { return w.OnsetMs != 0 && w.WindowMs >= pwave.WindowMs }

// LongPeriod is a station whose latest frame at a tick shows long-period
// ground motion of class 1 or more.
type LongPeriod struct {
	Station  string
	Lat, Lon float64
	SvaCms   float32 // absolute velocity response of its latest frame
}

// Flash is what a detection has lit so far: the intensity flash by
// township, and the long-period ground motion by station. A published
// Flash is never modified; a change makes a new one.
type Flash struct {
	Areas  []AreaLevel // by code, levels 1–9
	Serial uint32      // 1 with the first areas, +1 at every change of Areas
	LPGM   []StationLPGM
}

// AreaLevel is a township at an intensity level.
type AreaLevel struct{ Code, Level uint32 }

// StationLPGM is a station's long-period class and the response that gave
// it.
type StationLPGM struct {
	Station string
	Level   uint32  // 1–4
	SvaCms  float32 // highest, rounded to 0.1 cm/s
}

// Detection is what is published about a detection.
type Detection struct {
	ID             string
	Serial         uint32
	Final          bool
	OriginMs       int64   // estimated origin time, Unix ms (100 ms steps)
	Lat, Lon       float64 // estimated epicentre, degrees (0.01° steps)
	DepthKm        float64
	Mag            float64 // estimated magnitude (0.1 steps)
	Loc            string  // the epicentre's place in Chinese: county and township, or the nearest county's coast
	LocCode        uint32  // postal code of the township it lies in or nearest to
	MaxLevel       uint32  // highest intensity level 0–9 at its stations
	FirstTriggerMs int64   // onset of its earliest station
	UpdatedMs      int64   // tick of the latest serial
	Stations       int     // member stations
	Flash          *Flash  // nil until a station lit an area or a long-period class
}

// sameContent compares everything but the serial, its tick and the flash,
// which has its own serial.
func sameContent(a, b Detection) bool {
	a.Serial, a.UpdatedMs, a.Flash = b.Serial, b.UpdatedMs, b.Flash
	return a == b
}

type pick struct {
	onset    int64
	event    string // ID of the detection it joined, "" for none
	consumed bool   // its detection ended: it may not found another
}

type member struct {
	lat, lon float64
	code     uint32
	onset    int64
	peak     float32 // highest intensity since it joined
	p        PWave   // its first pick since it joined, with the longest window seen
}

type event struct {
	pub        Detection
	members    map[string]member
	longPeriod map[string]float32 // highest Sva of the stations attributed to it
	// picked are the P picks of stations not triggered that its wave
	// explains (timing), by pick then station ID. They are derived anew
	// from every tick's input, so they are not saved.
	picked        []Picked
	lastTriggered int64
	finalAt       int64
	stale         bool // inputs of the estimate changed since it was made
}

// State is the trigger's state after a tick. It is not safe for
// concurrent use.
type State struct {
	cfg    Config
	picks  map[string]pick
	events []*event // by first trigger, then ID
}

// New returns an empty state; cfg gets WithDefaults.
func New(cfg Config) *State {
	return &State{cfg: cfg.WithDefaults(), picks: map[string]pick{}}
}

// Clone returns an independent copy.
func (s *State) Clone() *State {
	c := &State{cfg: s.cfg, picks: maps.Clone(s.picks), events: make([]*event, len(s.events))}
	for i, ev := range s.events {
		e := *ev
		e.members = maps.Clone(ev.members)
		e.longPeriod = maps.Clone(ev.longPeriod)
		e.picked = slices.Clone(ev.picked)
		c.events[i] = &e
	}
	return c
}

// Near reports whether a station of detection id lies within km of (lat,
// lon).
func (s *State) Near(id string, lat, lon, km float64) bool {
	for _, ev := range s.events {
		if ev.pub.ID != id {
			continue
		}
		for _, m := range ev.members {
			if distKm(m.lat, m.lon, lat, lon) <= km {
				return true
			}
		}
	}
	return false
}

// Earliest is the member of listed detection id that sorts first by onset
// and then station ID, the order in which a founding names its detection.
func (s *State) Earliest(id string) (string, bool) {
	for _, ev := range s.events {
		if ev.pub.ID != id {
			continue
		}
		first, onset := "", int64(math.MaxInt64)
		for sid, m := range ev.members {
			if m.onset < onset || (m.onset == onset && sid < first) {
				first, onset = sid, m.onset
			}
		}
		return first, first != ""
	}
	return "", false
}

// Detections returns the listed detections, by first trigger then ID.
func (s *State) Detections() []Detection {
	out := make([]Detection, len(s.events))
	for i, ev := range s.events {
		out[i] = ev.pub
	}
	return out
}

// Step advances the state to tick t (Unix ms), given the stations
// triggered at t, those showing long-period ground motion, and those with a
// P pick that are not triggered. trig is sorted by station ID in place.
func (s *State) Step(t int64, trig []Trigger, lp []LongPeriod, picked []Picked) {
	slices.SortFunc(trig, func(a, b Trigger) int { return cmp.Compare(a.Station, b.Station) })
	trig = slices.CompactFunc(trig, func(a, b Trigger) bool { return a.Station == b.Station })
	index := make(map[string]int, len(trig))
	for i, tr := range trig {
		index[tr.Station] = i
	}
	// Picks end with their trigger and start with it.
	for id := range s.picks {
		if _, ok := index[id]; !ok {
			delete(s.picks, id)
		}
	}
	byID := make(map[string]*event, len(s.events))
	for _, ev := range s.events {
		byID[ev.pub.ID] = ev
	}
	for _, tr := range trig {
		p, ok := s.picks[tr.Station]
		if !ok {
			s.picks[tr.Station] = pick{onset: t}
			continue
		}
		if ev := byID[p.event]; ev != nil && !ev.pub.Final {
			ev.lastTriggered = t
			m := ev.members[tr.Station]
			if tr.Intensity > m.peak {
				if jma.Reported(float64(tr.Intensity)) != jma.Reported(float64(m.peak)) {
					ev.stale = true
				}
				m.peak = tr.Intensity
				ev.members[tr.Station] = m
			}
			if m.takeP(tr.P) {
				ev.members[tr.Station] = m
				ev.stale = true
			}
		}
	}

	cands := s.candidates(trig, index)
	if len(cands) > 0 {
		cands = s.associate(t, cands, trig)
		if s.found(t, cands, trig) {
			cands = slices.DeleteFunc(cands, func(c int) bool { return s.picks[trig[c].Station].event != "" })
			s.associate(t, cands, trig)
		}
	}
	s.attribute(lp)
	s.timing(picked)
	s.lifecycle(t)
}

// Picks of stations not triggered (timing).
const (
	// maxPicked is the most such picks one detection's estimate takes.
	maxPicked = 24
	// pickedSlackMs is how much later (or earlier) than the P wave could
	// have arrived from a detection's earliest pick such a pick may lie.
	pickedSlackMs = 500
)

// timing gives each open detection the P picks of stations not triggered
// that its wave can explain, and marks its estimate stale when they
// change. A detection's first alert comes from its first three or four
// triggered stations; where they stand on one side of it (an event at
// sea, seen from the coast), their three picks leave its distance to the
// trade-off with its origin time, and the amplitudes, scattered from
// station to station, decide it (the Hualien M7.4 placed 17 km south on
// Lin (2009)'s motion). Stations further out have picked the same P wave
// by then without shaking enough to trigger, and their picks close the
// trade-off. A pick is taken when it lies within RadiusKm of the member
// with the earliest pick and no earlier or later than the P wave could
// have taken between the two (distance / VP, and pickedSlackMs): a pick of
// another event or of noise seldom passes. The earliest maxPicked are
// kept; they enter the timing only (estimate.go).
func (s *State) timing(picked []Picked) {
	for _, ev := range s.events {
		if ev.pub.Final {
			continue
		}
		refID, ref := "", member{}
		for id, m := range ev.members {
			if m.p.OnsetMs != 0 && (refID == "" || m.p.OnsetMs < ref.p.OnsetMs || (m.p.OnsetMs == ref.p.OnsetMs && id < refID)) {
				refID, ref = id, m
			}
		}
		var take []Picked
		if refID != "" {
			for _, p := range picked {
				if _, member := ev.members[p.Station]; member {
					continue
				}
				km := distKm(ref.lat, ref.lon, p.Lat, p.Lon)
				if km > s.cfg.RadiusKm {
					continue
				}
				reach := km/velocities[0]*1000 + pickedSlackMs
				if d := float64(p.OnsetMs - ref.p.OnsetMs); d > reach || d < -reach {
					continue
				}
				take = append(take, p)
			}
			slices.SortFunc(take, func(a, b Picked) int {
				return cmp.Or(cmp.Compare(a.OnsetMs, b.OnsetMs), cmp.Compare(a.Station, b.Station))
			})
			take = take[:min(len(take), maxPicked)]
		}
		if !slices.Equal(take, ev.picked) {
			ev.picked, ev.stale = take, true
		}
	}
}

// attribute gives each long-period station to the open detection whose
// epicentre is nearest (the first one on a tie), keeping its highest Sva.
func (s *State) attribute(lp []LongPeriod) {
	var open []*event
	for _, ev := range s.events {
		if !ev.pub.Final {
			open = append(open, ev)
		}
	}
	if len(open) == 0 {
		return
	}
	for _, l := range lp {
		if lpgm.Class(float64(l.SvaCms)) < 1 { // NaN too
			continue
		}
		best, bestKm := open[0], math.Inf(1)
		if len(open) > 1 {
			for _, ev := range open {
				if d := distKm(l.Lat, l.Lon, ev.pub.Lat, ev.pub.Lon); d < bestKm {
					best, bestKm = ev, d
				}
			}
		}
		if best.longPeriod == nil {
			best.longPeriod = map[string]float32{}
		}
		if l.SvaCms > best.longPeriod[l.Station] {
			best.longPeriod[l.Station] = l.SvaCms
		}
	}
}

// candidates returns the indices in trig of the picks no detection holds,
// by onset then station ID.
func (s *State) candidates(trig []Trigger, index map[string]int) []int {
	var out []int
	for id, p := range s.picks {
		if p.event == "" && !p.consumed {
			out = append(out, index[id])
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		return cmp.Or(cmp.Compare(s.picks[trig[a].Station].onset, s.picks[trig[b].Station].onset), cmp.Compare(trig[a].Station, trig[b].Station))
	})
	return out
}

// maxPasses bounds the association passes of one tick; a chain longer than
// that completes at the next tick.
const maxPasses = 8

// associate lets candidate picks join open detections and returns those
// left over.
func (s *State) associate(t int64, cands []int, trig []Trigger) []int {
	var open []*event
	for _, ev := range s.events {
		if !ev.pub.Final {
			open = append(open, ev)
		}
	}
	if len(open) == 0 {
		return cands
	}
	window := s.cfg.Window.Milliseconds()
	idx := newCellIndex(s.cfg.RadiusKm)
	for _, ev := range open {
		for _, m := range ev.members {
			idx.add(m.lat, m.lon, ev)
		}
	}
	for range maxPasses {
		joined := false
		for _, c := range cands {
			tr := &trig[c]
			p := s.picks[tr.Station]
			if p.event != "" {
				continue
			}
			// Only detections that started at most Window after the pick
			// can hold it: an older trigger is something else.
			var fit []*event
			for _, ev := range open {
				if p.onset >= ev.pub.FirstTriggerMs-window {
					fit = append(fit, ev)
				}
			}
			ev := idx.nearest(tr.Lat, tr.Lon, s.cfg.RadiusKm, fit)
			if ev == nil {
				ev = s.explained(tr, p.onset, fit)
			}
			if ev == nil {
				continue
			}
			s.join(t, ev, tr, p)
			idx.add(tr.Lat, tr.Lon, ev)
			joined = true
		}
		if !joined {
			break
		}
	}
	return slices.DeleteFunc(cands, func(c int) bool { return s.picks[trig[c].Station].event != "" })
}

// Travel times that let a pick beyond RadiusKm of a detection's stations
// join it: the P wave (the estimate's crust, velocities[0]) is the
// earliest a station can trigger, the S wave (velocities[1]) carries the
// strong shaking, and the estimate's own error gets explainSlackMs either
// side. explainMinKm is how far every estimate reaches; reachMargin is how
// far below the alert threshold a predicted intensity still counts as
// reaching a station (one unit: the scatter of site amplification about
// the model).
const (
	explainSlackMs = 3000
	explainMinKm   = 250
	reachMargin    = 1.0
)

// explained returns the earliest of the open detections fit whose
// estimate — origin time and epicentre, from at least MinStations —
// explains a pick's onset as the arrival of its P or S wave, within the
// estimate's reach. A sparse network has stations farther apart than
// RadiusKm, and a large earthquake triggers outlying islands: without
// this, the wavefront reaching them founds a second detection of the same
// earthquake, and clients get two alerts for one. It reads only the
// detections' published estimates, so it is as deterministic as they are.
func (s *State) explained(tr *Trigger, onset int64, fit []*event) *event {
	for _, ev := range fit {
		if reached(ev, tr, onset) {
			return ev
		}
		d := &ev.pub
		if d.Stations < s.cfg.MinStations || d.OriginMs == 0 {
			continue
		}
		dist := math.Hypot(distKm(d.Lat, d.Lon, tr.Lat, tr.Lon), d.DepthKm)
		if dist > reachKm(d.Mag, s.cfg.AlertIntensity-reachMargin) {
			continue
		}
		earliest := d.OriginMs + int64(dist/max(velocities[0], velocities[1])*1000) - explainSlackMs
		latest := d.OriginMs + int64(dist/min(velocities[0], velocities[1])*1000) + explainSlackMs
		if onset >= earliest && onset <= latest {
			return ev
		}
	}
	return nil
}

// reachKm is the hypocentral distance, at least explainMinKm, out to which
// the model predicts an intensity of at least level at magnitude mag: the
// farthest column of the table at or above it, interpolated to the next.
func reachKm(mag, level float64) float64 {
	km := float64(explainMinKm)
	for j := range tableDists {
		d := math.Pow(10, tableLogMinKm+float64(j)*tableLogStep)
		if PredictIntensity(mag, d) < level {
			break
		}
		km = max(km, d)
	}
	return km
}

// wavefrontMaxKm bounds reached: farther than this from a detection's
// first station, only its estimate can explain a pick.
const wavefrontMaxKm = 150

// reached tells whether the wave that triggered a detection's first
// station can have triggered a station D km from it by onset, wherever the
// epicentre: no wave is slower than the S wave, so it arrives no later than
// D / VS after the first trigger (plus the slack). This needs no estimate,
// which three stations seconds into an earthquake cannot yet give well:
// two clusters of a sparse network shaken at almost the same time, each
// founding a detection before the other has an estimate, are one
// earthquake.
func reached(ev *event, tr *Trigger, onset int64) bool {
	var first *member
	var firstID string
	for id, m := range ev.members {
		if first == nil || m.onset < first.onset || m.onset == first.onset && id < firstID {
			mm := m
			first, firstID = &mm, id
		}
	}
	if first == nil {
		return false
	}
	dist := distKm(first.lat, first.lon, tr.Lat, tr.Lon)
	if dist > wavefrontMaxKm {
		return false
	}
	return onset-first.onset <= int64(dist/min(velocities[0], velocities[1])*1000)+explainSlackMs
}

func (s *State) join(t int64, ev *event, tr *Trigger, p pick) {
	p.event = ev.pub.ID
	s.picks[tr.Station] = p
	m, ok := ev.members[tr.Station]
	if !ok {
		m = member{lat: tr.Lat, lon: tr.Lon, code: tr.Code, onset: p.onset}
	}
	m.peak = max(m.peak, tr.Intensity)
	m.takeP(tr.P)
	ev.members[tr.Station] = m
	ev.lastTriggered = t
	ev.stale = true
}

// takeP keeps a member's first pick and the growing window of that pick,
// and reports whether the estimate must be made again: when the pick
// arrives (its time places the event) and when its window completes (its
// τc counts for the magnitude). A later pick of the same station (its S
// wave, a second event) never replaces the first.
func (m *member) takeP(w PWave) bool {
	switch {
	case w.OnsetMs == 0:
		return false
	case m.p.OnsetMs == 0:
		m.p = w
		return true
	case w.OnsetMs != m.p.OnsetMs || w.WindowMs <= m.p.WindowMs:
		return false
	}
	done := m.p.complete()
	m.p = w
	return w.complete() && !done
}

// found declares new detections among the candidates and reports whether
// it did.
func (s *State) found(t int64, cands []int, trig []Trigger) bool {
	if len(cands) < s.cfg.MinStations {
		return false
	}
	window := s.cfg.Window.Milliseconds()
	taken := make([]bool, len(cands))
	created := false
	group := make([]int, 0, s.cfg.MinStations) // positions in cands
	for i := range cands {
		if taken[i] {
			continue
		}
		group = append(group[:0], i)
		lo := s.picks[trig[cands[i]].Station].onset
		hi := lo
		for j := range cands {
			if j == i || taken[j] {
				continue
			}
			on := s.picks[trig[cands[j]].Station].onset
			nlo, nhi := min(lo, on), max(hi, on)
			if nhi-nlo > window {
				continue
			}
			near := true
			for _, g := range group {
				a, b := &trig[cands[g]], &trig[cands[j]]
				if distKm(a.Lat, a.Lon, b.Lat, b.Lon) > s.cfg.RadiusKm {
					near = false
					break
				}
			}
			if near {
				group = append(group, j)
				lo, hi = nlo, nhi
			}
		}
		if len(group) < s.cfg.MinStations {
			continue
		}
		// The earliest station names the detection: cands is in onset
		// order, so it is the group's lowest position.
		first := &trig[cands[slices.Min(group)]]
		onset := s.picks[first.Station].onset
		// A group the wave of an open detection explains — one founded
		// earlier in this very tick, as two clusters of a sparse network
		// shaken together are — joins it instead.
		var fit []*event
		for _, ev := range s.events {
			if !ev.pub.Final && onset >= ev.pub.FirstTriggerMs-window {
				fit = append(fit, ev)
			}
		}
		if ev := s.explained(first, onset, fit); ev != nil {
			for _, g := range group {
				taken[g] = true
				tr := &trig[cands[g]]
				s.join(t, ev, tr, s.picks[tr.Station])
			}
			created = true
			continue
		}
		box := "x"
		if first.InBox {
			box = strconv.FormatUint(uint64(first.Box), 10)
		}
		ev := &event{
			pub:     Detection{ID: strconv.FormatInt(onset, 10) + "-" + box, FirstTriggerMs: onset, DepthKm: s.cfg.DepthKm},
			members: make(map[string]member, len(group)),
		}
		for _, g := range group {
			taken[g] = true
			tr := &trig[cands[g]]
			s.join(t, ev, tr, s.picks[tr.Station])
		}
		pos, _ := slices.BinarySearchFunc(s.events, ev, func(a, b *event) int {
			return cmp.Or(cmp.Compare(a.pub.FirstTriggerMs, b.pub.FirstTriggerMs), cmp.Compare(a.pub.ID, b.pub.ID))
		})
		s.events = slices.Insert(s.events, pos, ev)
		created = true
	}
	return created
}

// lifecycle ends quiet detections, drops those final for long enough, and
// updates estimates and serials.
func (s *State) lifecycle(t int64) {
	endAfter, linger, maxDur := s.cfg.EndAfter.Milliseconds(), s.cfg.Linger.Milliseconds(), s.cfg.MaxDuration.Milliseconds()
	s.events = slices.DeleteFunc(s.events, func(ev *event) bool {
		return ev.pub.Final && t-ev.finalAt >= linger
	})
	for _, ev := range s.events {
		if ev.pub.Final {
			continue
		}
		next := ev.pub
		if t-ev.lastTriggered >= endAfter || t-ev.pub.FirstTriggerMs >= maxDur {
			next.Final = true
			ev.finalAt = t
			s.consume(ev.pub.ID)
			// The final magnitude is the intensities' alone (estimate.go).
			s.estimate(ev, &next)
			ev.stale = false
		} else if ev.stale {
			s.estimate(ev, &next)
			ev.stale = false
		}
		if ev.pub.Serial == 0 || !sameContent(next, ev.pub) {
			next.Serial = ev.pub.Serial + 1
			next.UpdatedMs = t
			ev.pub = next
		}
		ev.pub.Flash = ev.flash()
	}
}

// flash returns the event's flash: the one published if nothing changed.
func (ev *event) flash() *Flash {
	byCode := map[uint32]uint32{}
	for _, m := range ev.members {
		if l := uint32(jma.ClassOf(float64(m.peak)).Level()); m.code != 0 && l >= 1 {
			byCode[m.code] = max(byCode[m.code], l)
		}
	}
	areas := make([]AreaLevel, 0, len(byCode))
	for code, l := range byCode {
		areas = append(areas, AreaLevel{code, l})
	}
	slices.SortFunc(areas, func(a, b AreaLevel) int { return cmp.Compare(a.Code, b.Code) })
	long := make([]StationLPGM, 0, len(ev.longPeriod))
	for id, sva := range ev.longPeriod {
		long = append(long, StationLPGM{Station: id, Level: uint32(lpgm.Class(float64(sva))), SvaCms: float32(math.Round(float64(sva)*10) / 10)})
	}
	slices.SortFunc(long, func(a, b StationLPGM) int { return cmp.Compare(a.Station, b.Station) })
	old := ev.pub.Flash
	if old == nil {
		if len(areas) == 0 && len(long) == 0 {
			return nil
		}
		old = &Flash{}
	}
	if slices.Equal(old.Areas, areas) && slices.Equal(old.LPGM, long) {
		return ev.pub.Flash
	}
	f := &Flash{Areas: areas, Serial: old.Serial, LPGM: long}
	if !slices.Equal(old.Areas, areas) {
		f.Serial++
	}
	return f
}

// estimate fills the estimates of d from ev's stations.
func (s *State) estimate(ev *event, d *Detection) {
	obs := make([]observation, 0, len(ev.members))
	var maxLevel uint32
	for id, m := range ev.members {
		obs = append(obs, observation{id: id, lat: m.lat, lon: m.lon, onset: m.onset, pick: m.p.OnsetMs, peak: jma.Reported(float64(m.peak))})
		maxLevel = max(maxLevel, uint32(jma.ClassOf(float64(m.peak)).Level()))
	}
	e := locate(obs, pickObservations(ev.picked), s.cfg.DepthKm)
	d.Stations = len(ev.members)
	d.MaxLevel = maxLevel
	d.OriginMs = int64(math.Round(float64(e.originMs)/100)) * 100
	d.Lat = math.Round(e.lat*100) / 100
	d.Lon = math.Round(e.lon*100) / 100
	mag := e.mag
	if mp, ok := pMagnitude(ev, e, s.cfg.DepthKm); ok && !d.Final {
		mag = max(mag, mp)
	}
	d.Mag = math.Round(mag*10) / 10
	d.Loc, d.LocCode = place(d.Lat, d.Lon)
}

const (
	kmPerDeg  = 6371.0 * math.Pi / 180
	radPerDeg = math.Pi / 180
)

// distKm is the distance between two points on a local flat map, accurate
// to a fraction of a percent over the few hundred km of a detection.
func distKm(lat1, lon1, lat2, lon2 float64) float64 {
	dy := (lat2 - lat1) * kmPerDeg
	dx := (lon2 - lon1) * kmPerDeg * math.Cos((lat1+lat2)/2*radPerDeg)
	return math.Sqrt(dx*dx + dy*dy)
}

// cellIndex buckets the stations of open detections into cells at least
// one radius wide, so a pick is compared with the stations of the nine
// cells around it only.
type cellIndex struct {
	dLat, dLon float64
	cells      map[[2]int32][]indexed
}

type indexed struct {
	lat, lon float64
	ev       *event
}

func newCellIndex(radiusKm float64) *cellIndex {
	d := radiusKm / kmPerDeg
	// Longitude cells are widened for latitudes up to 70°: beyond that a
	// degree of longitude is too short for one cell to cover the radius,
	// and no shindo network lies there.
	return &cellIndex{dLat: d, dLon: d / math.Cos(70*radPerDeg), cells: map[[2]int32][]indexed{}}
}

func (c *cellIndex) key(lat, lon float64) [2]int32 {
	return [2]int32{int32(math.Floor(lat / c.dLat)), int32(math.Floor(lon / c.dLon))}
}

func (c *cellIndex) add(lat, lon float64, ev *event) {
	k := c.key(lat, lon)
	c.cells[k] = append(c.cells[k], indexed{lat, lon, ev})
}

// nearest returns the first detection in order (open) with a station
// within radius of (lat, lon), or nil.
func (c *cellIndex) nearest(lat, lon, radius float64, order []*event) *event {
	k := c.key(lat, lon)
	var found map[*event]bool
	for dy := int32(-1); dy <= 1; dy++ {
		for dx := int32(-1); dx <= 1; dx++ {
			for _, m := range c.cells[[2]int32{k[0] + dy, k[1] + dx}] {
				if found[m.ev] || distKm(lat, lon, m.lat, m.lon) > radius {
					continue
				}
				if len(order) == 1 && order[0] == m.ev {
					return m.ev
				}
				if found == nil {
					found = map[*event]bool{}
				}
				found[m.ev] = true
			}
		}
	}
	for _, ev := range order {
		if found[ev] {
			return ev
		}
	}
	return nil
}

package detect

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"shindo.dev/seismo/pwave"
)

// Saved is a State in plain values, to move it to another core: a core
// whose input broke adopts its peer's, so both name the events in progress
// alike. Restore checks it as input from outside.
type Saved struct {
	Picks  []SavedPick  // by station ID
	Events []SavedEvent // by first trigger, then ID
}

// SavedPick is a triggered station's pick.
type SavedPick struct {
	Station  string
	OnsetMs  int64
	Event    string // ID of the detection it joined, "" for none
	Consumed bool
}

// SavedEvent is a listed detection and what its estimates come from.
type SavedEvent struct {
	Pub             Detection
	Members         []SavedMember // by station ID
	LongPeriod      []StationSva  // by station ID
	LastTriggeredMs int64
	FinalAtMs       int64
	Stale           bool
}

// SavedMember is a station of a detection.
type SavedMember struct {
	Station  string
	Lat, Lon float64
	Code     uint32
	OnsetMs  int64
	Peak     float32
	P        PWave // zero for none
}

// StationSva is a station's highest long-period response.
type StationSva struct {
	Station string
	SvaCms  float32
}

// Save returns the state's values.
func (s *State) Save() Saved {
	v := Saved{Picks: make([]SavedPick, 0, len(s.picks)), Events: make([]SavedEvent, 0, len(s.events))}
	for id, p := range s.picks {
		v.Picks = append(v.Picks, SavedPick{Station: id, OnsetMs: p.onset, Event: p.event, Consumed: p.consumed})
	}
	slices.SortFunc(v.Picks, func(a, b SavedPick) int { return cmp.Compare(a.Station, b.Station) })
	for _, ev := range s.events {
		e := SavedEvent{Pub: ev.pub, LastTriggeredMs: ev.lastTriggered, FinalAtMs: ev.finalAt, Stale: ev.stale,
			Members: make([]SavedMember, 0, len(ev.members)), LongPeriod: make([]StationSva, 0, len(ev.longPeriod))}
		for id, m := range ev.members {
			e.Members = append(e.Members, SavedMember{Station: id, Lat: m.lat, Lon: m.lon, Code: m.code, OnsetMs: m.onset, Peak: m.peak, P: m.p})
		}
		slices.SortFunc(e.Members, func(a, b SavedMember) int { return cmp.Compare(a.Station, b.Station) })
		for id, sva := range ev.longPeriod {
			e.LongPeriod = append(e.LongPeriod, StationSva{Station: id, SvaCms: sva})
		}
		slices.SortFunc(e.LongPeriod, func(a, b StationSva) int { return cmp.Compare(a.Station, b.Station) })
		v.Events = append(v.Events, e)
	}
	return v
}

// Bounds of a Saved that Restore accepts: far above any real network's
// (a detection holds at most the network's stations), low enough that a
// hostile or broken peer cannot make a core hold much.
const (
	MaxSavedStations = 100_000 // picks, and members of one detection
	MaxSavedEvents   = 1_000
	maxSavedIDLen    = 64
)

// Restore rebuilds a State under cfg from v, which it checks: counts and
// strings bounded, numbers finite, detections in order with unique IDs,
// picks joined to listed detections only.
func Restore(cfg Config, v Saved) (*State, error) {
	if len(v.Picks) > MaxSavedStations || len(v.Events) > MaxSavedEvents {
		return nil, fmt.Errorf("detect: saved state too large: %d picks, %d detections", len(v.Picks), len(v.Events))
	}
	s := New(cfg)
	byID := make(map[string]*event, len(v.Events))
	for i, e := range v.Events {
		if err := checkSavedEvent(e); err != nil {
			return nil, fmt.Errorf("detect: saved detection %d: %w", i, err)
		}
		if byID[e.Pub.ID] != nil {
			return nil, fmt.Errorf("detect: saved detection %q twice", e.Pub.ID)
		}
		if i > 0 {
			prev := v.Events[i-1].Pub
			if cmp.Or(cmp.Compare(prev.FirstTriggerMs, e.Pub.FirstTriggerMs), cmp.Compare(prev.ID, e.Pub.ID)) > 0 {
				return nil, errors.New("detect: saved detections out of order")
			}
		}
		ev := &event{pub: e.Pub, lastTriggered: e.LastTriggeredMs, finalAt: e.FinalAtMs, stale: e.Stale,
			members: make(map[string]member, len(e.Members))}
		for _, m := range e.Members {
			ev.members[m.Station] = member{lat: m.Lat, lon: m.Lon, code: m.Code, onset: m.OnsetMs, peak: m.Peak, p: m.P}
		}
		if len(e.LongPeriod) > 0 {
			ev.longPeriod = make(map[string]float32, len(e.LongPeriod))
			for _, l := range e.LongPeriod {
				ev.longPeriod[l.Station] = l.SvaCms
			}
		}
		byID[e.Pub.ID] = ev
		s.events = append(s.events, ev)
	}
	for _, p := range v.Picks {
		switch {
		case !validID(p.Station):
			return nil, fmt.Errorf("detect: saved pick of station %.80q", p.Station)
		case p.OnsetMs <= 0:
			return nil, fmt.Errorf("detect: saved pick of %s: onset %d", p.Station, p.OnsetMs)
		case p.Event != "" && byID[p.Event] == nil:
			return nil, fmt.Errorf("detect: saved pick of %s joined %.80q, which is not listed", p.Station, p.Event)
		}
		if _, dup := s.picks[p.Station]; dup {
			return nil, fmt.Errorf("detect: saved pick of %s twice", p.Station)
		}
		s.picks[p.Station] = pick{onset: p.OnsetMs, event: p.Event, consumed: p.Consumed}
	}
	return s, nil
}

func checkSavedEvent(e SavedEvent) error {
	d := e.Pub
	switch {
	case !validID(d.ID):
		return fmt.Errorf("ID %.80q", d.ID)
	case d.Serial == 0 || d.FirstTriggerMs <= 0:
		return fmt.Errorf("%s: serial %d, first trigger %d", d.ID, d.Serial, d.FirstTriggerMs)
	case len(e.Members) > MaxSavedStations || len(e.LongPeriod) > MaxSavedStations:
		return fmt.Errorf("%s: %d members, %d long-period stations", d.ID, len(e.Members), len(e.LongPeriod))
	case !finite(d.Lat, d.Lon, d.DepthKm, d.Mag) || math.Abs(d.Lat) > 90 || math.Abs(d.Lon) > 180:
		return fmt.Errorf("%s: estimate out of range", d.ID)
	case len(d.Loc) > 256:
		return fmt.Errorf("%s: location of %d bytes", d.ID, len(d.Loc))
	case d.Final != (e.FinalAtMs != 0):
		return fmt.Errorf("%s: final %t but final at %d", d.ID, d.Final, e.FinalAtMs)
	}
	if f := d.Flash; f != nil && (len(f.Areas) > MaxSavedStations || len(f.LPGM) > MaxSavedStations) {
		return fmt.Errorf("%s: flash of %d areas, %d stations", d.ID, len(f.Areas), len(f.LPGM))
	}
	for i, m := range e.Members {
		if !validID(m.Station) || !finite(m.Lat, m.Lon, float64(m.Peak)) || math.Abs(m.Lat) > 90 || math.Abs(m.Lon) > 180 || !m.P.valid() {
			return fmt.Errorf("%s: member %.80q out of range", d.ID, m.Station)
		}
		if i > 0 && e.Members[i-1].Station >= m.Station {
			return fmt.Errorf("%s: members out of order", d.ID)
		}
	}
	for i, l := range e.LongPeriod {
		if !validID(l.Station) || !finite(float64(l.SvaCms)) {
			return fmt.Errorf("%s: long-period station %.80q out of range", d.ID, l.Station)
		}
		if i > 0 && e.LongPeriod[i-1].Station >= l.Station {
			return fmt.Errorf("%s: long-period stations out of order", d.ID)
		}
	}
	return nil
}

// valid reports whether w is none or a measurement with finite,
// non-negative values over at most the relations' window.
func (w PWave) valid() bool {
	if w == (PWave{}) {
		return true
	}
	return w.OnsetMs > 0 && w.WindowMs >= 0 && w.WindowMs <= pwave.WindowMs &&
		finite(float64(w.PdCm), float64(w.TauCS)) && w.PdCm >= 0 && w.TauCS >= 0
}

func validID(id string) bool { return id != "" && len(id) <= maxSavedIDLen }

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

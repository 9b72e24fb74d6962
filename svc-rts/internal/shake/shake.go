// Package shake is the real-time shaking engine of svc-rts: it keeps each
// station's recent intensity frames and computes the snapshot of a tick.
//
// A snapshot for tick T depends only on the frames whose window ends at or
// before T, never on arrival order or on earlier snapshots, so two cores fed
// the same frames in any order compute the same snapshot, and a frame that
// arrives twice changes nothing.
package shake

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"shindo.dev/seismo/jma"
	"shindo.dev/svc-rts/internal/area"
)

// TickMs is the tick interval.
const TickMs = 500

// OfflineAfterMs: a station whose newest frame ended this long before the
// tick is offline and left out.
const OfflineAfterMs = 3000

// historyLen frames (64 s) are kept per station; enough for the display
// intensity to decay from the top of the scale.
const historyLen = 128

// Frame is one station interval, as the engine needs it.
type Frame struct {
	WindowEndMs int64
	Intensity   float32
	PGA         float32
	PGV         float32
}

// Place is where a station stands.
type Place struct {
	Lat, Lon float64
	Code     uint32 // township postal code, 0 if unknown
}

// Config tunes the engine.
type Config struct {
	// AlertIntensity is the real-time intensity at or above which a station
	// counts as triggered.
	AlertIntensity float64
	// DisplayDecayPerSec is how fast the display intensity falls after
	// shaking, in intensity units per second.
	DisplayDecayPerSec float64
	// Locate returns a station's place; false for unknown stations, which
	// are still shown but join no area.
	Locate func(id string) (Place, bool)
}

// StationValue is one station's state in a snapshot.
type StationValue struct {
	ID        string
	PGA, PGV  float32
	Intensity float32 // real-time
	Display   float32 // with slow decay
	Alert     bool
}

// Level is an area with its intensity level (0–9).
type Level struct {
	ID    uint32 // box ID or township code
	Level uint32
}

// Snapshot is the result of one tick.
type Snapshot struct {
	TimeMs   int64
	Stations []StationValue // ordered by ID
	Boxes    []Level        // ordered by box ID
	Areas    []Level        // highest level first, then by code
}

type station struct {
	frames [historyLen]Frame // slot = (window_end / TickMs) % historyLen
	newest int64
}

// Engine holds the state of every station. It is safe for concurrent use.
type Engine struct {
	cfg Config

	mu       sync.Mutex
	stations map[string]*station

	// Completion tracking for the tick being waited on: how many stations
	// already delivered the frame ending at pending, against how many were
	// online at the previous tick.
	pending       int64
	pendingCount  int
	expected      int
	completeAlert chan struct{}
}

// New returns an empty engine.
func New(cfg Config) *Engine {
	if cfg.Locate == nil {
		cfg.Locate = func(string) (Place, bool) { return Place{}, false }
	}
	return &Engine{cfg: cfg, stations: map[string]*station{}, completeAlert: make(chan struct{}, 1)}
}

// Apply records a station frame. Frames not aligned to a tick, from the far
// future relative to the station's newest, or older than the kept history
// are ignored; it reports whether the frame was kept.
func (e *Engine) Apply(id string, f Frame) bool {
	if f.WindowEndMs <= 0 || f.WindowEndMs%TickMs != 0 || !finite(f.Intensity, f.PGA, f.PGV) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stations[id]
	if st == nil {
		st = &station{}
		e.stations[id] = st
	}
	if f.WindowEndMs <= st.newest-historyLen*TickMs {
		return false
	}
	slot := &st.frames[(f.WindowEndMs/TickMs)%historyLen]
	first := slot.WindowEndMs != f.WindowEndMs
	*slot = f
	st.newest = max(st.newest, f.WindowEndMs)
	if first && f.WindowEndMs == e.pending {
		e.pendingCount++
		if e.expected > 0 && e.pendingCount >= e.expected {
			select {
			case e.completeAlert <- struct{}{}:
			default:
			}
		}
	}
	return true
}

// Await announces that tick t is the next to be computed and returns a
// channel that receives once every station online at the previous tick has
// delivered its frame for t, so the tick can be emitted before its deadline.
func (e *Engine) Await(t int64) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.completeAlert:
	default:
	}
	e.pending, e.pendingCount, e.expected = t, 0, 0
	for _, st := range e.stations {
		// Online at the previous tick (or already ahead of it).
		if st.newest > t-TickMs-OfflineAfterMs {
			e.expected++
		}
		if st.frames[(t/TickMs)%historyLen].WindowEndMs == t {
			e.pendingCount++
		}
	}
	if e.expected > 0 && e.pendingCount >= e.expected {
		e.completeAlert <- struct{}{}
	}
	return e.completeAlert
}

// Snapshot computes the snapshot of tick t.
func (e *Engine) Snapshot(t int64) Snapshot {
	snap := Snapshot{TimeMs: t}
	boxes := map[uint32]uint32{}
	areas := map[uint32]uint32{}
	e.mu.Lock()
	for id, st := range e.stations {
		v, ok := e.value(st, t)
		if !ok {
			continue
		}
		v.ID = id
		snap.Stations = append(snap.Stations, v)
		if !v.Alert {
			continue
		}
		place, ok := e.cfg.Locate(id)
		if !ok {
			continue
		}
		level := uint32(jma.ClassOf(float64(v.Intensity)).Level())
		if box, ok := area.Box(place.Lat, place.Lon); ok {
			boxes[box] = max(boxes[box], level)
		}
		if place.Code != 0 {
			areas[place.Code] = max(areas[place.Code], level)
		}
	}
	e.mu.Unlock()

	slices.SortFunc(snap.Stations, func(a, b StationValue) int { return cmp.Compare(a.ID, b.ID) })
	for id, l := range boxes {
		snap.Boxes = append(snap.Boxes, Level{id, l})
	}
	slices.SortFunc(snap.Boxes, func(a, b Level) int { return cmp.Compare(a.ID, b.ID) })
	for code, l := range areas {
		snap.Areas = append(snap.Areas, Level{code, l})
	}
	slices.SortFunc(snap.Areas, func(a, b Level) int {
		return cmp.Or(cmp.Compare(b.Level, a.Level), cmp.Compare(a.ID, b.ID))
	})
	return snap
}

// value derives a station's state at t from its frames alone.
func (e *Engine) value(st *station, t int64) (StationValue, bool) {
	var latest *Frame
	display := math.Inf(-1)
	for i := range st.frames {
		f := &st.frames[i]
		if f.WindowEndMs == 0 || f.WindowEndMs > t || f.WindowEndMs <= t-historyLen*TickMs {
			continue
		}
		if latest == nil || f.WindowEndMs > latest.WindowEndMs {
			latest = f
		}
		age := float64(t-f.WindowEndMs) / 1000
		display = max(display, float64(f.Intensity)-e.cfg.DisplayDecayPerSec*age)
	}
	if latest == nil || latest.WindowEndMs <= t-OfflineAfterMs {
		return StationValue{}, false
	}
	display = max(display, float64(latest.Intensity))
	return StationValue{
		PGA:       latest.PGA,
		PGV:       latest.PGV,
		Intensity: latest.Intensity,
		Display:   float32(display),
		Alert:     float64(latest.Intensity) >= e.cfg.AlertIntensity,
	}, true
}

// Forget drops stations whose newest frame is older than the kept history
// at t, so retired stations do not accumulate.
func (e *Engine) Forget(t int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, st := range e.stations {
		if st.newest <= t-historyLen*TickMs {
			delete(e.stations, id)
		}
	}
}

// Online returns the number of stations with a frame inside the offline bound
// of t.
func (e *Engine) Online(t int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, st := range e.stations {
		if st.newest > t-OfflineAfterMs && st.newest <= t {
			n++
		}
	}
	return n
}

func finite(vs ...float32) bool {
	for _, v := range vs {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// Package shake is the real-time shaking engine of svc-rts: it keeps each
// station's recent intensity frames and computes the snapshot of a tick.
//
// A snapshot for tick T depends only on the frames whose window ends at or
// before T, never on arrival order or on earlier snapshots, so two cores fed
// the same frames in any order compute the same snapshot, and a frame that
// arrives twice changes nothing.
//
// The tick loop does not wait for every frame: it closes a tick on a
// deadline (package rtsgrpc). A station whose frame for T is not in when T
// is computed — late, or lost — is shown with its latest values, up to 3 s
// old, marked by their age (StationValue.AgeMs: the tick minus the window
// end they come from), never as T's own: those values are the station's
// latest (SPEC §4) but not T's. It is not left out, which would show it
// offline for a frame merely late, and never at all if its frames always
// come after the deadline. Its triggered state, and so the boxes, areas and
// detections it lights, follows the same rule — the latest frame within
// 3 s — and its display intensity is measured at T from the frames held.
// The age is a function of the frames held like every other value, so it
// does not break the agreement below: a core that lacked a frame says so.
//
// Detections (package detect) need memory longer than the frames kept, so
// they are a state advanced tick by tick; the state of tick T is a pure
// function of the triggered stations of every tick up to T, each derived
// from frames as the snapshot is. The engine steps through every tick, also
// those the tick loop skipped, and keeps the states of the last replayTicks
// ticks: a frame that arrives after its tick was computed (a retransmission,
// a WebSocket fallback) and changes what was triggered makes the engine
// recompute the states from that tick on.
//
// What two cores agree on, then: a snapshot is a function of the frames the
// core held when it computed it. Two cores that held the same frames ending
// at or before T emit the same snapshot of T. Where a frame came before T's
// deadline at one core and after it at the other, their snapshots of T
// differ: the one that lacked it shows that station carried over
// (AgeMs > 0), and its detections as they were without the frame. Snapshots
// sent are not revised; but every snapshot computed once both hold the same
// frames is identical — stations, boxes, areas, and detections with their
// IDs and serials — and so is the snapshot of an earlier tick asked for
// again (while its detection state is kept), whatever the order and timing
// of arrival, provided no frame arrives once the engine has computed a tick
// more than replayTicks − 2 ticks (15 s) past its window end — with one
// exception: a detection the engine emitted as final stays final as sent
// (rts.v1: a final detection never changes again), though a late frame
// shows one of its stations triggered before it ended. A core that held
// that frame in time keeps the detection open for longer, under the same
// ID; the two agree again once it has left both lists. An engine that
// starts (or restarts, or stalls for longer than the frames it keeps) in
// the middle of an event begins with no detection and may name that event
// differently from a core that saw it start — which is why svc-rts, once
// restarted, first has the frames of the last minutes replayed and moves
// its detections through them (Advance) before it computes a snapshot, and
// after a longer break of its input adopts its peer core's state (Adopt).
package shake

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/lpgm"
	"shindo.dev/seismo/pwave"
	"shindo.dev/svc-rts/internal/area"
	"shindo.dev/svc-rts/internal/detect"
)

// TickMs is the tick interval.
const TickMs = 500

// OfflineAfterMs: a station whose newest frame ended this long before the
// tick is offline and left out.
const OfflineAfterMs = 3000

// historyLen frames (64 s) are kept per station; enough for the display
// intensity to decay from the top of the scale.
const historyLen = 128

// LateWindowMs is how late a frame may come and still correct the
// detections (replayTicks − 2 ticks): an input gap longer than this is a
// break that only the peer core's state can mend.
const LateWindowMs = (replayTicks - 2) * TickMs

// replayTicks is how many ticks of detection state are kept (16 s): a frame
// that arrives up to this late still corrects the detections.
const replayTicks = 32

// Frame is one station interval, as the engine needs it.
type Frame struct {
	WindowEndMs int64
	Intensity   float32
	PGA         float32
	PGV         float32
	SvaCms      float32 // long-period absolute velocity response, 0 if not measured
	P           detect.PWave
}

// MaxSvaCms bounds a frame's long-period response: ten times the bottom
// of JMA's top class, beyond any record.
const MaxSvaCms = 1000

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
	// are still shown but join no area and no detection.
	Locate func(id string) (Place, bool)
	// Areas are the boxes (nil: the SPEC grid, area.Default).
	Areas *area.Set
	// Detect tunes the network trigger.
	Detect detect.Config
	// TickQuorum is the share of the stations online at the previous tick
	// whose frames for a tick make it ready to close after a grace
	// (Quorum), without waiting for the last few to the deadline: at 1,000
	// stations with 0.1 % packet loss most ticks lack a frame lost on the
	// way, whose retransmission (250 ms) comes after any deadline. At most
	// 1 − TickQuorum of the stations are left out, rounded down, so below
	// 1 / (1 − TickQuorum) stations the quorum is every one of them.
	// 0 means 1: every station.
	TickQuorum float64
	// MaxAheadMs refuses frames ending further than this after Now (0: no
	// bound): ingest bounds what stations sign, and the engine does not
	// rely on it — one frame from the far future would hold a station's
	// newest time there and every real frame after it would be ignored.
	MaxAheadMs int64
	// Now is the clock MaxAheadMs is measured on (nil: time.Now).
	Now func() time.Time
}

// StationValue is one station's state in a snapshot.
type StationValue struct {
	ID string
	// AgeMs is how old PGA, PGV, Intensity and Alert are: the tick minus
	// the window end of the frame they come from. 0 when the station's
	// frame for the tick was held when the tick was computed; 500 to 2500
	// when it was late or lost and the values are carried over from the
	// station's latest earlier frame.
	AgeMs     int64
	PGA, PGV  float32
	Intensity float32 // real-time
	// Display is the intensity with slow decay: the highest of the
	// station's frames held, each decayed from its window end to the tick,
	// and never below Intensity (carried over or not).
	Display float32
	Alert   bool
}

// Level is an area with its intensity level (0–9).
type Level struct {
	ID    uint32 // box ID or township code
	Level uint32
}

// Snapshot is the result of one tick.
type Snapshot struct {
	TimeMs     int64
	Stations   []StationValue     // ordered by ID
	Boxes      []Level            // ordered by box ID
	Areas      []Level            // highest level first, then by code
	Detections []detect.Detection // by first trigger, then ID
}

type station struct {
	id     string
	frames [historyLen]Frame // slot = (window_end / TickMs) % historyLen
	newest int64
	// lastHot is the newest window end of a frame at or above the alert
	// intensity, of long-period class 1 or more, or with a P pick: the
	// station may be triggered (or long-period, or picked) up to 3 s
	// after it.
	lastHot int64

	// The place last returned by Locate and the box it lies in.
	place  Place
	placed bool
	box    uint32
	inBox  bool
}

// Engine holds the state of every station. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	areas *area.Set

	mu       sync.Mutex
	stations map[string]*station
	order    []*station          // the stations by ID; nil after a change
	hot      map[string]*station // stations with a frame that may enter the detections lately (lastHot)

	// Detection state after tick detTick (0 before the first tick), the
	// states of the last replayTicks ticks, and the earliest tick whose
	// state a late frame invalidated (0 for none).
	det      *detect.State
	detTick  int64
	ring     [replayTicks]*detect.State
	ringTick [replayTicks]int64
	dirty    int64
	// finals are the detections emitted as final by the tick loop, which
	// a recomputation must not reopen (detect.State.HoldFinal).
	finals map[string]detect.Detection
	// published are the detections a live snapshot listed (ID → last
	// tick), holding the new ones whose founding a late frame may still
	// change and how many ticks each was held (founding.go).
	published map[string]int64
	holding   map[string]int
	heldTicks uint64
	replayed  uint64
	restarts  uint64 // fresh starts after a gap, the first excepted

	// Completion tracking for the tick being waited on: how many stations
	// already delivered the frame ending at pending, against how many were
	// online at the previous tick.
	pending       int64
	pendingCount  int
	expected      int
	quorum        int
	completeAlert chan struct{}
	quorumAlert   chan struct{}
	arrivalAlert  chan struct{}
}

// New returns an empty engine.
func New(cfg Config) *Engine {
	if cfg.Locate == nil {
		cfg.Locate = func(string) (Place, bool) { return Place{}, false }
	}
	areas := cfg.Areas
	if areas == nil {
		areas = area.Default()
	}
	cfg.Detect = cfg.Detect.WithDefaults()
	return &Engine{
		cfg: cfg, areas: areas,
		stations: map[string]*station{}, hot: map[string]*station{}, finals: map[string]detect.Detection{},
		published: map[string]int64{}, holding: map[string]int{},
		completeAlert: make(chan struct{}, 1), quorumAlert: make(chan struct{}, 1), arrivalAlert: make(chan struct{}, 1),
	}
}

// Apply records a station frame. Frames not aligned to a tick, from the far
// future relative to the station's newest, or older than the kept history
// are ignored; it reports whether the frame was kept.
func (e *Engine) Apply(id string, f Frame) bool {
	if f.WindowEndMs <= 0 || f.WindowEndMs%TickMs != 0 || !finite(f.Intensity, f.PGA, f.PGV, f.SvaCms) {
		return false
	}
	if e.cfg.MaxAheadMs > 0 && f.WindowEndMs > e.now().UnixMilli()+e.cfg.MaxAheadMs {
		return false
	}
	// A station's claim is bounded before it is trusted: no ground moves
	// at more than MaxSvaCms, and firmware without the measurement sends 0.
	f.SvaCms = min(max(f.SvaCms, 0), MaxSvaCms)
	f.P = boundP(f.P, f.WindowEndMs)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.stations[id]
	if st == nil {
		st = &station{id: id}
		e.stations[id] = st
		e.order = nil // rebuilt, sorted, by the next snapshot
	}
	if f.WindowEndMs <= st.newest-historyLen*TickMs {
		return false
	}
	slot := &st.frames[(f.WindowEndMs/TickMs)%historyLen]
	first := slot.WindowEndMs != f.WindowEndMs
	changed := *slot != f
	*slot = f
	st.newest = max(st.newest, f.WindowEndMs)
	hot := float64(f.Intensity) >= e.cfg.AlertIntensity || longPeriod(&f) || f.P.OnsetMs != 0
	// A frame for a tick already stepped changes the detections only if
	// the station may be triggered at some tick from its window end on:
	// this frame is hot, or a hot one is less than 3 s older.
	if changed && e.detTick != 0 && f.WindowEndMs <= e.detTick && (hot || st.lastHot > f.WindowEndMs-OfflineAfterMs) {
		if e.dirty == 0 || f.WindowEndMs < e.dirty {
			e.dirty = f.WindowEndMs
		}
	}
	if hot {
		st.lastHot = max(st.lastHot, f.WindowEndMs)
		e.hot[id] = st
	}
	if first && f.WindowEndMs == e.pending {
		e.pendingCount++
		e.alertLocked()
	}
	return true
}

func (e *Engine) now() time.Time {
	if e.cfg.Now != nil {
		return e.cfg.Now()
	}
	return time.Now()
}

// Await announces that tick t is the next to be computed and returns a
// channel that receives once every station online at the previous tick has
// delivered its frame for t, so the tick can be emitted before its deadline.
// Quorum's channel receives once the TickQuorum share of them has.
func (e *Engine) Await(t int64) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range []chan struct{}{e.completeAlert, e.quorumAlert, e.arrivalAlert} {
		select {
		case <-c:
		default:
		}
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
	e.quorum = e.expected
	if q := e.cfg.TickQuorum; q > 0 && q < 1 {
		e.quorum -= int(float64(e.expected) * (1 - q))
	}
	e.alertLocked()
	return e.completeAlert
}

// Quorum returns the channel that receives once the TickQuorum share of the
// stations awaited for the pending tick (Await) has delivered.
func (e *Engine) Quorum() <-chan struct{} { return e.quorumAlert }

// Arrivals returns the channel that receives when a frame for the pending
// tick arrives once its quorum is in (one receive may stand for several
// frames): the frames of a burst still draining come one after another,
// the one lost on its way never does.
func (e *Engine) Arrivals() <-chan struct{} { return e.arrivalAlert }

func (e *Engine) alertLocked() {
	if e.expected == 0 {
		return
	}
	if e.pendingCount >= e.quorum {
		for _, c := range []chan struct{}{e.quorumAlert, e.arrivalAlert} {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	if e.pendingCount >= e.expected {
		select {
		case e.completeAlert <- struct{}{}:
		default:
		}
	}
}

// Snapshot computes the snapshot of tick t (a multiple of TickMs). Ticks
// are meant to be asked for in increasing order; an earlier tick gets its
// station values and the detections kept for it, if any, corrected by the
// late frames held.
func (e *Engine) Snapshot(t int64) Snapshot {
	snap := Snapshot{TimeMs: t}
	boxes := map[uint32]uint32{}
	areas := map[uint32]uint32{}
	e.mu.Lock()
	if e.order == nil {
		e.order = make([]*station, 0, len(e.stations))
		for _, st := range e.stations {
			e.order = append(e.order, st)
		}
		slices.SortFunc(e.order, func(a, b *station) int { return cmp.Compare(a.id, b.id) })
	}
	for _, st := range e.order {
		id := st.id
		v, ok := e.value(st, t)
		if !ok {
			continue
		}
		v.ID = id
		snap.Stations = append(snap.Stations, v)
		if !v.Alert {
			continue
		}
		place, box, inBox, ok := e.locate(id, st)
		if !ok {
			continue
		}
		level := uint32(jma.ClassOf(float64(v.Intensity)).Level())
		if inBox {
			boxes[box] = max(boxes[box], level)
		}
		if place.Code != 0 {
			areas[place.Code] = max(areas[place.Code], level)
		}
	}
	live := t >= e.detTick
	snap.Detections = e.detections(t)
	if live {
		e.noteFinals(t, snap.Detections)
		snap.Detections = e.holdFounding(t, snap.Detections)
	}
	e.mu.Unlock()

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

// value derives a station's state at t from its frames alone: the latest
// frame ending at or before t, with its age when the frame ending at t is
// not held.
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
		AgeMs:     t - latest.WindowEndMs,
		PGA:       latest.PGA,
		PGV:       latest.PGV,
		Intensity: latest.Intensity,
		Display:   float32(display),
		Alert:     float64(latest.Intensity) >= e.cfg.AlertIntensity,
	}, true
}

// locate returns a station's place and box, caching the box lookup while
// the place stays the same.
func (e *Engine) locate(id string, st *station) (place Place, box uint32, inBox, ok bool) {
	place, ok = e.cfg.Locate(id)
	if !ok {
		return Place{}, 0, false, false
	}
	if !st.placed || st.place != place {
		st.place, st.placed = place, true
		st.box, st.inBox = e.areas.Box(place.Lat, place.Lon)
	}
	return place, st.box, st.inBox, true
}

// detections advances the detection state to tick t and returns its
// detections; for a tick already stepped, those kept for it, corrected by
// the late frames held.
func (e *Engine) detections(t int64) []detect.Detection {
	if e.detTick == 0 || t-e.detTick > historyLen*TickMs {
		// The first tick, or a gap longer than the frames kept: start
		// afresh, from an empty state "before" t.
		if e.detTick != 0 {
			e.restarts++
		}
		e.det = detect.New(e.cfg.Detect)
		e.ring, e.ringTick = [replayTicks]*detect.State{}, [replayTicks]int64{}
		e.detTick, e.dirty = t-TickMs, 0
		e.keep(e.detTick)
	}
	if e.dirty != 0 {
		// Recompute from the dirty tick, or from the oldest tick whose
		// previous state is kept (frames later than that cannot be
		// accounted for any more).
		from := max(e.dirty, e.detTick-(replayTicks-2)*TickMs)
		e.dirty = 0
		for from <= e.detTick && e.ringAt(from-TickMs) == nil {
			from += TickMs // fewer states kept: the engine started lately
		}
		if from <= e.detTick {
			e.det = e.ringAt(from - TickMs).Clone()
			last := e.detTick
			for u := from; u <= last; u += TickMs {
				e.step(u)
				e.holdFinals(u)
				e.keep(u)
				e.replayed++
			}
		}
	}
	if t < e.detTick {
		if st := e.ringAt(t); st != nil {
			return st.Detections()
		}
		return nil
	}
	for u := e.detTick + TickMs; u <= t; u += TickMs {
		e.step(u)
		e.keep(u)
	}
	for id, st := range e.hot {
		if st.lastHot <= t-replayTicks*TickMs-OfflineAfterMs {
			delete(e.hot, id)
		}
	}
	return e.det.Detections()
}

// Advance steps the detections to tick t without computing a snapshot.
// An engine rebuilding its detections from replayed frames moves them along
// behind the newest frame it holds, as the tick loop moves them behind the
// clock; frames that come later than that correct them as late frames do.
func (e *Engine) Advance(t int64) {
	if t <= 0 || t%TickMs != 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t > e.detTick {
		e.detections(t)
	}
}

// DetectorState returns the detection state of tick t if it is kept, or
// else of the latest tick stepped when that is earlier than t: what a core
// whose input broke adopts (Adopt). ok is false before the first tick and
// for a t older than the states kept.
func (e *Engine) DetectorState(t int64) (tick int64, st detect.Saved, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.detTick == 0 {
		return 0, detect.Saved{}, false
	}
	if e.dirty != 0 {
		e.detections(e.detTick) // account for late frames first
	}
	if t >= e.detTick {
		return e.detTick, e.det.Save(), true
	}
	if kept := e.ringAt(t); kept != nil {
		return t, kept.Save(), true
	}
	return 0, detect.Saved{}, false
}

// Adopt replaces the detection state by v, another core's state of tick
// t, taken because this engine's input broke; v is checked as input from
// outside (detect.Restore, under this engine's configuration). From t on
// the engine steps with its own frames; the states it kept of earlier
// ticks are dropped, so a late frame from before t changes nothing. A
// state of a tick after the latest this engine stepped is refused: its
// next snapshots would have no state of their own ticks.
func (e *Engine) Adopt(t int64, v detect.Saved) error {
	if t <= 0 || t%TickMs != 0 {
		return fmt.Errorf("adopt: tick %d is not on the tick grid", t)
	}
	st, err := detect.Restore(e.cfg.Detect, v)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.detTick != 0 && t > e.detTick {
		return fmt.Errorf("adopt: state of tick %d, after this engine's latest %d", t, e.detTick)
	}
	e.det = st
	e.ring, e.ringTick = [replayTicks]*detect.State{}, [replayTicks]int64{}
	e.detTick, e.dirty = t, 0
	// The peer's state replaces what this core said while its input was
	// broken, finals included: a detection whose stations fell silent
	// because the input did may have been sent as final, and is not.
	clear(e.finals)
	// The peer founded its detections from frames this core missed, and
	// has published them: they are not held here (founding.go).
	for _, d := range st.Detections() {
		e.published[d.ID] = t
	}
	e.keep(t)
	return nil
}

// Restarts is how many times the detections started afresh after a gap
// longer than the frames kept (a stalled tick loop), the first start not
// counted: each is a break in the input that Adopt can mend.
func (e *Engine) Restarts() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restarts
}

// DetTick is the latest tick the detections were stepped to, 0 before the
// first.
func (e *Engine) DetTick() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.detTick
}

// step advances the state to tick u; the caller keeps it.
func (e *Engine) step(u int64) {
	trig, long, picked := e.triggersAt(u)
	e.det.Step(u, trig, long, picked)
	e.detTick = u
}

// holdFinals makes a recomputed state of tick u agree with the detections
// the tick loop already emitted as final: they stay final as sent, from
// the tick they became final (detect.State.HoldFinal).
func (e *Engine) holdFinals(u int64) {
	for _, d := range e.finals {
		e.det.HoldFinal(u, d)
	}
}

// noteFinals records the final detections of a snapshot the tick loop
// emitted, and forgets those out of reach of any recomputation: final for
// longer than they linger plus the late frames' window.
func (e *Engine) noteFinals(t int64, ds []detect.Detection) {
	for _, d := range ds {
		if d.Final {
			e.finals[d.ID] = d
		}
	}
	reach := e.cfg.Detect.Linger.Milliseconds() + replayTicks*TickMs
	for id, d := range e.finals {
		if t-d.UpdatedMs > reach {
			delete(e.finals, id)
		}
	}
}

// keep stores a copy of the state as that of tick u.
func (e *Engine) keep(u int64) {
	slot := (u / TickMs) % replayTicks
	e.ring[slot], e.ringTick[slot] = e.det.Clone(), u
}

func (e *Engine) ringAt(u int64) *detect.State {
	slot := (u / TickMs) % replayTicks
	if e.ringTick[slot] != u {
		return nil
	}
	return e.ring[slot]
}

// triggersAt lists the stations triggered at tick u, by the same rule as
// the snapshot's alert — the latest frame ending at or before u, no older
// than OfflineAfterMs, at or above the alert intensity — and, by the same
// rule, those showing long-period ground motion of class 1 or more and
// those not triggered whose frame carries a P pick.
func (e *Engine) triggersAt(u int64) ([]detect.Trigger, []detect.LongPeriod, []detect.Picked) {
	var trig []detect.Trigger
	var long []detect.LongPeriod
	var picked []detect.Picked
	for id, st := range e.hot {
		if st.lastHot <= u-OfflineAfterMs {
			continue
		}
		f := st.latest(u)
		if f == nil {
			continue
		}
		triggered := float64(f.Intensity) >= e.cfg.AlertIntensity
		if !triggered && !longPeriod(f) && f.P.OnsetMs == 0 {
			continue
		}
		place, box, inBox, ok := e.locate(id, st)
		if !ok {
			continue
		}
		if triggered {
			trig = append(trig, detect.Trigger{Station: id, Lat: place.Lat, Lon: place.Lon, Box: box, InBox: inBox, Code: place.Code, Intensity: f.Intensity, P: f.P})
		}
		if !triggered && f.P.OnsetMs != 0 {
			picked = append(picked, detect.Picked{Station: id, Lat: place.Lat, Lon: place.Lon, OnsetMs: f.P.OnsetMs})
		}
		if longPeriod(f) {
			long = append(long, detect.LongPeriod{Station: id, Lat: place.Lat, Lon: place.Lon, SvaCms: f.SvaCms})
		}
	}
	return trig, long, picked
}

// Bounds of a frame's P-wave measurement (ingest refuses a packet beyond
// them; the engine does not rely on it).
const (
	maxPAgeMs = pwave.HoldMs + 1000 // a pick is reported for pwave.HoldMs; its frame ends up to a frame later
	MaxPdCm   = 1000
	MaxTauCS  = 100
)

// boundP drops a P-wave measurement that no station could have made: a
// pick after its frame or more than a minute before it, a window longer
// than the relations', values beyond reason or not finite.
func boundP(w detect.PWave, endMs int64) detect.PWave {
	age := endMs - w.OnsetMs
	if w.OnsetMs == 0 || age < 0 || age > maxPAgeMs || w.WindowMs < 0 || w.WindowMs > pwave.WindowMs ||
		!finite(w.PdCm, w.TauCS) || w.PdCm < 0 || w.PdCm > MaxPdCm || w.TauCS < 0 || w.TauCS > MaxTauCS {
		return detect.PWave{}
	}
	return w
}

// longPeriod reports whether a frame shows long-period ground motion of
// class 1 or more.
func longPeriod(f *Frame) bool { return lpgm.Class(float64(f.SvaCms)) >= 1 }

// latest is the station's newest frame ending in (u − OfflineAfterMs, u].
func (st *station) latest(u int64) *Frame {
	for k := u; k > u-OfflineAfterMs; k -= TickMs {
		if f := &st.frames[(k/TickMs)%historyLen]; f.WindowEndMs == k {
			return f
		}
	}
	return nil
}

// HeldFoundings counts the ticks a new detection was held back because a
// station that could have founded it was late (founding.go).
func (e *Engine) HeldFoundings() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.heldTicks
}

// ReplayedTicks is how many ticks of detections were recomputed because of
// late frames.
func (e *Engine) ReplayedTicks() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.replayed
}

// Forget drops stations whose newest frame is older than the kept history
// at t, so retired stations do not accumulate.
func (e *Engine) Forget(t int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, st := range e.stations {
		if st.newest <= t-historyLen*TickMs {
			delete(e.stations, id)
			delete(e.hot, id)
			e.order = nil
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

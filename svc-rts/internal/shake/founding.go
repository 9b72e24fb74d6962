package shake

import "shindo.dev/svc-rts/internal/detect"

// A new detection's ID names its earliest station (detect: "onset of its
// earliest station, that station's box"), so it depends on frames a tick
// may close without: a station whose frames reach this core seconds late
// (an uplink's loss, a core short of CPU) may have triggered before the
// stations this core founded the detection from, and the other core, which
// had its frames, names the detection after it. The late frames then
// rename the detection here one tick later: an ID this core published
// once, that no other core ever did (the hour of chaos of 2026-12-02).
//
// So the tick loop holds a detection it has not published yet, for at most
// maxFoundingHold ticks, while a station that could have founded it is
// missing a frame since its onset: one within the trigger radius of one of
// its stations, heard from within foundingExpectMs, lacking the frame of a
// tick from the onset up to the tick before this one. This tick's own
// stragglers hold it only where one could tie: when the detection's
// earliest onset is this very tick, a straggler whose station ID sorts
// before its earliest member's (ties go to the lower ID) and whose last
// frame was within tieMargin of the alert intensity may have triggered at
// the same tick and would name it. Holding for every straggler would cost
// most detections founded from this tick's onsets a tick, as most ticks
// close on their quorum without a few frames that come within the next.
const (
	maxFoundingHold  = 2
	foundingExpectMs = 10_000
	tieMargin        = 1.0
)

// holdFounding returns the detections of live tick t that may be
// published: all but the new ones whose founding frames are incomplete.
func (e *Engine) holdFounding(t int64, ds []detect.Detection) []detect.Detection {
	out := make([]detect.Detection, 0, len(ds))
	held := map[string]bool{}
	for _, d := range ds {
		if _, ok := e.published[d.ID]; !ok && !d.Final && e.holding[d.ID] < maxFoundingHold && e.foundingIncomplete(t, d) {
			e.holding[d.ID]++
			e.heldTicks++
			held[d.ID] = true
			continue
		}
		out = append(out, d)
	}
	for _, d := range out {
		e.published[d.ID] = t
	}
	for id := range e.holding {
		if !held[id] {
			delete(e.holding, id)
		}
	}
	reach := e.cfg.Detect.Linger.Milliseconds() + replayTicks*TickMs
	for id, at := range e.published {
		if t-at > reach {
			delete(e.published, id)
		}
	}
	return out
}

// foundingIncomplete reports whether a station that could have founded d
// lacks a frame of a tick from d's onset to the one before t, or could tie
// with its earliest station at tick t and lacks that tick's frame.
func (e *Engine) foundingIncomplete(t int64, d detect.Detection) bool {
	from := max(d.FirstTriggerMs-d.FirstTriggerMs%TickMs, t-(historyLen-1)*TickMs)
	radius := e.cfg.Detect.RadiusKm
	first, tie := "", d.FirstTriggerMs == t
	if tie {
		first, tie = e.det.Earliest(d.ID)
	}
	for _, st := range e.stations {
		if st.newest <= t-foundingExpectMs {
			// Gone for longer than a late frame: nothing to wait for.
			continue
		}
		place, _, _, ok := e.locate(st.id, st)
		if !ok || !e.det.Near(d.ID, place.Lat, place.Lon, radius) {
			continue
		}
		for u := from; u < t; u += TickMs {
			if st.frames[(u/TickMs)%historyLen].WindowEndMs != u {
				return true
			}
		}
		if tie && st.id < first && st.frames[(t/TickMs)%historyLen].WindowEndMs != t {
			if f := st.latest(t); f != nil && float64(f.Intensity) >= e.cfg.AlertIntensity-tieMargin {
				return true
			}
		}
	}
	return false
}

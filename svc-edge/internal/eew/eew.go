// Package eew keeps an edge's earthquake early warning feed: the alerts of
// the snapshots it serves, deduplicated by detection ID and serial, so the
// feed changes only when an alert appears, advances or leaves.
//
// The edge serves one core at a time and switches when it goes quiet. Both
// cores derive the same detections with the same serials from the same
// data, but at a switch the new core may lag by a serial, or miss a
// detection the old one saw. The feed never goes back: a serial at or
// below the one already served is ignored, a final alert never changes
// again, and an alert that has left is not brought back by a core that
// still lists it at a serial already served.
//
// A detection's intensity flash and long-period stations change without
// its serial (they have a serial of their own, so apps do not announce an
// update for each township lit); the feed takes such a change when it is
// ahead of what it serves — a higher area serial, or more long-period
// response — so they never go back either.
package eew

import (
	"cmp"
	"slices"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// rememberMs is how long an alert that left is remembered, so that a
// lagging core cannot bring it back.
const rememberMs = 10 * 60 * 1000

// Feed is the alert list. It is not safe for concurrent use; the source
// serves snapshots from one goroutine at a time.
type Feed struct {
	started bool
	served  map[string]*rtsv1.Detection // listed now
	gone    map[string]goneAlert        // left the list
}

type goneAlert struct {
	serial uint32
	final  bool
	atMs   int64
}

// New returns an empty feed.
func New() *Feed {
	return &Feed{served: map[string]*rtsv1.Detection{}, gone: map[string]goneAlert{}}
}

// Update takes the detections of the snapshot of tick tickMs and returns
// the alerts to serve, by first trigger then ID, and whether they differ
// from the previous list. The first update always counts as a change, so
// the first list (maybe empty) is published.
func (f *Feed) Update(tickMs int64, ds []*rtsv1.Detection) ([]*rtsv1.Detection, bool) {
	changed := !f.started
	f.started = true
	listed := make(map[string]bool, len(ds))
	for _, d := range ds {
		id := d.GetId()
		listed[id] = true
		if cur, ok := f.served[id]; ok {
			if cur.GetFinal() || d.GetSerial() < cur.GetSerial() {
				continue
			}
			if d.GetSerial() == cur.GetSerial() {
				if flashAhead(d, cur) {
					f.served[id] = d // the alert itself is unchanged
				}
				continue
			}
		} else if g, ok := f.gone[id]; ok && (g.final || d.GetSerial() <= g.serial) {
			continue
		}
		delete(f.gone, id)
		f.served[id] = d
		changed = true
	}
	for id, d := range f.served {
		if !listed[id] {
			f.gone[id] = goneAlert{serial: d.GetSerial(), final: d.GetFinal(), atMs: tickMs}
			delete(f.served, id)
			changed = true
		}
	}
	for id, g := range f.gone {
		if tickMs-g.atMs > rememberMs {
			delete(f.gone, id)
		}
	}
	out := make([]*rtsv1.Detection, 0, len(f.served))
	for _, d := range f.served {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *rtsv1.Detection) int {
		return cmp.Or(cmp.Compare(a.GetFirstTriggerMs(), b.GetFirstTriggerMs()), cmp.Compare(a.GetId(), b.GetId()))
	})
	return out, changed
}

// flashAhead reports whether d's flash is newer than cur's, the two at the
// same serial: a higher area serial, or at the same one more long-period
// response (stations are only added, and each keeps its highest response,
// so the sum only grows).
func flashAhead(d, cur *rtsv1.Detection) bool {
	if a, b := d.GetAreaSerial(), cur.GetAreaSerial(); a != b {
		return a > b
	}
	return lpgmSum(d) > lpgmSum(cur)
}

func lpgmSum(d *rtsv1.Detection) float64 {
	var sum float64
	for _, l := range d.GetLpgm() {
		sum += float64(l.GetSvaCms())
	}
	return sum
}

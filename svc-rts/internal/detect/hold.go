package detect

import (
	"cmp"
	"slices"
)

// HoldFinal makes the state agree with a detection already published as
// final, where late frames made the state say otherwise. A core recomputes
// its detections when a frame comes after its tick (package shake); a
// station that triggered late can keep open a detection the core already
// sent as final, and a final detection never changes again (rts.v1
// Detection). So from the tick it became final (its UpdatedMs) the
// detection is final with exactly the content sent, its picks consumed so
// they found nothing new; a detection the state no longer lists is put back
// while it lingers, and one that lingered its time is gone, whatever the
// state says. t is the tick the state was stepped to. Open detections are
// not held: their serials follow the frames held, as the peer core's do.
func (s *State) HoldFinal(t int64, sent Detection) {
	if !sent.Final || sent.UpdatedMs > t {
		return
	}
	i := slices.IndexFunc(s.events, func(ev *event) bool { return ev.pub.ID == sent.ID })
	gone := t-sent.UpdatedMs >= s.cfg.Linger.Milliseconds()
	switch {
	case gone && i >= 0:
		s.consume(sent.ID)
		s.events = slices.Delete(s.events, i, i+1)
	case gone:
	case i < 0:
		ev := &event{pub: sent, members: map[string]member{}, finalAt: sent.UpdatedMs, lastTriggered: sent.UpdatedMs}
		pos, _ := slices.BinarySearchFunc(s.events, ev, func(a, b *event) int {
			return cmp.Or(cmp.Compare(a.pub.FirstTriggerMs, b.pub.FirstTriggerMs), cmp.Compare(a.pub.ID, b.pub.ID))
		})
		s.events = slices.Insert(s.events, pos, ev)
	default:
		ev := s.events[i]
		ev.pub, ev.finalAt, ev.stale = sent, sent.UpdatedMs, false
		s.consume(sent.ID)
	}
}

// consume marks the picks of detection id as ended: they found no other.
func (s *State) consume(id string) {
	for st, p := range s.picks {
		if p.event == id {
			s.picks[st] = pick{onset: p.onset, consumed: true}
		}
	}
}

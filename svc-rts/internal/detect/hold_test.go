package detect

import (
	"reflect"
	"testing"
)

// TestHoldFinal: a detection held as sent final is final with the content
// sent from the tick it became final, its stations' picks found nothing
// new while they stay triggered, a state that lost it lists it again while
// it lingers, and after lingering it is gone whatever the state says.
func TestHoldFinal(t *testing.T) {
	t.Parallel()
	trig := []Trigger{at("A", 0, 0, 3), at("B", 10, 0, 3), at("C", 0, 10, 3)}
	s := New(Config{})
	s.Step(t0, trig, nil, nil)
	ds := s.Detections()
	if len(ds) != 1 || ds[0].Final {
		t.Fatalf("detections %+v, want one open", ds)
	}
	sent := ds[0]
	sent.Final, sent.Serial, sent.UpdatedMs = true, sent.Serial+1, t0+500

	s.Step(t0+500, trig, nil, nil)
	s.HoldFinal(t0+500, sent)
	if got := s.Detections(); len(got) != 1 || !reflect.DeepEqual(got[0], sent) {
		t.Fatalf("held: %+v, want %+v", got, sent)
	}
	// Its stations stay triggered: nothing new is founded, it does not change.
	for k := int64(2); k < 20; k++ {
		s.Step(t0+k*500, trig, nil, nil)
		if got := s.Detections(); len(got) != 1 || !reflect.DeepEqual(got[0], sent) {
			t.Fatalf("tick %d: %+v, want only %+v", k, got, sent)
		}
	}

	// A state that never had it lists it while it lingers.
	empty := New(Config{})
	empty.Step(t0+1000, nil, nil, nil)
	empty.HoldFinal(t0, sent) // not final yet at t0
	if got := empty.Detections(); len(got) != 0 {
		t.Fatalf("held before it was final: %+v", got)
	}
	empty.HoldFinal(t0+1000, sent)
	if got := empty.Detections(); len(got) != 1 || !reflect.DeepEqual(got[0], sent) {
		t.Fatalf("put back: %+v, want %+v", got, sent)
	}

	// Lingered: gone from a state that still has it open.
	open := New(Config{})
	open.Step(t0, trig, nil, nil)
	after := sent.UpdatedMs + DefaultLinger.Milliseconds()
	open.Step(after, trig, nil, nil)
	open.HoldFinal(after, sent)
	if got := open.Detections(); len(got) != 0 {
		t.Fatalf("after lingering: %+v, want none", got)
	}
}

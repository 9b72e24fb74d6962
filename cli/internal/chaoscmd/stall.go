package chaoscmd

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A machine event is something that happened to the machine, not to the
// system under test, and that no system could ride out: the checker itself
// was not scheduled for seconds (the virtual machine paused, the host
// starved it), or the wall clock stepped. Every process of the topology
// lives on the same machine and the same clock; what they miss while it
// happens (ticks skipped after a stall, rounds a station could not send)
// is the machine's, and the report says so instead of blaming the system.
type machineEvent struct {
	// From and To bound the event on the wall clock (after the step, for a
	// step).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Stalled is how much later than due the checker ran; Stepped is how
	// far the wall clock moved beyond the monotonic one.
	Stalled time.Duration `json:"stalled_ns"`
	Stepped time.Duration `json:"stepped_ns"`
}

func (e machineEvent) String() string {
	if e.Stepped != 0 {
		return fmt.Sprintf("the wall clock stepped by %+v at %s", e.Stepped.Round(time.Millisecond), e.To.Format(time.TimeOnly))
	}
	return fmt.Sprintf("the checker was not run for %s, %s to %s", e.Stalled.Round(100*time.Millisecond),
		e.From.Format(time.TimeOnly), e.To.Format(time.TimeOnly))
}

// Thresholds of the machine watch: it wakes every watchEvery; a wake-up
// later than stallAfter, or a wall clock that moved stepAfter more or less
// than the monotonic one, is an event. Both are far above what scheduling
// on a busy 2-core machine does (tens of milliseconds).
const (
	watchEvery = 100 * time.Millisecond
	stallAfter = 2 * time.Second
	stepAfter  = time.Second
)

// machineWatch records machine events while ctx lasts.
type machineWatch struct {
	mu     sync.Mutex
	events []machineEvent
}

func watchMachine(ctx context.Context) *machineWatch {
	w := &machineWatch{}
	go func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		prev := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			w.observe(prev.Round(0), now.Round(0), now.Sub(prev))
			prev = now
		}
	}()
	return w
}

// observe judges one wake-up: the wall clock then and now, and the
// monotonic time between.
func (w *machineWatch) observe(prev, now time.Time, mono time.Duration) {
	wall := now.Sub(prev)
	var ev machineEvent
	if mono > stallAfter {
		ev.Stalled = mono - watchEvery
	}
	if d := wall - mono; d > stepAfter || d < -stepAfter {
		ev.Stepped = d
	}
	if ev.Stalled == 0 && ev.Stepped == 0 {
		return
	}
	ev.From, ev.To = prev, now
	w.mu.Lock()
	w.events = append(w.events, ev)
	w.mu.Unlock()
}

func (w *machineWatch) list() []machineEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]machineEvent(nil), w.events...)
}

// machineSlack is how long after a machine event its effects may still
// show: the RTS tick loop skips the ticks more than 3 s behind once it runs
// again, and a client reconnects within its 3 s retry.
const machineSlack = 7 * time.Second

// during returns the machine event that overlaps [a, b], widened by the
// slack, if any.
func during(events []machineEvent, a, b time.Time) (machineEvent, bool) {
	for _, e := range events {
		if !e.From.Add(-time.Second).After(b) && !e.To.Add(machineSlack).Before(a) {
			return e, true
		}
	}
	return machineEvent{}, false
}

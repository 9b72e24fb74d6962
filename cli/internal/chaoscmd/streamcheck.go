package chaoscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"shindo.dev/sdk/sse"
)

// Bounds on what a client following the client rules (SPEC §7: retry
// 3 s with Last-Event-ID, switch entrance after three failed reconnects)
// waits for the next RTS event, documented in docs/RELIABILITY.md.
const (
	// waitBound holds through any fault but its own edge's loss: the
	// edge switches core within a tick.
	waitBound = 2 * time.Second
	// edgeLostBound holds when the client's edge went down: three failed
	// reconnects 3 s apart, then the other edge.
	edgeLostBound = 16 * time.Second
)

// follower is one client of the live stream (RTS and alerts) that follows
// the client rules, entering at the first of its entrances.
type follower struct {
	name string
	// edges maps an edge site to its entrance, to tell when the client's
	// own edge was the one down.
	edges map[string]string

	mu     sync.Mutex
	ticks  []int64
	at     []time.Time
	entry  []string // the entrance each tick came from
	alerts map[string]uint32
	// problems found as events arrive (alert serials going back, one
	// earthquake under two IDs).
	problems []string
	eewSeen  int
}

func follow(ctx context.Context, topo *topology, name string, entrances []string, edges map[string]string) *follower {
	f := &follower{name: name, edges: edges, alerts: map[string]uint32{}}
	events := make(chan sse.Event, 256)
	// Stream ends with ctx; its error is only that.
	go func() {
		_ = sse.Stream(ctx, sse.Options{Entrances: entrances, Path: "/v1/stream?topics=rts,eew",
			HTTP: topo.client(0, 3*time.Second)}, events)
	}()
	go func() {
		for ev := range events {
			f.take(ev)
		}
	}()
	return f
}

func (f *follower) take(ev sse.Event) {
	if ev.Name != "" {
		return // the hello and gap events, which carry the position as their ID
	}
	ms, topic, ok := strings.Cut(ev.ID, "-")
	tick, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return // the hello
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch topic {
	case "0":
		f.ticks = append(f.ticks, tick)
		f.at = append(f.at, time.Now())
		f.entry = append(f.entry, ev.Entry)
	case "1":
		f.eewSeen++
		f.checkAlerts(tick, ev.Data)
	}
}

// checkAlerts: an alert's serial never goes back, and no earthquake is
// listed twice under two IDs (one from each core) at once.
func (f *follower) checkAlerts(tick int64, data string) {
	var list []struct {
		ID     string `json:"id"`
		Serial uint32 `json:"serial"`
		EQ     struct {
			Time int64   `json:"time"`
			Lat  float64 `json:"lat"`
			Lon  float64 `json:"lon"`
		} `json:"eq"`
	}
	if err := json.Unmarshal([]byte(data), &list); err != nil {
		f.problems = append(f.problems, fmt.Sprintf("%s: alert list of tick %d is not JSON: %v", f.name, tick, err))
		return
	}
	for i, a := range list {
		if prev, ok := f.alerts[a.ID]; ok && a.Serial < prev {
			f.problems = append(f.problems, fmt.Sprintf("%s: alert %s went from serial %d back to %d at tick %d", f.name, a.ID, prev, a.Serial, tick))
		}
		f.alerts[a.ID] = max(f.alerts[a.ID], a.Serial)
		for _, b := range list[i+1:] {
			if a.ID == b.ID {
				f.problems = append(f.problems, fmt.Sprintf("%s: alert %s listed twice at tick %d", f.name, a.ID, tick))
				continue
			}
			dt := math.Abs(float64(a.EQ.Time - b.EQ.Time))
			if dt < 10_000 && kmBetween(a.EQ.Lat, a.EQ.Lon, b.EQ.Lat, b.EQ.Lon) < 50 {
				f.problems = append(f.problems, fmt.Sprintf("%s: one earthquake under two IDs at tick %d: %s and %s", f.name, tick, a.ID, b.ID))
			}
		}
	}
}

func kmBetween(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371.0
	p1, p2 := lat1*math.Pi/180, lat2*math.Pi/180
	dp, dl := p2-p1, (lon2-lon1)*math.Pi/180
	a := math.Sin(dp/2)*math.Sin(dp/2) + math.Cos(p1)*math.Cos(p2)*math.Sin(dl/2)*math.Sin(dl/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}

// findings judges what the follower received between from and to
// against the faults injected meanwhile. Ticks missed and waits during a
// machine event are the machine's: counted as excused, not violations.
func (f *follower) findings(from, to time.Time, faults []faultRecord, machine []machineEvent) (checked int, longest time.Duration, excused int, violations []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	violations = append(violations, f.problems...)
	var missed, repeated []string
	for i := 1; i < len(f.ticks); i++ {
		if f.at[i].Before(from) || f.at[i-1].After(to) {
			continue
		}
		checked++
		_, stalled := during(machine, time.UnixMilli(f.ticks[i-1]), time.UnixMilli(f.ticks[i]))
		switch d := f.ticks[i] - f.ticks[i-1]; {
		case d > 500 && stalled:
			excused += int(d/500 - 1)
		case d > 500:
			missed = append(missed, fmt.Sprintf("%d ticks after %d (at %s)", d/500-1, f.ticks[i-1], f.at[i].Format(time.TimeOnly)))
		case d <= 0:
			repeated = append(repeated, fmt.Sprintf("tick %d after %d", f.ticks[i], f.ticks[i-1]))
		}
		wait := f.at[i].Sub(f.at[i-1])
		if _, ok := during(machine, f.at[i-1], f.at[i]); ok {
			continue
		}
		longest = max(longest, wait)
		bound := waitBound
		active := activeDuring(faults, f.at[i-1], f.at[i])
		for _, fr := range active {
			if site, ok := strings.CutSuffix(fr.Target, "-edge"); ok && f.edges[site] == f.entry[i-1] {
				bound = edgeLostBound
			}
		}
		if wait > bound {
			violations = append(violations, fmt.Sprintf("%s waited %s for tick %d (bound %s) from %s; faults then: %s",
				f.name, wait.Round(time.Millisecond), f.ticks[i], bound, f.at[i-1].Format(time.TimeOnly), describe(active)))
		}
	}
	if len(missed) > 0 {
		violations = append(violations, fmt.Sprintf("%s missed ticks: %s", f.name, strings.Join(first(missed, 10), "; ")))
	}
	if len(repeated) > 0 {
		violations = append(violations, fmt.Sprintf("%s got ticks again or out of order: %s", f.name, strings.Join(first(repeated, 10), "; ")))
	}
	if checked == 0 {
		violations = append(violations, fmt.Sprintf("%s received no RTS event in the run", f.name))
	} else if span := to.Sub(from); f.at[len(f.at)-1].Before(to.Add(-5*time.Second)) || f.at[0].After(from.Add(5*time.Second)) {
		violations = append(violations, fmt.Sprintf("%s's events do not span the run (%s): first at %s, last at %s",
			f.name, span.Round(time.Second), f.at[0].Format(time.TimeOnly), f.at[len(f.at)-1].Format(time.TimeOnly)))
	}
	return checked, longest, excused, violations
}

// activeDuring returns the faults in effect at some time in [a, b],
// counting recovery as part of the fault.
func activeDuring(faults []faultRecord, a, b time.Time) []faultRecord {
	var out []faultRecord
	for _, f := range faults {
		if !f.At.After(b) && !f.Until.Before(a) {
			out = append(out, f)
		}
	}
	return out
}

func describe(fs []faultRecord) string {
	if len(fs) == 0 {
		return "none"
	}
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s %s (%s at %s)", f.Kind, f.Target, f.Action, f.At.Format(time.TimeOnly)))
	}
	return strings.Join(parts, ", ")
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

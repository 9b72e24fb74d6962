package detect

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRestoredStateContinuesAlike: a state saved and restored mid-event
// (long-period stations, picks of stations not triggered, a final
// detection and an open one in it) steps on
// exactly as the original does — what lets a core that adopts its peer's
// state go on naming events as the peer does.
func TestRestoredStateContinuesAlike(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 5))
	var sched []timed
	for i := range 40 {
		tm := timed{at("S"+strconv.Itoa(i), r.Float64()*150, r.Float64()*150, float32(1.5+r.Float64()*4)), r.IntN(60), 40 + r.IntN(80)}
		tm.tr.P = PWave{OnsetMs: t0 + int64(tm.start)*500 - 1000, WindowMs: 1000}
		sched = append(sched, tm)
	}
	trig := schedule(sched...)
	long := func(k int) []LongPeriod {
		if k%7 != 0 {
			return nil
		}
		tr := at("S"+strconv.Itoa(k%40), 30, 30, 0)
		return []LongPeriod{{Station: tr.Station, Lat: tr.Lat, Lon: tr.Lon, SvaCms: float32(5 + k%20)}}
	}
	// Stations not triggered that picked a P wave: they are not saved,
	// and the restored state takes them from the next tick's input.
	picked := func(k int) []Picked {
		var ps []Picked
		for i, tm := range sched {
			if k < tm.start-5 || k > tm.start+100 {
				continue
			}
			q := at("Q"+strconv.Itoa(i), 0, 0, 0)
			q.Lat, q.Lon = tm.tr.Lat, tm.tr.Lon+0.05 // 5 km east of its neighbour
			ps = append(ps, Picked{Station: q.Station, Lat: q.Lat, Lon: q.Lon, OnsetMs: tm.tr.P.OnsetMs + 500})
		}
		return ps
	}
	orig := New(Config{})
	var restored *State
	checked := 0
	for k := range 200 {
		tick := t0 + int64(k)*500
		orig.Step(tick, trig(k), long(k), picked(k))
		if restored != nil {
			restored.Step(tick, trig(k), long(k), picked(k))
			if got, want := restored.Detections(), orig.Detections(); !reflect.DeepEqual(got, want) {
				t.Fatalf("tick %d: restored state gives %+v, original %+v", k, got, want)
			}
			checked++
		}
		if k == 70 {
			if len(orig.Detections()) == 0 {
				t.Fatal("no detection at the tick of the save: nothing to compare")
			}
			if !slices.ContainsFunc(orig.events, func(ev *event) bool { return len(ev.picked) > 0 }) {
				t.Fatal("no detection took a pick of a station not triggered: nothing to compare")
			}
			var err error
			if restored, err = Restore(Config{}, orig.Save()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(restored.Save(), orig.Save()) {
				t.Fatal("save of the restored state differs from the original's")
			}
		}
	}
	if checked == 0 {
		t.Fatal("nothing compared")
	}
}

// TestRestoreRefusesBadStates: what a broken or hostile peer could send.
func TestRestoreRefusesBadStates(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	s.Step(t0, []Trigger{at("A", 0, 0, 2), at("B", 20, 0, 2), at("C", 0, 20, 2)}, nil, nil)
	good := s.Save()
	if len(good.Events) != 1 || len(good.Picks) != 3 {
		t.Fatalf("setup: %d detections, %d picks", len(good.Events), len(good.Picks))
	}
	if _, err := Restore(Config{}, good); err != nil {
		t.Fatalf("good state refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		spoil func(v *Saved)
		want  string
	}{
		{"pick joins an unlisted detection", func(v *Saved) { v.Picks[0].Event = "1-x" }, "not listed"},
		{"pick twice", func(v *Saved) { v.Picks[1].Station = v.Picks[0].Station }, "twice"},
		{"empty station", func(v *Saved) { v.Picks[0].Station = "" }, "saved pick"},
		{"long ID", func(v *Saved) { v.Events[0].Pub.ID = strings.Repeat("9", 65) }, "ID"},
		{"NaN epicentre", func(v *Saved) { v.Events[0].Pub.Lat = math.NaN() }, "out of range"},
		{"infinite peak", func(v *Saved) { v.Events[0].Members[0].Peak = float32(math.Inf(1)) }, "out of range"},
		{"serial 0", func(v *Saved) { v.Events[0].Pub.Serial = 0 }, "serial"},
		{"final without a time", func(v *Saved) { v.Events[0].Pub.Final = true }, "final"},
		{"members out of order", func(v *Saved) {
			m := v.Events[0].Members
			m[0], m[1] = m[1], m[0]
		}, "order"},
		{"detection twice", func(v *Saved) { v.Events = append(v.Events, v.Events[0]) }, "twice"},
		{"too many detections", func(v *Saved) { v.Events = make([]SavedEvent, MaxSavedEvents+1) }, "too large"},
	} {
		v := good
		v.Picks = append([]SavedPick(nil), good.Picks...)
		v.Events = append([]SavedEvent(nil), good.Events...)
		v.Events[0].Members = append([]SavedMember(nil), good.Events[0].Members...)
		tc.spoil(&v)
		_, err := Restore(Config{}, v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

package eew

import (
	"fmt"
	"strings"
	"testing"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// det is a detection "ID/serial", with "!" at the end for final.
func det(s string) *rtsv1.Detection {
	final := strings.HasSuffix(s, "!")
	id, serial, _ := strings.Cut(strings.TrimSuffix(s, "!"), "/")
	var n uint32
	fmt.Sscan(serial, &n)
	var first int64
	fmt.Sscan(id, &first)
	return &rtsv1.Detection{Id: id, Serial: n, Final: final, FirstTriggerMs: first}
}

func list(ds []*rtsv1.Detection) string {
	var parts []string
	for _, d := range ds {
		s := fmt.Sprintf("%s/%d", d.GetId(), d.GetSerial())
		if d.GetFinal() {
			s += "!"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestFeed plays the snapshots an edge serves, across switches of core,
// and checks what the feed publishes.
func TestFeed(t *testing.T) {
	t.Parallel()
	steps := []struct {
		in      []string // the served snapshot's detections
		want    string   // the feed after it
		changed bool
	}{
		{nil, "[]", true}, // the first list is published even when empty
		{nil, "[]", false},
		{[]string{"1/1"}, "[1/1]", true},
		{[]string{"1/1"}, "[1/1]", false}, // no change, no event
		{[]string{"1/2"}, "[1/2]", true},
		// Switch to a core one serial behind: nothing replayed.
		{[]string{"1/1"}, "[1/2]", false},
		{[]string{"1/2"}, "[1/2]", false},
		{[]string{"1/3", "2/1"}, "[1/3 2/1]", true},
		// A core that missed detection 2: it leaves the list...
		{[]string{"1/3"}, "[1/3]", true},
		// ... and a core still at its served serial does not bring it back,
		{[]string{"1/3", "2/1"}, "[1/3]", false},
		// but a newer serial does.
		{[]string{"1/3", "2/2"}, "[1/3 2/2]", true},
		{[]string{"1/4!", "2/2"}, "[1/4! 2/2]", true},
		// A final alert never changes again, even if a core disagrees.
		{[]string{"1/5", "2/2"}, "[1/4! 2/2]", false},
		{[]string{"2/2"}, "[2/2]", true},
		// Gone for good once final.
		{[]string{"1/9", "2/2"}, "[2/2]", false},
		{nil, "[]", true},
	}
	f := New()
	for i, st := range steps {
		var ds []*rtsv1.Detection
		for _, s := range st.in {
			ds = append(ds, det(s))
		}
		got, changed := f.Update(int64(i)*500, ds)
		if list(got) != st.want || changed != st.changed {
			t.Fatalf("step %d %v: %s changed=%v, want %s changed=%v", i, st.in, list(got), changed, st.want, st.changed)
		}
	}
}

func TestFeedForgets(t *testing.T) {
	t.Parallel()
	f := New()
	f.Update(0, []*rtsv1.Detection{det("1/2")})
	f.Update(500, nil)
	f.Update(500+rememberMs+500, nil)
	if len(f.gone) != 0 {
		t.Fatalf("remembered %v", f.gone)
	}
}

// TestFeedFlash: a flash that moves on without the alert's serial is
// taken, without counting as a change of the alerts; a core whose flash
// lags is not.
func TestFeedFlash(t *testing.T) {
	t.Parallel()
	f := New()
	flash := func(areaSerial uint32, sva ...float32) *rtsv1.Detection {
		d := det("1/2")
		d.AreaSerial = areaSerial
		for i, v := range sva {
			d.Lpgm = append(d.Lpgm, &rtsv1.StationLPGM{StationId: string(rune('A' + i)), Level: 1, SvaCms: v})
		}
		return d
	}
	for i, tc := range []struct {
		d          *rtsv1.Detection
		areaSerial uint32
		lpgm       int
	}{
		{flash(1), 1, 0},
		{flash(2), 2, 0},
		{flash(2, 6), 2, 1},
		{flash(1, 6, 7), 2, 1},     // a lagging core: its area serial is behind
		{flash(2, 6), 2, 1},        // the same
		{flash(2, 5.5, 7.5), 2, 2}, // more long-period response
	} {
		got, changed := f.Update(int64(i)*500, []*rtsv1.Detection{tc.d})
		if i > 0 && changed {
			t.Errorf("step %d: a flash counted as a change of the alerts", i)
		}
		if got[0].GetAreaSerial() != tc.areaSerial || len(got[0].GetLpgm()) != tc.lpgm {
			t.Errorf("step %d: area serial %d, %d long-period stations", i, got[0].GetAreaSerial(), len(got[0].GetLpgm()))
		}
	}
}

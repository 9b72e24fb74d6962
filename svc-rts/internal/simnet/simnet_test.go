package simnet

import (
	"reflect"
	"testing"
	"time"

	"shindo.dev/seismo/synth"
)

func TestGridOnLand(t *testing.T) {
	t.Parallel()
	st := Grid(0.1, 1)
	if len(st) < 300 || len(st) > 400 {
		t.Fatalf("%d stations", len(st))
	}
	for _, s := range st {
		if !OnLand(s.Lat, s.Lon) || s.Code == 0 {
			t.Fatalf("station %+v", s)
		}
	}
	if !reflect.DeepEqual(st, Grid(0.1, 1)) || reflect.DeepEqual(st, Grid(0.1, 2)) {
		t.Fatal("layout not deterministic by seed")
	}
}

// TestRecord: frames end on the 500 ms grid, one per station and tick,
// identical from one run to the next, and an event raises the intensity.
func TestRecord(t *testing.T) {
	t.Parallel()
	ev, err := synth.Scenario("hualien-m6")
	if err != nil {
		t.Fatal(err)
	}
	var st []Station // four stations within 30 km of the epicentre
	for _, s := range Grid(0.1, 1) {
		if ev.EpicentralKm(synth.Position{Lat: s.Lat, Lon: s.Lon}) < 30 && len(st) < 4 {
			st = append(st, s)
		}
	}
	start := time.UnixMilli(1_800_000_000_123)
	ev.Origin = start.Add(2 * time.Second)
	opts := Options{Start: start, Duration: 30 * time.Second, Events: []synth.Event{ev}, Seed: 1}
	got := Record(st, opts)
	for i, fs := range got {
		if len(fs) != 60 {
			t.Fatalf("station %d: %d frames", i, len(fs))
		}
		for k, f := range fs {
			if f.Station != i || f.WindowEndMs != 1_800_000_000_000+int64(k+1)*500 {
				t.Fatalf("station %d frame %d: %+v", i, k, f)
			}
		}
		if peak := max(fs[59].Intensity, fs[40].Intensity); peak < 1 {
			t.Errorf("station %d: intensity %.2f after an M6.4", i, peak)
		}
	}
	if !reflect.DeepEqual(got, Record(st, opts)) {
		t.Fatal("recording not deterministic")
	}
}

package compatjson

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func detections() []*rtsv1.Detection {
	return []*rtsv1.Detection{
		{
			Id: "1800000005500-18", Serial: 7, OriginTimeMs: 1_800_000_001_000, Lat: 23.78, Lon: 121.67, DepthKm: 10,
			Magnitude: 7.4, Location: "花蓮縣壽豐鄉", LocationCode: 974, MaxLevel: 6,
			FirstTriggerMs: 1_800_000_005_500, UpdatedMs: 1_800_000_020_000, Stations: 120,
		},
		{
			Id: "1800000030000-x", Serial: 3, Final: true, OriginTimeMs: 1_800_000_025_300, Lat: 24.7, Lon: 122.05, DepthKm: 10,
			Magnitude: 4.4, Location: `宜蘭縣蘇澳鎮 "port"`, LocationCode: 270, MaxLevel: 3,
			FirstTriggerMs: 1_800_000_030_000, UpdatedMs: 1_800_000_090_000, Stations: 9,
		},
	}
}

// TestEEWGolden pins the exact bytes; refresh with UPDATE_GOLDEN=1 after a
// deliberate change.
func TestEEWGolden(t *testing.T) {
	t.Parallel()
	got := EEW(DefaultAuthor, detections())
	path := filepath.Join("testdata", "eew.golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestEEWShape checks the document against SPEC §7: field names, and JSON
// types (strings, integers, numbers) exactly.
func TestEEWShape(t *testing.T) {
	t.Parallel()
	var doc []map[string]any
	b := EEW(DefaultAuthor, detections())
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	if len(doc) != 2 {
		t.Fatalf("%d alerts", len(doc))
	}
	isInt := func(v any) bool { f, ok := v.(float64); return ok && f == math.Trunc(f) }
	isNum := func(v any) bool { _, ok := v.(float64); return ok }
	isStr := func(v any) bool { _, ok := v.(string); return ok }
	outer := map[string]func(any) bool{"author": isStr, "id": isStr, "serial": isInt, "status": isInt, "final": isInt, "time": isInt}
	inner := map[string]func(any) bool{"time": isInt, "lat": isNum, "lon": isNum, "depth": isNum, "mag": isNum, "loc": isStr, "max": isInt}
	for i, a := range doc {
		if len(a) != len(outer)+1 {
			t.Errorf("alert %d has fields %v", i, a)
		}
		for k, ok := range outer {
			if !ok(a[k]) {
				t.Errorf("alert %d: %q = %#v", i, k, a[k])
			}
		}
		eq, _ := a["eq"].(map[string]any)
		if len(eq) != len(inner) {
			t.Errorf("alert %d: eq has fields %v", i, eq)
		}
		for k, ok := range inner {
			if !ok(eq[k]) {
				t.Errorf("alert %d: eq.%q = %#v", i, k, eq[k])
			}
		}
	}
	a, b2 := doc[0], doc[1]
	if a["author"] != "trem" || a["id"] != "1800000005500-18" || a["serial"] != 7.0 || a["status"] != 1.0 || a["final"] != 0.0 || a["time"] != 1.80000002e12 {
		t.Errorf("first alert %v", a)
	}
	if eq := a["eq"].(map[string]any); eq["lat"] != 23.78 || eq["lon"] != 121.67 || eq["depth"] != 10.0 || eq["mag"] != 7.4 || eq["max"] != 6.0 || eq["time"] != 1.800000001e12 || eq["loc"] != "花蓮縣壽豐鄉" {
		t.Errorf("first eq %v", eq)
	}
	if b2["status"] != 0.0 || b2["final"] != 1.0 || b2["eq"].(map[string]any)["loc"] != `宜蘭縣蘇澳鎮 "port"` {
		t.Errorf("second alert %v", b2)
	}
	if got := string(EEW(DefaultAuthor, nil)); got != "[]" {
		t.Errorf("no detection: %s, want []", got)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	for level, want := range []int{0, 0, 0, 0, 1, 1, 1, 1, 1, 1} {
		if got := Status(&rtsv1.Detection{MaxLevel: uint32(level)}); got != want {
			t.Errorf("level %d: status %d, want %d", level, got, want)
		}
	}
}

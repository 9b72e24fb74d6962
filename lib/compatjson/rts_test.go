package compatjson

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func snapshot() *rtsv1.Snapshot {
	return &rtsv1.Snapshot{
		TimeMs: 1_800_000_000_500,
		Site:   "TNN-1",
		Stations: []*rtsv1.StationState{
			{StationId: "S0001", Pga: 12.3456, Pgv: 0.5, Intensity: 3.21, DisplayIntensity: 3.5, Alert: true},
			{StationId: "S0002", Pga: 0.01, Pgv: 0, Intensity: -0.8, DisplayIntensity: -0.001},
			{StationId: `we"ird`, Pga: float32(math.NaN())},
		},
		Boxes: []*rtsv1.BoxLevel{{BoxId: 18, Level: 4}, {BoxId: 24, Level: 3}},
		Areas: []*rtsv1.AreaLevel{{Code: 970, Level: 4}, {Code: 973, Level: 3}},
	}
}

// TestRTSGolden pins the exact bytes; refresh with UPDATE_GOLDEN=1 after a
// deliberate change.
func TestRTSGolden(t *testing.T) {
	t.Parallel()
	got := RTS(snapshot())
	path := filepath.Join("testdata", "rts.golden.json")
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

// TestRTSShape checks the document against SPEC §7's field names and types.
func TestRTSShape(t *testing.T) {
	t.Parallel()
	var doc struct {
		Station map[string]map[string]any `json:"station"`
		Box     map[string]int            `json:"box"`
		Int     []struct {
			Code int `json:"code"`
			I    int `json:"i"`
		} `json:"int"`
		Time int64 `json:"time"`
	}
	b := RTS(snapshot())
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	s1 := doc.Station["S0001"]
	for _, k := range []string{"pga", "pgv", "i", "I", "alert"} {
		if _, ok := s1[k]; !ok {
			t.Errorf("S0001 lacks %q", k)
		}
	}
	if s1["i"] != 3.21 || s1["pga"] != 12.346 || s1["alert"] != 1.0 {
		t.Errorf("S0001 = %v", s1)
	}
	if _, ok := doc.Station["S0002"]["alert"]; ok {
		t.Error("alert present for an untriggered station")
	}
	if doc.Box["18"] != 4 || len(doc.Int) != 2 || doc.Int[0].Code != 970 || doc.Time != 1_800_000_000_500 {
		t.Errorf("doc %+v", doc)
	}
	empty := RTS(&rtsv1.Snapshot{TimeMs: 5})
	if string(empty) != `{"station":{},"box":{},"int":[],"time":5}` {
		t.Errorf("empty snapshot %s", empty)
	}
}

func BenchmarkRTS10k(b *testing.B) {
	s := &rtsv1.Snapshot{TimeMs: 1}
	for i := range 10_000 {
		s.Stations = append(s.Stations, &rtsv1.StationState{StationId: "S" + string(rune('A'+i%26)), Pga: 1.234, Pgv: 0.1, Intensity: 1.5, DisplayIntensity: 2})
	}
	for b.Loop() {
		RTS(s)
	}
}

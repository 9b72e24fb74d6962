package detectsync

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"testing"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/metadb"
)

func TestReportID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"1712102289000-18": "113000-2024-0403-075809-18", // 07:58:09 in Taiwan
		"1712102289500-x":  "113000-2024-0403-075809-x",
		"0-3":              "059000-1970-0101-080000-3",
		"abc":              "det-abc",
		"12-a b":           "det-" + fmt.Sprintf("%x", "12-a b"),
	} {
		got := ReportID(id)
		if got != want || metadb.CheckReportID(got) != nil {
			t.Errorf("ReportID(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestReportOfAndAreas(t *testing.T) {
	t.Parallel()
	var l areaLog
	l.add(1000, []metadb.AreaLevel{{Code: 970, Level: 3}})
	l.add(1500, []metadb.AreaLevel{{Code: 970, Level: 5}, {Code: 100, Level: 2}})
	l.add(9000, []metadb.AreaLevel{{Code: 260, Level: 9}})
	areas := l.max(1000, 2000)
	if fmt.Sprint(areas) != "[{100 2} {970 5}]" {
		t.Fatalf("areas %v", areas)
	}
	r := ReportOf(metadb.Detection{ID: "1712102289000-18", OriginTimeMs: 1712102281000, Lat: 23.7749, Lon: 121.6651,
		DepthKm: 10.04, Magnitude: 6.25, Location: "Hualien City", LocationCode: 970, MaxLevel: 4, FirstTriggerMs: 1712102289000}, areas)
	// The 2024-04-03 Hualien earthquake's epicentre: CWA printed 花蓮縣政府南南東方
	// 25.0 公里; the location is in that form, measured from the rounded
	// epicentre.
	if r.Lat != 23.77 || r.Lon != 121.67 || r.DepthKm != 10 || r.Magnitude != 6.3 || r.Location != "花蓮縣政府南南東方 25.1 公里 (位於花蓮縣近海)" ||
		r.MaxLevel != 5 || r.TremMs != 1712102289000 || r.SourceDetectionID != "1712102289000-18" {
		t.Fatalf("%+v", r)
	}
	// On land, the township; the place is what TREM-Lite's report speech
	// extracts (audio.js:303: /位於(.+?)(?=\))/).
	r = ReportOf(metadb.Detection{ID: "1-2", Lat: 23.897, Lon: 121.577, Location: "x"}, nil)
	if r.Location != "花蓮縣政府南南西方 10.9 公里 (位於花蓮縣壽豐鄉)" {
		t.Fatalf("on land: %q", r.Location)
	}
	// TREM-Lite's lookahead, in Go's syntax: the shortest text after 位於 up
	// to an ASCII ')'.
	if m := regexp.MustCompile(`位於(.+?)\)`).FindStringSubmatch(r.Location); m == nil || m[1] != "花蓮縣壽豐鄉" {
		t.Fatalf("TREM-Lite extracts %q from %q", m, r.Location)
	}
	l.add(9000+areaHistory.Milliseconds(), nil)
	if len(l.entries) != 2 {
		t.Fatalf("%d entries kept past the history", len(l.entries))
	}
}

// TestPeakLog: the stations that felt something (level 1 or more) at each
// snapshot, each at its highest over the buckets the span touches, values
// bounded as the database bounds them; older buckets are forgotten.
func TestPeakLog(t *testing.T) {
	t.Parallel()
	st := func(id string, pga, pgv, in float32) *rtsv1.StationState {
		return &rtsv1.StationState{StationId: id, Pga: pga, Pgv: pgv, Intensity: in}
	}
	var l peakLog
	l.add(10_000, []*rtsv1.StationState{st("A", 20, 1, 2.1), st("quiet", 0.5, 0.01, 0.2), st("", 9, 9, 9)})
	l.add(10_500, []*rtsv1.StationState{st("A", 35, 0.8, 2.4), st("B", float32(math.NaN()), 2e6, 40)})
	l.add(30_000, []*rtsv1.StationState{st("A", 500, 30, 5.5)}) // another event, later
	got := l.max(10_000, 12_000)
	want := []metadb.StationPeak{{StationID: "A", PGAGal: 35, PGVCms: 1, Intensity: 2.4}, {StationID: "B", PGAGal: 0, PGVCms: 1000, Intensity: 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("peaks %+v, want %+v", got, want)
	}
	if got := l.max(29_000, 31_000); len(got) != 1 || got[0].PGAGal != 500 {
		t.Fatalf("the later span: %+v", got)
	}
	l.add(30_000+areaHistory.Milliseconds(), nil)
	if got := l.max(0, 20_000); len(got) != 0 {
		t.Fatalf("%+v kept past the history", got)
	}
}

package compat

import (
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"shindo.dev/lib/metadb"
	"shindo.dev/lib/township"
)

func TestParseReportQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query string
		ok    bool
		check func(metadb.ReportFilter) bool
	}{
		{"", true, func(f metadb.ReportFilter) bool { return f.Limit == 50 && f.Offset == 0 && f.MinLevel == nil }},
		{"limit=50&page=3&key=", true, func(f metadb.ReportFilter) bool { return f.Limit == 50 && f.Offset == 100 }},
		{"minIntensity=4&maxIntensity=9&minMagnitude=5.5&maxMagnitude=8&minDepth=0&maxDepth=700&startTime=0&endTime=1712102289000&loc=花蓮&city=x", true,
			func(f metadb.ReportFilter) bool {
				return *f.MinLevel == 4 && *f.MaxLevel == 9 && *f.MinMagnitude == 5.5 && *f.MaxDepthKm == 700 && *f.ToMs == 1712102289000
			}},
		{"limit=500", true, nil},
		{"limit=0", false, nil},
		{"limit=501", false, nil},
		{"limit=", false, nil},
		{"limit=1&limit=2", false, nil},
		{"page=0", false, nil},
		{"page=202&limit=500", false, nil}, // past MaxOffset
		{"page=2147483647", false, nil},
		{"minIntensity=10", false, nil},
		{"minIntensity=4.5", false, nil},
		{"minMagnitude=NaN", false, nil},
		{"minMagnitude=Inf", false, nil},
		{"maxDepth=-1", false, nil},
		{"startTime=-5", false, nil},
		{"startTime=1e12", false, nil},
		{"minIntensity=5&maxIntensity=4", false, nil},
		{"minMagnitude=6&maxMagnitude=5", false, nil},
		{"minDepth=9&maxDepth=8", false, nil},
		{"startTime=9&endTime=8", false, nil},
		// DPIP's report filter (earthquake_api.dart:116-134 of ExpTechTW/DPIP
		// at 194d28f): days in Taiwan time, inclusive; magnitudes and depths
		// as Dart doubles; sort and order.
		{"limit=30&minIntensity=3&maxIntensity=9&minMagnitude=4.0&maxMagnitude=8.0&minDepth=10.0&maxDepth=100.0&startTime=2026-01-01&endTime=2026-01-31&sort=magnitude&order=asc", true,
			func(f metadb.ReportFilter) bool {
				return *f.FromMs == 1767196800000 && *f.ToMs == 1769875199999 && *f.MinMagnitude == 4 && *f.MinDepthKm == 10 &&
					f.Sort == metadb.SortMagnitude && f.Ascending && f.Limit == 30
			}},
		{"startTime=2026-03-05&endTime=2026-03-05", true, func(f metadb.ReportFilter) bool { return *f.ToMs-*f.FromMs == 86_400_000-1 }},
		{"sort=intensity", true, func(f metadb.ReportFilter) bool { return f.Sort == metadb.SortLevel && !f.Ascending }},
		{"sort=depth&order=desc", true, func(f metadb.ReportFilter) bool { return f.Sort == metadb.SortDepth && !f.Ascending }},
		{"startTime=2026-02-30", false, nil},
		{"startTime=2026-1-01", false, nil},
		{"startTime=1969-12-31", false, nil}, // before 1970 in Taiwan time
		{"startTime=2026-03-06&endTime=2026-03-05", false, nil},
		{"sort=loc", false, nil},
		{"order=up", false, nil},
		{"sort=", false, nil},
	} {
		q, _ := url.ParseQuery(tc.query)
		f, err := ParseReportQuery(q)
		if (err == nil) != tc.ok || (tc.ok && tc.check != nil && !tc.check(f)) {
			t.Errorf("%q: %+v %v", tc.query, f, err)
		}
	}
}

// FuzzParseReportQuery: any query is refused or gives a filter the store
// accepts.
func FuzzParseReportQuery(f *testing.F) {
	for _, s := range []string{"", "limit=50&page=1", "limit=20&page=3&minIntensity=3&maxIntensity=7&minMagnitude=4.5",
		"minDepth=0&maxDepth=700&startTime=1700000000000&endTime=1712102289000&key=", "page=9999999999", "limit=%zz",
		"minMagnitude=1e308&maxMagnitude=-0", "startTime=2026-01-01&endTime=9999-12-31&sort=depth&order=asc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		fl, err := ParseReportQuery(q)
		if err != nil {
			return
		}
		if fl.Limit < 1 || fl.Limit > MaxLimit || fl.Offset < 0 || fl.Offset > metadb.MaxOffset {
			t.Fatalf("%q: limit %d offset %d", raw, fl.Limit, fl.Offset)
		}
		if fl.MinLevel != nil && (*fl.MinLevel < 0 || *fl.MinLevel > 9) || fl.MaxLevel != nil && (*fl.MaxLevel < 0 || *fl.MaxLevel > 9) {
			t.Fatalf("%q: levels out of range", raw)
		}
		for _, p := range []*float64{fl.MinMagnitude, fl.MaxMagnitude, fl.MinDepthKm, fl.MaxDepthKm} {
			if p != nil && (*p != *p || *p > 1000 || *p < -5) {
				t.Fatalf("%q: %v", raw, *p)
			}
		}
	})
}

func TestRenderEscapesAndNames(t *testing.T) {
	t.Parallel()
	r := metadb.Report{ID: "X", Location: "\"</script>\u2028 (位於</script>)", Lat: 23.5, Areas: []metadb.AreaLevel{{Code: 999, Level: 2}}}
	got := string(AppendReport(nil, &r, []metadb.StationInfo{{Code: 999, Lat: 1, Lon: 2}, {Code: 999, Lat: 2, Lon: 3}}))
	want := `{"id":"X","lat":23.5,"lon":0,"loc":"\"\u003c/script\u003e\u2028 (位於\u003c/script\u003e)","depth":0,"mag":0,"int":0,"time":0,"trem":0,"md5":"","list":{"其他":{"int":2,"town":{"999":{"lat":1.5,"lon":2.5,"int":2}}}}}`
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if s := string(AppendReportList(nil, nil)); s != "[]" {
		t.Fatal(s)
	}
	if s := string(AppendStations(nil, nil)); s != "{}" {
		t.Fatal(s)
	}
	if !strings.Contains(string(AppendReportList(nil, []metadb.Report{{ID: "a"}, {ID: "b"}})), `"md5":""},{"id":"b"`) {
		t.Fatal("list items not separated")
	}
}

// TestReportsTREMLiteCanAnnounce: TREM-Lite announces a new report from
// its detail, and throws — no notification, no speech — when the location
// has no place after 位於 (src/js/index/core/audio.js:303 of
// ExpTechTW/TREM-Lite at 9bbaccf) or a town's intensity is not 1 to 9
// (:340, intensityStations[townData.int].push), or when no county of
// "list" has the highest intensity (:311, an empty list). Reports entered
// by hand may have any of these; the apps get them in the form they read.
func TestReportsTREMLiteCanAnnounce(t *testing.T) {
	t.Parallel()
	// What audio.js:303 runs, in Go's syntax: the first place it extracts.
	tremPlace := regexp.MustCompile(`位於(.+?)\)`)
	for _, tc := range []struct {
		given, want string
	}{
		{"花蓮縣政府南南西方 11.4 公里 (位於花蓮縣壽豐鄉)", "花蓮縣政府南南西方 11.4 公里 (位於花蓮縣壽豐鄉)"},
		{"Hualien County", "Hualien County (位於花蓮縣壽豐鄉)"},
		{"花蓮縣 (位於)", "花蓮縣 (位於) (位於花蓮縣壽豐鄉)"},            // nothing between 位於 and ")"
		{"位於花蓮\n縣)", "位於花蓮\n縣) (位於花蓮縣壽豐鄉)"},            // "." is no line end in JavaScript
		{"", township.ReportLocation(23.888, 121.558)}, // as a report made from a detection
		{"  ", township.ReportLocation(23.888, 121.558)},
	} {
		r := metadb.Report{ID: "X", Location: tc.given, Lat: 23.888, Lon: 121.558,
			Areas: []metadb.AreaLevel{{Code: 970, Level: 0}, {Code: 972, Level: 3}, {Code: 100, Level: 0}}}
		var got struct {
			Loc  string `json:"loc"`
			List map[string]struct {
				Int  int `json:"int"`
				Town map[string]struct {
					Int int `json:"int"`
				} `json:"town"`
			} `json:"list"`
		}
		if err := json.Unmarshal(AppendReport(nil, &r, nil), &got); err != nil {
			t.Fatal(err)
		}
		if got.Loc != tc.want {
			t.Errorf("location %q: the apps get %q; want %q", tc.given, got.Loc, tc.want)
		}
		if m := tremPlace.FindStringSubmatch(got.Loc); m == nil || strings.ContainsAny(m[1], "\n") {
			t.Errorf("location %q: TREM-Lite extracts no place from %q", tc.given, got.Loc)
		}
		if len(got.List) != 1 {
			t.Fatalf("list %+v: want the one county with a felt town", got.List)
		}
		for county, c := range got.List {
			if c.Int != 3 || len(c.Town) != 1 {
				t.Errorf("%s: %+v; want intensity 3 and its one felt town", county, c)
			}
			for town, tw := range c.Town {
				if tw.Int < 1 || tw.Int > 9 {
					t.Errorf("%s%s at %d", county, town, tw.Int)
				}
			}
		}
	}
	// A report nobody felt: audio.js:311 takes the county whose intensity
	// is the highest of list's (0 when list is empty) and throws when
	// there is none.
	for _, tc := range []struct {
		name     string
		lat, lon float64
		areas    []metadb.AreaLevel
		county   string
	}{
		{"no areas", 23.888, 121.558, nil, "花蓮縣"},
		{"areas at level 0 only", 23.888, 121.558, []metadb.AreaLevel{{Code: 970, Level: 0}}, "花蓮縣"},
		{"at sea", 22.9, 121.5, nil, "臺東縣"},
		{"no coordinate", math.NaN(), 121.5, nil, otherCounty},
	} {
		r := metadb.Report{ID: "X", Location: "x", Lat: tc.lat, Lon: tc.lon, Areas: tc.areas}
		var got struct {
			List map[string]struct {
				Int  int             `json:"int"`
				Town json.RawMessage `json:"town"`
			} `json:"list"`
		}
		body := AppendReport(nil, &r, nil)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, body)
		}
		maxInt, with := 0, ""
		for _, c := range got.List {
			maxInt = max(maxInt, c.Int)
		}
		for name, c := range got.List {
			if c.Int == maxInt {
				with = name
			}
		}
		if with == "" {
			t.Errorf("%s: TREM-Lite finds no county at the highest intensity in %s", tc.name, body)
			continue
		}
		if with != tc.county || maxInt != 0 || string(got.List[with].Town) != "{}" {
			t.Errorf("%s: list %s; want %s at 0 with no towns", tc.name, body, tc.county)
		}
	}
	// The list gives every report's location in the same form.
	list := string(AppendReportList(nil, []metadb.Report{{ID: "a", Location: "Hualien County", Lat: 23.888, Lon: 121.558}}))
	if !strings.Contains(list, `"loc":"Hualien County (位於花蓮縣壽豐鄉)"`) {
		t.Errorf("list: %s", list)
	}
}

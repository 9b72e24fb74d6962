package metadb_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"shindo.dev/lib/metadb"
)

func hualienReport(id string) metadb.Report {
	return metadb.Report{
		ID: id, TimeMs: 1712102029000, Lat: 23.77, Lon: 121.67, DepthKm: 15.5, Magnitude: 7.2,
		Location: "花蓮縣政府南南東方 25.0 公里", MaxLevel: 7,
		Areas: []metadb.AreaLevel{{Code: 970, Level: 7}, {Code: 100, Level: 5}},
	}
}

func TestCreateReportIsIdempotentByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)

	r := hualienReport("113000-2024-0403-075809")
	got, created, err := s.CreateReport(ctx, r)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if got.MD5 != got.ContentHash() || len(got.MD5) != 32 || got.Areas[0].Code != 100 {
		t.Fatalf("created %+v (areas must come ordered by code, md5 = content hash)", got)
	}

	// Areas in another order are the same content.
	again := hualienReport(r.ID)
	again.Areas[0], again.Areas[1] = again.Areas[1], again.Areas[0]
	got2, created, err := s.CreateReport(ctx, again)
	if err != nil || created || got2.MD5 != got.MD5 || !got2.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("same content again: created=%v err=%v %+v", created, err, got2)
	}

	changed := hualienReport(r.ID)
	changed.Magnitude = 7.3
	if _, _, err := s.CreateReport(ctx, changed); !errors.Is(err, metadb.ErrConflict) {
		t.Fatalf("different content: err = %v, want ErrConflict", err)
	}

	read, err := s.GetReport(ctx, r.ID)
	if err != nil || read.Magnitude != 7.2 || len(read.Areas) != 2 || read.Areas[1] != (metadb.AreaLevel{Code: 970, Level: 7}) {
		t.Fatalf("get: %+v %v", read, err)
	}
	if _, err := s.GetReport(ctx, "nope"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown report: %v", err)
	}
}

func TestCreateReportRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for name, edit := range map[string]func(*metadb.Report){
		"empty id":        func(r *metadb.Report) { r.ID = "" },
		"injection in id": func(r *metadb.Report) { r.ID = "x'); DROP TABLE reports;--" },
		"long id":         func(r *metadb.Report) { r.ID = strings.Repeat("a", 65) },
		"latitude":        func(r *metadb.Report) { r.Lat = 91 },
		"NaN longitude":   func(r *metadb.Report) { r.Lon = math.NaN() },
		"depth":           func(r *metadb.Report) { r.DepthKm = -1 },
		"magnitude":       func(r *metadb.Report) { r.Magnitude = math.Inf(1) },
		"level":           func(r *metadb.Report) { r.MaxLevel = 10 },
		"time":            func(r *metadb.Report) { r.TimeMs = -1 },
		"area level":      func(r *metadb.Report) { r.Areas[0].Level = 10 },
		"area twice":      func(r *metadb.Report) { r.Areas[1].Code = r.Areas[0].Code },
		"control char":    func(r *metadb.Report) { r.Location = "a\x00b" },
		"invalid utf-8":   func(r *metadb.Report) { r.Location = "\xff" },
		"long location":   func(r *metadb.Report) { r.Location = strings.Repeat("震", 201) },
	} {
		r := hualienReport("R1")
		edit(&r)
		if _, _, err := s.CreateReport(context.Background(), r); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// Hostile text is data.
	r := hualienReport("R2")
	r.Location = "'; DROP TABLE reports; --"
	if _, _, err := s.CreateReport(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetReport(context.Background(), "R2"); err != nil || got.Location != r.Location {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestMergeDetectionReportConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)

	base := hualienReport("113000-2024-0403-075809-18")
	base.SourceDetectionID, base.TremMs = "1712102289000-18", 1712102289000
	tnn, tyo := base, base
	tnn.Areas = []metadb.AreaLevel{{Code: 970, Level: 6}, {Code: 260, Level: 4}}
	tyo.Areas = []metadb.AreaLevel{{Code: 970, Level: 7}, {Code: 100, Level: 5}}

	if _, changed, err := s.MergeDetectionReport(ctx, tnn); err != nil || !changed {
		t.Fatalf("first: %v %v", changed, err)
	}
	got, changed, err := s.MergeDetectionReport(ctx, tyo)
	if err != nil || !changed {
		t.Fatalf("second: %v %v", changed, err)
	}
	want := []metadb.AreaLevel{{Code: 100, Level: 5}, {Code: 260, Level: 4}, {Code: 970, Level: 7}}
	if fmt.Sprint(got.Areas) != fmt.Sprint(want) {
		t.Fatalf("merged areas %v, want %v", got.Areas, want)
	}
	for _, r := range []metadb.Report{tnn, tyo} {
		if again, changed, err := s.MergeDetectionReport(ctx, r); err != nil || changed || again.MD5 != got.MD5 {
			t.Fatalf("merging again: %v %v %+v", changed, err, again)
		}
	}
	read, _ := s.GetReport(ctx, base.ID)
	if read.MD5 != got.MD5 || fmt.Sprint(read.Areas) != fmt.Sprint(want) || read.SourceDetectionID != base.SourceDetectionID || read.TremMs != base.TremMs {
		t.Fatalf("stored %+v", read)
	}

	posted := hualienReport("P1")
	if _, _, err := s.CreateReport(ctx, posted); err != nil {
		t.Fatal(err)
	}
	clash := base
	clash.ID = "P1"
	if _, _, err := s.MergeDetectionReport(ctx, clash); !errors.Is(err, metadb.ErrConflict) {
		t.Fatalf("merge onto a posted report: %v", err)
	}
}

// TestReportStations: the two cores' station peaks of one report merge
// value by value to the higher; they do not change the report's content;
// bad peaks are refused; stations are read with their registry codes.
func TestReportStations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	if _, err := s.CreateStation(ctx, metadb.NewStation{ID: "HUA-01", Name: "Hualien", Net: "MS-Net", Lat: 23.99, Lon: 121.61}); err != nil {
		t.Fatal(err)
	}
	base := hualienReport("113000-2024-0403-075809-18")
	base.SourceDetectionID = "1712102289000-18"
	tnn, tyo := base, base
	tnn.Stations = []metadb.StationPeak{{StationID: "HUA-01", PGAGal: 400, PGVCms: 30, Intensity: 5.6}, {StationID: "X", PGAGal: 2, PGVCms: 0.1, Intensity: 0.7}}
	tyo.Stations = []metadb.StationPeak{{StationID: "HUA-01", PGAGal: 380, PGVCms: 33, Intensity: 5.7}}
	first, _, err := s.MergeDetectionReport(ctx, tnn)
	if err != nil {
		t.Fatal(err)
	}
	if second, changed, err := s.MergeDetectionReport(ctx, tyo); err != nil || changed || second.MD5 != first.MD5 {
		t.Fatalf("second core: changed %t, %v", changed, err)
	}
	got, err := s.ReportStations(ctx, []string{base.ID, "none"})
	if err != nil {
		t.Fatal(err)
	}
	hua, _ := s.GetStation(ctx, "HUA-01")
	want := []metadb.StationPeak{
		{StationID: "HUA-01", PGAGal: 400, PGVCms: 33, Intensity: 5.7, Network: hua.SEED.Network, Station: hua.SEED.Station, Location: hua.SEED.Location},
		{StationID: "X", PGAGal: 2, PGVCms: 0.1, Intensity: 0.7},
	}
	if len(got) != 1 || fmt.Sprint(got[base.ID]) != fmt.Sprint(want) {
		t.Fatalf("peaks %+v, want %+v", got, want)
	}
	for _, bad := range [][]metadb.StationPeak{
		{{StationID: "", PGAGal: 1}},
		{{StationID: "A", PGAGal: -1}},
		{{StationID: "A", Intensity: float32(math.NaN())}},
		{{StationID: "A", PGVCms: 1e6}},
		{{StationID: "A"}, {StationID: "A"}},
	} {
		r := base
		r.ID, r.SourceDetectionID, r.Stations = "R-bad", "bad", bad
		if _, _, err := s.MergeDetectionReport(ctx, r); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("peaks %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestListReportsFiltersAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	for i := range 12 {
		r := hualienReport(fmt.Sprintf("R%02d", i))
		r.TimeMs = 1_700_000_000_000 + int64(i/2)*1000 // pairs share a time: the ID breaks the tie
		r.Magnitude = float64(i) / 2
		r.MaxLevel = i % 10
		r.DepthKm = float64(i * 10)
		r.Lat, r.Lon = 22+float64(i)*0.2, 120+float64(i)*0.1
		if _, _, err := s.CreateReport(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(list []metadb.Report) string {
		var b strings.Builder
		for _, r := range list {
			b.WriteString(r.ID[1:] + " ")
		}
		return b.String()
	}
	list, err := s.ListReports(ctx, metadb.ReportFilter{Limit: 5})
	if err != nil || ids(list) != "11 10 09 08 07 " || list[0].Areas != nil {
		t.Fatalf("first page: %q %v", ids(list), err)
	}
	last := list[len(list)-1]
	list, _ = s.ListReports(ctx, metadb.ReportFilter{Limit: 5, After: &metadb.ReportCursor{TimeMs: last.TimeMs, ID: last.ID}})
	if ids(list) != "06 05 04 03 02 " {
		t.Fatalf("second page: %q", ids(list))
	}
	list, _ = s.ListReports(ctx, metadb.ReportFilter{Limit: 5, Offset: 10})
	if ids(list) != "01 00 " {
		t.Fatalf("offset page: %q", ids(list))
	}
	f64 := func(f float64) *float64 { return &f }
	i64 := func(i int64) *int64 { return &i }
	in := func(i int) *int { return &i }
	for name, tc := range map[string]struct {
		f    metadb.ReportFilter
		want string
	}{
		"magnitude": {metadb.ReportFilter{MinMagnitude: f64(4), MaxMagnitude: f64(5)}, "10 09 08 "},
		"level":     {metadb.ReportFilter{MinLevel: in(8)}, "09 08 "},
		"max level": {metadb.ReportFilter{MaxLevel: in(0)}, "10 00 "},
		"depth":     {metadb.ReportFilter{MinDepthKm: f64(95), MaxDepthKm: f64(100)}, "10 "},
		"time":      {metadb.ReportFilter{FromMs: i64(1_700_000_001_000), ToMs: i64(1_700_000_001_999)}, "03 02 "},
		"box":       {metadb.ReportFilter{MinLat: f64(22.1), MaxLat: f64(22.7), MinLon: f64(120), MaxLon: f64(120.25)}, "02 01 "},
		// Orders; ties in the key stay newest first.
		"oldest first":     {metadb.ReportFilter{Ascending: true, Limit: 4}, "00 01 02 03 "},
		"strongest first":  {metadb.ReportFilter{Sort: metadb.SortLevel, Limit: 4}, "09 08 07 06 "},
		"weakest first":    {metadb.ReportFilter{Sort: metadb.SortLevel, Ascending: true, Limit: 4}, "10 00 11 01 "},
		"largest first":    {metadb.ReportFilter{Sort: metadb.SortMagnitude, Limit: 3}, "11 10 09 "},
		"smallest first":   {metadb.ReportFilter{Sort: metadb.SortMagnitude, Ascending: true, Limit: 3}, "00 01 02 "},
		"shallowest first": {metadb.ReportFilter{Sort: metadb.SortDepth, Ascending: true, MinDepthKm: f64(20), Limit: 3}, "02 03 04 "},
		"deepest first":    {metadb.ReportFilter{Sort: metadb.SortDepth, Limit: 2}, "11 10 "},
	} {
		if tc.f.Limit == 0 {
			tc.f.Limit = 500
		}
		list, err := s.ListReports(ctx, tc.f)
		if err != nil || ids(list) != tc.want {
			t.Errorf("%s: %q %v, want %q", name, ids(list), err, tc.want)
		}
	}
	for _, f := range []metadb.ReportFilter{{Limit: 0}, {Limit: metadb.MaxPage + 2}, {Limit: 1, Offset: -1}, {Limit: 1, MinLat: f64(math.NaN())},
		{Limit: 1, Sort: 99}, {Limit: 1, Sort: metadb.SortDepth, After: &metadb.ReportCursor{TimeMs: 1}},
		{Limit: 1, Ascending: true, After: &metadb.ReportCursor{TimeMs: 1}}} {
		if _, err := s.ListReports(ctx, f); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("filter %+v: %v, want ErrInvalid", f, err)
		}
	}
}

func TestUpsertDetectionKeepsNewestSerial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	d := metadb.Detection{ID: "1712102289000-18", Serial: 2, OriginTimeMs: 1712102280000, Lat: 23.8, Lon: 121.6,
		DepthKm: 10, Magnitude: 6.1, Location: "Hualien City", LocationCode: 970, MaxLevel: 5,
		FirstTriggerMs: 1712102289000, UpdatedMs: 1712102291000, Stations: 5}
	v0, _ := s.DataVersions(ctx)
	if ok, err := s.UpsertDetection(ctx, d); err != nil || !ok {
		t.Fatalf("insert: %v %v", ok, err)
	}
	old := d
	old.Serial, old.Magnitude = 1, 5
	if ok, err := s.UpsertDetection(ctx, old); err != nil || ok {
		t.Fatalf("older serial: applied=%v %v", ok, err)
	}
	if ok, _ := s.UpsertDetection(ctx, d); ok {
		t.Fatal("same serial applied twice")
	}
	v1, _ := s.DataVersions(ctx)
	if v1.Detections != v0.Detections+1 || v1.Reports != v0.Reports {
		t.Fatalf("versions %+v → %+v: one applied change, one bump", v0, v1)
	}
	newer := d
	newer.Serial, newer.Final, newer.MaxLevel = 3, true, 6
	if ok, _ := s.UpsertDetection(ctx, newer); !ok {
		t.Fatal("newer serial not applied")
	}
	got, err := s.GetDetection(ctx, d.ID)
	if err != nil || got.Serial != 3 || !got.Final || got.MaxLevel != 6 || got.Magnitude != 6.1 || got.LocationCode != 970 {
		t.Fatalf("got %+v %v", got, err)
	}
	other := d
	other.ID, other.FirstTriggerMs = "1712102300000-3", 1712102300000
	s.UpsertDetection(ctx, other)
	list, _ := s.ListDetections(ctx, metadb.DetectionFilter{Limit: 10})
	if len(list) != 2 || list[0].ID != other.ID {
		t.Fatalf("list %+v", list)
	}
	list, _ = s.ListDetections(ctx, metadb.DetectionFilter{Limit: 10, ActiveOnly: true})
	if len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("active %+v", list)
	}
	list, _ = s.ListDetections(ctx, metadb.DetectionFilter{Limit: 10, After: &metadb.DetectionCursor{FirstTriggerMs: other.FirstTriggerMs, ID: other.ID}})
	if len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("after cursor %+v", list)
	}
	if _, err := s.GetDetection(ctx, "nope"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatal(err)
	}
	bad := d
	bad.Lat = 100
	if _, err := s.UpsertDetection(ctx, bad); !errors.Is(err, metadb.ErrInvalid) {
		t.Fatal(err)
	}
}

func TestClientKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	c, key, err := s.CreateClient(ctx, metadb.NewClient{Name: "CWA mirror", Role: metadb.RoleWriter, RateLimit: 5, RateBurst: 10})
	if err != nil {
		t.Fatal(err)
	}
	if id, _, ok := metadb.ParseKey(key); !ok || id != c.KeyID {
		t.Fatalf("key %q does not parse to %q", key, c.KeyID)
	}
	got, err := s.ClientByKey(ctx, key)
	if err != nil || got.Role != metadb.RoleWriter || got.RateLimit != 5 || got.RateBurst != 10 || got.Revoked() {
		t.Fatalf("by key: %+v %v", got, err)
	}
	// The table never holds the key or its secret.
	var dump string
	pool.QueryRow(ctx, "SELECT string_agg(api_clients::text, ';') FROM api_clients").Scan(&dump)
	if secret := key[strings.IndexByte(key, '.')+1:]; strings.Contains(dump, secret) || strings.Contains(dump, key) {
		t.Fatal("key stored in clear")
	}
	mid := len(key) - 20
	flip := byte('A')
	if key[mid] == 'A' {
		flip = 'B'
	}
	wrong := key[:mid] + string(flip) + key[mid+1:]
	for _, k := range []string{wrong, "", "shk_x", key + "x", "shk_0000000000000000." + key[len(key)-43:], "' OR 1=1 --"} {
		if _, err := s.ClientByKey(ctx, k); !errors.Is(err, metadb.ErrNotFound) {
			t.Errorf("key %q: %v, want ErrNotFound", k, err)
		}
	}
	if _, _, err := s.CreateClient(ctx, metadb.NewClient{Role: "root"}); !errors.Is(err, metadb.ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	rev, err := s.RevokeClient(ctx, c.KeyID)
	if err != nil || !rev.Revoked() {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	if got, err := s.ClientByKey(ctx, key); err != nil || !got.Revoked() {
		t.Fatalf("revoked key: %+v %v", got, err)
	}
	if _, err := s.RevokeClient(ctx, "shk_nope0000"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatal(err)
	}
	list, _ := s.ListClients(ctx)
	if len(list) != 1 || list[0].Name != "CWA mirror" {
		t.Fatalf("list %+v", list)
	}
}

func TestDataVersionsFollowChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	v0, err := s.DataVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.CreateReport(ctx, hualienReport("V1"))
	mustCreate(t, s, hualien("VS1"))
	v1, _ := s.DataVersions(ctx)
	if v1.Reports <= v0.Reports || v1.Stations <= v0.Stations || v1.Detections != v0.Detections {
		t.Fatalf("%+v → %+v", v0, v1)
	}
	s.CreateReport(ctx, hualienReport("V1")) // the same again: nothing written
	if v2, _ := s.DataVersions(ctx); v2 != v1 {
		t.Fatalf("idempotent create bumped %+v → %+v", v1, v2)
	}
}

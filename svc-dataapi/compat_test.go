package dataapi

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/lib/metadb"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden/")

// TestCompatGolden: fixture data in, the compatible routes' exact bytes
// out, compared with the checked-in files under testdata/golden (rewrite
// them with -update after a deliberate change, and review the diff: these
// bytes are what existing clients parse).
func TestCompatGolden(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	base := start(t, testConfig(t, "-database-url", dsn, "-admin-tokens", adminToken))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := metadb.NewStore(pool)

	for _, st := range []map[string]any{
		{"id": "HUA01", "net": "MS-Net", "lat": 23.991, "lon": 121.611, "code": 970},
		{"id": "SHL01", "net": "MS-Net", "lat": 24.15, "lon": 121.62, "code": 972}, // 秀林鄉: no seat in lib/township
		{"id": "SHL02", "net": "MS-Net", "lat": 24.17, "lon": 121.64, "code": 972},
		{"id": "TPE01", "net": "SE-Net", "lat": 25.0321, "lon": 121.5195, "code": 100},
		{"id": "\"odd\" <id>", "net": "", "lat": -0.5, "lon": 0, "code": 0},
	} {
		if a := do(t, "POST", base+"/v1/stations", adminToken, st); a.code != 200 {
			t.Fatalf("station %v: %d %s", st["id"], a.code, a.body)
		}
	}
	if a := do(t, "DELETE", base+"/v1/stations/TPE01", adminToken, nil); a.code != 200 {
		t.Fatalf("retire: %d %s", a.code, a.body)
	}
	// A fixed provisioning day, late in the UTC day: Taiwan is already
	// on the next one.
	if _, err := pool.Exec(ctx, `UPDATE stations SET created_at = '2024-04-02T17:30:00Z'`); err != nil {
		t.Fatal(err)
	}

	posted := report("113000-2024-0403-075809", 1712102289000, 7.2, 7)
	posted["areas"] = []map[string]any{{"code": 970, "level": 7}, {"code": 972, "level": 6}, {"code": 100, "level": 4},
		{"code": 300, "level": 2}, {"code": 999, "level": 1}}
	if a := do(t, "POST", base+"/v1/reports", adminToken, posted); a.code != 200 {
		t.Fatalf("report: %d %s", a.code, a.body)
	}
	quiet := map[string]any{"id": "113001-2024-0401-000000", "time_ms": "1711900800000", "lat": 22, "lon": 120.5,
		"depth_km": 0, "magnitude": 3, "location": "屏東縣 \"外海\"", "max_level": 1}
	if a := do(t, "POST", base+"/v1/reports", adminToken, quiet); a.code != 200 {
		t.Fatalf("report: %d %s", a.code, a.body)
	}
	if _, _, err := store.MergeDetectionReport(ctx, metadb.Report{
		ID: "113000-2024-0405-120000-18", TimeMs: 1712289598000, Lat: 24.12, Lon: 121.55, DepthKm: 10, Magnitude: 5.4,
		Location: "花蓮縣秀林鄉", MaxLevel: 5, Areas: []metadb.AreaLevel{{Code: 972, Level: 5}},
		SourceDetectionID: "1712289600000-18", TremMs: 1712289600000,
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ name, path string }{
		{"report_list", "/api/v2/eq/report"},
		{"report_list_page2", "/api/v2/eq/report?limit=2&page=2&key="},
		{"report_list_filtered", "/api/v2/eq/report?minIntensity=5&minMagnitude=5.4&maxDepth=15.5"},
		{"report_list_empty", "/api/v2/eq/report?startTime=1800000000000"},
		// DPIP's filter form: days in Taiwan time, sort and order.
		{"report_list_days", "/api/v2/eq/report?limit=30&startTime=2024-04-01&endTime=2024-04-03&sort=magnitude&order=asc"},
		{"report", "/api/v2/eq/report/113000-2024-0403-075809"},
		{"report_detected", "/api/v2/eq/report/113000-2024-0405-120000-18"},
		{"report_quiet", "/api/v2/eq/report/113001-2024-0401-000000"},
		{"station", "/api/v1/trem/station"},
	} {
		a := do(t, "GET", base+tc.path, "", nil)
		if a.code != 200 || a.header.Get("Content-Type") != "application/json" || !json.Valid(a.body) {
			t.Fatalf("%s: %d %s", tc.path, a.code, a.body)
		}
		golden := filepath.Join("testdata", "golden", tc.name+".json")
		if *update {
			if err := os.WriteFile(golden, a.body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(a.body, want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.path, a.body, want)
		}
	}

	// The newest TREM-Lite's station list is CSV (resource.ts at 2400a0e:
	// columns found by their header names, fields split on commas).
	a := do(t, "GET", base+"/resource/station", "", nil)
	golden := filepath.Join("testdata", "golden", "station.csv")
	if *update {
		os.WriteFile(golden, a.body, 0o644)
	}
	want, _ := os.ReadFile(golden)
	if a.code != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/csv") || !bytes.Equal(a.body, want) {
		t.Errorf("/resource/station: %d %s\n got %s\nwant %s", a.code, a.header.Get("Content-Type"), a.body, want)
	}
}

// TestCoreCrossOriginAndTime: the cores open their reads to pages of any
// origin (the apps' browser builds: TREM-Lite's web build reads the cores
// cross-origin, packages/core/src/lib/http/webBackend.ts:49 of
// ExpTechTW/TREM-Lite at 2400a0e) and serve GET /ntp like the edges.
func TestCoreCrossOriginAndTime(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t)))
	a := do(t, "GET", base+"/api/v1/trem/station", "", nil)
	if a.code != 200 || a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("station list: %d, Access-Control-Allow-Origin %q", a.code, a.header.Get("Access-Control-Allow-Origin"))
	}
	req, _ := http.NewRequest(http.MethodOptions, base+"/api/v2/eq/report?limit=30", nil)
	req.Header.Set("Origin", "https://exptechtw.github.io")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "cache-control")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "cache-control") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	a = do(t, "GET", base+"/ntp", "", nil)
	ms, err := strconv.ParseInt(string(a.body), 10, 64)
	if a.code != 200 || err != nil || a.header.Get("X-NTP-T2") == "" || a.header.Get("X-NTP-T3") == "" || a.header.Get("ETag") != "" {
		t.Fatalf("/ntp: %d %q %v", a.code, a.body, a.header)
	}
	if d := time.Since(time.UnixMilli(ms)); d < -time.Second || d > 10*time.Second {
		t.Fatalf("/ntp says %d, %v off", ms, d)
	}
}

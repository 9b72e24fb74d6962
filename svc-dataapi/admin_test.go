package dataapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
)

func TestMain(m *testing.M) {
	// Every request of these tests is answered within seconds: one that
	// is not fails its test instead of waiting for the binary's timeout
	// (a server that accepted and went quiet, say, but not ours).
	http.DefaultClient.Timeout = 2 * time.Minute
	pgtest.Main(m)
}

const adminToken = "test-admin-token-0123456789"

// startWithDatabase runs the data API on a fresh metadata database.
func startWithDatabase(t *testing.T) string {
	t.Helper()
	cfg := testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-registry-interval", "1s", "-admin-tokens", adminToken)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	base := "http://" + cfg.HTTPAddr
	poll.UntilNil(t, 10*time.Second, "the data API up", func() error {
		resp, err := http.Get(base + "/v1/stations")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return base
}

func call(t *testing.T, method, u, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, u, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestProvisioning drives the admin API against a real PostgreSQL.
func TestProvisioning(t *testing.T) {
	// Not parallel: the in-process services take ports picked free just
	// before, and two tests picking at once could collide.
	base := startWithDatabase(t)
	station := map[string]any{"id": "HUA01", "name": "Hualien", "net": "TW", "lat": 23.99, "lon": 121.61, "code": 970}

	for _, tc := range []struct {
		name, token string
		body        any
		want        int
	}{
		{"no token", "", station, 401},
		{"wrong token", "nope-nope-nope-nope", station, 401},
		{"bad latitude", adminToken, map[string]any{"id": "X", "lat": 91}, 400},
		{"bad key", adminToken, map[string]any{"id": "X", "key_hex": "zz"}, 400},
		{"unknown field", adminToken, map[string]any{"id": "X", "colour": "red"}, 400},
		{"network code too long", adminToken, map[string]any{"id": "X", "network_code": "SHX", "station_code": "X"}, 400},
		{"station code in lower case", adminToken, map[string]any{"id": "X", "network_code": "SH", "station_code": "x"}, 400},
		{"network code alone", adminToken, map[string]any{"id": "X", "network_code": "SH"}, 400},
		{"location code alone", adminToken, map[string]any{"id": "X", "location_code": "10"}, 400},
		{"elevation above any summit", adminToken, map[string]any{"id": "X", "elevation_m": 9500}, 400},
		{"negative count size", adminToken, map[string]any{"id": "X", "scale_gal": -0.001}, 400},
	} {
		if code, body := call(t, "POST", base+"/v1/stations", tc.token, tc.body); code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, code, body, tc.want)
		}
	}

	code, body := call(t, "POST", base+"/v1/stations", adminToken, station)
	key, _ := body["key"].(map[string]any)
	if code != 200 || key["key_id"] != float64(1) || len(key["key_hex"].(string)) != 64 {
		t.Fatalf("create: %d %v", code, body)
	}
	if st, _ := body["station"].(map[string]any); st["network_code"] != "SH" || st["station_code"] != "HUA01" || st["location_code"] != "00" {
		t.Errorf("created without codes: %v, want SH.HUA01.00", st)
	}
	if code, _ := call(t, "POST", base+"/v1/stations", adminToken, station); code != 409 {
		t.Fatalf("duplicate create: %d", code)
	}
	// Codes given are kept; codes taken are refused as the id is.
	given := map[string]any{"id": "HUA-2", "lat": 23.99, "lon": 121.61, "network_code": "TW", "station_code": "HUA2", "location_code": "",
		"elevation_m": 312.5, "scale_gal": 0.002}
	if code, body := call(t, "POST", base+"/v1/stations", adminToken, given); code != 200 {
		t.Fatalf("create with codes: %d %v", code, body)
	} else if st, _ := body["station"].(map[string]any); st["network_code"] != "TW" || st["station_code"] != "HUA2" || st["location_code"] != "" ||
		st["elevation_m"] != 312.5 || st["scale_gal"] != 0.002 {
		t.Errorf("created with codes: %v, want TW.HUA2. at 312.5 m, 0.002 gal per count", st)
	}
	given["id"] = "HUA-3"
	if code, body := call(t, "POST", base+"/v1/stations", adminToken, given); code != 409 {
		t.Errorf("create with taken codes: %d %v, want 409", code, body)
	}
	// The cached registry picks the new station up without a restart.
	poll.Until(t, 10*time.Second, "station in the registry", func() bool {
		code, _ := call(t, "GET", base+"/v1/stations/HUA01", "", nil)
		return code == 200
	})

	// Its station metadata (fdsnws-station) says what it was created with:
	// the codes, the elevation, counts per m/s² from the count size.
	const bnz = "TW|HUA2||BNZ|23.99|121.61|312.5|0|0|-90|MEMS accelerometer|50000|1|m/s**2|50|"
	poll.Until(t, 10*time.Second, "the station's metadata", func() bool {
		a := do(t, "GET", base+"/fdsnws/station/1/query?net=TW&sta=HUA2&cha=BNZ&level=channel&format=text", "", nil)
		return a.code == 200 && strings.Contains(string(a.body), "\n"+bnz)
	})

	code, body = call(t, "POST", base+"/v1/stations/HUA01:rotateKey", adminToken, map[string]any{"overlap_seconds": 600})
	if k, _ := body["key"].(map[string]any); code != 200 || k["key_id"] != float64(2) || k["key_hex"] == key["key_hex"] {
		t.Fatalf("rotate: %d %v", code, body)
	}
	if code, _ := call(t, "POST", base+"/v1/stations/NOPE:rotateKey", adminToken, map[string]any{}); code != 404 {
		t.Fatalf("rotate unknown: %d", code)
	}
	if code, _ := call(t, "POST", base+"/v1/stations/HUA01:rotateKey", adminToken, map[string]any{"overlap_seconds": 9_999_999}); code != 400 {
		t.Fatalf("rotate with a huge overlap: %d", code)
	}

	code, body = call(t, "PUT", base+"/v1/stations/HUA01", adminToken, map[string]any{"name": "Hualien City", "net": "TW", "lat": 23.98, "lon": 121.6, "code": 970,
		"elevation_m": 512.5, "scale_gal": 0.0005})
	if st, _ := body["station"].(map[string]any); code != 200 || st["name"] != "Hualien City" || st["elevation_m"] != 512.5 || st["scale_gal"] != 0.0005 {
		t.Fatalf("update: %d %v", code, body)
	}
	// Without them, the instrument stays; out of range, a 400.
	code, body = call(t, "PUT", base+"/v1/stations/HUA01", adminToken, map[string]any{"name": "Hualien City", "net": "TW", "lat": 23.98, "lon": 121.6, "code": 970})
	if st, _ := body["station"].(map[string]any); code != 200 || st["elevation_m"] != 512.5 || st["scale_gal"] != 0.0005 {
		t.Fatalf("update keeping the instrument: %d %v", code, body)
	}
	if code, body = call(t, "PUT", base+"/v1/stations/HUA01", adminToken, map[string]any{"name": "Hualien City", "net": "TW", "lat": 23.98, "lon": 121.6, "code": 970,
		"scale_gal": 0}); code != 400 {
		t.Fatalf("update with a zero count size: %d %v", code, body)
	}
	code, body = call(t, "DELETE", base+"/v1/stations/HUA01", adminToken, nil)
	if st, _ := body["station"].(map[string]any); code != 200 || st["active"] != false {
		t.Fatalf("retire: %d %v", code, body)
	}
	poll.Until(t, 10*time.Second, "retirement in the registry", func() bool {
		_, body := call(t, "GET", base+"/v1/stations/HUA01", "", nil)
		st, _ := body["station"].(map[string]any)
		return st["active"] == false
	})

	// Hostile-looking IDs are data, stored and found literally.
	evil := "x'); DROP TABLE stations;--"
	if code, body := call(t, "POST", base+"/v1/stations", adminToken, map[string]any{"id": evil}); code != 200 {
		t.Fatalf("create %q: %d %v", evil, code, body)
	}
	poll.Until(t, 10*time.Second, "the odd ID", func() bool {
		code, body := call(t, "GET", base+"/v1/stations/"+url.PathEscape(evil), "", nil)
		st, _ := body["station"].(map[string]any)
		return code == 200 && st["id"] == evil
	})
	_, body = call(t, "GET", base+"/v1/stations", "", nil)
	if list, _ := body["stations"].([]any); len(list) != 3 || strings.Contains(mustJSON(body), "key") {
		t.Fatalf("list: %v", body)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestResetStationSeq: an admin (token or key) records a station's seq
// reset at the server's clock; the answer and, without a restart, the
// station's reads carry it; other callers and other stations are refused.
func TestResetStationSeq(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken))
	_, writer := newClient(t, base, adminToken, "writer", nil)
	_, subscriber := newClient(t, base, adminToken, "subscriber", map[string]any{"topics": []string{"rts"}})
	_, admin := newClient(t, base, adminToken, "admin", nil)
	for _, id := range []string{"HUA01", "TTN01", "a:b"} {
		if a := do(t, "POST", base+"/v1/stations", adminToken, map[string]any{"id": id, "lat": 23.99, "lon": 121.61}); a.code != 200 {
			t.Fatalf("create %s: %d %s", id, a.code, a.body)
		}
	}
	if a := do(t, "DELETE", base+"/v1/stations/TTN01", adminToken, nil); a.code != 200 {
		t.Fatalf("retire: %d %s", a.code, a.body)
	}
	resetURL := func(id string) string { return base + "/v1/stations/" + url.PathEscape(id) + ":resetSeq" }
	// seqReset returns the station's seq_reset_ms, a string in proto JSON.
	seqReset := func(a answer) int64 {
		t.Helper()
		st, _ := a.json(t)["station"].(map[string]any)
		s, _ := st["seq_reset_ms"].(string)
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("seq_reset_ms %q in %s", st["seq_reset_ms"], a.body)
		}
		return ms
	}

	for _, tc := range []struct {
		name, token, id string
		body            any
		want            int
	}{
		{"anonymous", "", "HUA01", nil, 401},
		{"unknown key", "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "HUA01", nil, 401},
		{"writer key", writer, "HUA01", nil, 403},
		{"subscriber key", subscriber, "HUA01", nil, 403},
		{"unknown station", admin, "NOPE", nil, 404},
		{"retired station", admin, "TTN01", nil, 404},
		{"unknown field", admin, "HUA01", map[string]any{"seq_reset_ms": "1"}, 400},
		{"not JSON", admin, "HUA01", "{", 400},
	} {
		a := do(t, "POST", resetURL(tc.id), tc.token, tc.body)
		if a.code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.want)
			continue
		}
		if msg := errorBody(t, a); tc.want == 404 && !strings.Contains(msg, tc.id) {
			t.Errorf("%s: 404 %q does not name the station", tc.name, msg)
		}
	}
	poll.Until(t, 10*time.Second, "HUA01 in the registry", func() bool { return do(t, "GET", base+"/v1/stations/HUA01", "", nil).code == 200 })
	if a := do(t, "GET", base+"/v1/stations/HUA01", "", nil); seqReset(a) != 0 {
		t.Fatalf("refused resets changed HUA01: %d %s", a.code, a.body)
	}

	var last int64
	for _, tc := range []struct {
		name, token string
		body        any
	}{
		{"admin key, empty object", admin, map[string]any{}},
		{"admin token, no body", adminToken, nil},
	} {
		before := time.Now().UnixMilli()
		a := do(t, "POST", resetURL("HUA01"), tc.token, tc.body)
		after := time.Now().UnixMilli()
		if a.code != 200 {
			t.Fatalf("%s: %d %s", tc.name, a.code, a.body)
		}
		st := a.json(t)["station"].(map[string]any)
		ms := seqReset(a)
		if st["id"] != "HUA01" || st["active"] != true || strings.Contains(string(a.body), "key") {
			t.Fatalf("%s: %s", tc.name, a.body)
		}
		if ms < before || ms > after || ms <= last {
			t.Fatalf("%s: seq_reset_ms %d, want from %d to %d and after the previous reset %d", tc.name, ms, before, after, last)
		}
		last = ms
	}
	// The registry the reads answer from follows without a restart.
	poll.Until(t, 10*time.Second, "the reset in GET /v1/stations/HUA01", func() bool {
		a := do(t, "GET", base+"/v1/stations/HUA01", "", nil)
		return a.code == 200 && seqReset(a) == last
	})
	a := do(t, "GET", base+"/v1/stations", "", nil)
	var list struct {
		Stations []struct {
			ID         string `json:"id"`
			SeqResetMs string `json:"seq_reset_ms"`
		} `json:"stations"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil || len(list.Stations) != 3 {
		t.Fatalf("list: %d %s", a.code, a.body)
	}
	for _, st := range list.Stations {
		if want := map[string]string{"HUA01": strconv.FormatInt(last, 10), "TTN01": "0", "a:b": "0"}[st.ID]; st.SeqResetMs != want {
			t.Errorf("listed %s with seq_reset_ms %q, want %q", st.ID, st.SeqResetMs, want)
		}
	}

	// An ID holding the verb's colon is still one station.
	if a := do(t, "POST", resetURL("a:b"), admin, nil); a.code != 200 || a.json(t)["station"].(map[string]any)["id"] != "a:b" {
		t.Fatalf("reset a:b: %d %s", a.code, a.body)
	}
}

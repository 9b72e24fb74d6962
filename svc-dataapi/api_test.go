package dataapi

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
)

// newClient creates an API client through the admin route and returns its
// key.
func newClient(t *testing.T, base, token, role string, extra map[string]any) (keyID, key string) {
	t.Helper()
	body := map[string]any{"name": role + " client", "role": role}
	for k, v := range extra {
		body[k] = v
	}
	a := do(t, "POST", base+"/v1/clients", token, body)
	if a.code != 200 {
		t.Fatalf("create %s client: %d %s", role, a.code, a.body)
	}
	m := a.json(t)
	c := m["client"].(map[string]any)
	return c["key_id"].(string), m["key"].(string)
}

func report(id string, timeMs int64, mag float64, level int) map[string]any {
	return map[string]any{"id": id, "time_ms": fmt.Sprint(timeMs), "lat": 23.77, "lon": 121.67, "depth_km": 15.5,
		"magnitude": mag, "location": "花蓮縣政府南南東方 25.0 公里", "max_level": level,
		"areas": []map[string]any{{"code": 970, "level": level}, {"code": 100, "level": 3}}}
}

// TestReportsAndKeys drives reports, API keys and their roles against a
// real PostgreSQL.
func TestReportsAndKeys(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken))

	// Keys are made by an admin (the bootstrap token here) and shown once.
	writerID, writer := newClient(t, base, adminToken, "writer", nil)
	_, admin := newClient(t, base, adminToken, "admin", nil)
	if a := do(t, "GET", base+"/v1/clients", admin, nil); a.code != 200 || strings.Contains(string(a.body), writer[len(writerID):]) {
		t.Fatalf("list clients: %d %s", a.code, a.body)
	}

	post := func(token string, body any) answer { return do(t, "POST", base+"/v1/reports", token, body) }
	r1 := report("113000-2024-0403-075809", 1712102289000, 7.2, 7)
	for _, tc := range []struct {
		name, token string
		body        any
		want        int
	}{
		{"no key", "", r1, 401},
		{"unknown key", "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", r1, 401},
		{"not a key", "nope", r1, 401},
		{"bad id", writer, report("x'); DROP TABLE reports;--", 1, 1, 1), 400},
		{"bad level", writer, report("R-1", 1, 1, 10), 400},
		{"bad latitude", writer, map[string]any{"id": "R-1", "lat": 91}, 400},
		{"unknown field", writer, map[string]any{"id": "R-1", "colour": "red"}, 400},
		{"not JSON", writer, "{", 400},
		{"wrong type", writer, map[string]any{"id": 5}, 400},
		{"oversized", writer, `{"id":"R-1","location":"` + strings.Repeat("x", 70000) + `"}`, 413},
	} {
		a := post(tc.token, tc.body)
		if a.code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.want)
			continue
		}
		errorBody(t, a)
	}
	if a := do(t, "POST", base+"/v1/reports?x=1", writer, r1); a.code != 400 {
		t.Errorf("query on a POST: %d", a.code)
	}

	a := post(writer, r1)
	if a.code != 200 || a.json(t)["created"] != true {
		t.Fatalf("create: %d %s", a.code, a.body)
	}
	created := a.json(t)["report"].(map[string]any)
	if a := post(writer, r1); a.code != 200 || a.json(t)["created"] != false || a.json(t)["report"].(map[string]any)["md5"] != created["md5"] {
		t.Fatalf("same again: %d %s", a.code, a.body)
	}
	changed := report(r1["id"].(string), 1712102289000, 7.4, 7)
	if a := post(writer, changed); a.code != 409 {
		t.Fatalf("different content: %d %s", a.code, a.body)
	}
	if a := post(admin, report("113000-2024-0403-080000", 1712102400000, 4.0, 3)); a.code != 200 {
		t.Fatalf("admin posts: %d %s", a.code, a.body)
	}

	// Roles: a writer key is refused admin calls with 403; an admin key
	// provisions stations like the bootstrap token.
	if a := do(t, "POST", base+"/v1/clients", writer, map[string]any{"role": "writer"}); a.code != 403 {
		t.Fatalf("writer creates a client: %d %s", a.code, a.body)
	}
	if a := do(t, "POST", base+"/v1/stations", writer, map[string]any{"id": "K1"}); a.code != 403 {
		t.Fatalf("writer provisions: %d %s", a.code, a.body)
	}
	if a := do(t, "POST", base+"/v1/stations", admin, map[string]any{"id": "K1", "lat": 23.9, "lon": 121.6, "code": 970}); a.code != 200 {
		t.Fatalf("admin key provisions: %d %s", a.code, a.body)
	}

	for i := range 5 {
		if a := post(writer, report(fmt.Sprintf("P%d", i), 1700000000000+int64(i), float64(i), i)); a.code != 200 {
			t.Fatal(a.code, string(a.body))
		}
	}
	// Pages: opaque tokens, the same order throughout.
	var ids []string
	next := ""
	for page := 0; ; page++ {
		u := base + "/v1/reports?page_size=3"
		if next != "" {
			u += "&page_token=" + url.QueryEscape(next)
		}
		a := do(t, "GET", u, "", nil)
		if a.code != 200 {
			t.Fatalf("page %d: %d %s", page, a.code, a.body)
		}
		m := a.json(t)
		for _, r := range m["reports"].([]any) {
			ids = append(ids, r.(map[string]any)["id"].(string))
		}
		if next, _ = m["next_page_token"].(string); next == "" {
			break
		}
	}
	if got := strings.Join(ids, " "); got != "113000-2024-0403-080000 113000-2024-0403-075809 P4 P3 P2 P1 P0" {
		t.Fatalf("paged: %s", got)
	}
	a = do(t, "GET", base+"/v1/reports?min_magnitude=2&max_lat=24&min_lat=23&min_level=3&start_time_ms=1700000000002", "", nil)
	if n := len(a.json(t)["reports"].([]any)); a.code != 200 || n != 4 {
		t.Fatalf("filtered: %d %s", a.code, a.body)
	}
	a = do(t, "GET", base+"/v1/reports/"+r1["id"].(string), "", nil)
	if rep := a.json(t)["report"].(map[string]any); a.code != 200 || len(rep["areas"].([]any)) != 2 || rep["md5"] != created["md5"] {
		t.Fatalf("get: %d %s", a.code, a.body)
	}
	if a := do(t, "GET", base+"/v1/reports/nope", "", nil); a.code != 404 {
		t.Fatalf("unknown report: %d", a.code)
	} else {
		errorBody(t, a)
	}

	// Revoked keys stop working at once on this core.
	if a := do(t, "DELETE", base+"/v1/clients/"+writerID, admin, nil); a.code != 200 {
		t.Fatalf("revoke: %d %s", a.code, a.body)
	}
	if a := post(writer, report("Q1", 1, 1, 1)); a.code != 401 || !strings.Contains(errorBody(t, a), "revoked") {
		t.Fatalf("revoked key: %d %s", a.code, a.body)
	}
	if a := do(t, "GET", base+"/v1/reports", writer, nil); a.code != 401 {
		t.Fatalf("revoked key on a public route: %d", a.code)
	}
}

// TestBadParameters sends malformed, out-of-range, unknown and hostile
// values to every parameter of every route: each gets a 4xx with a JSON
// error, never a 5xx.
func TestBadParameters(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken,
		"-rate-limit-ip", "0"))
	hostile := []string{"'", "' OR '1'='1", "1; DROP TABLE reports; --", "1)) UNION SELECT version() --", "\x00", "%00",
		"１", "-1", "1e400", "NaN", "Infinity", "0x10", strings.Repeat("9", 400), "💥", "$1", "null", "[]"}
	params := map[string][]string{
		"/v1/reports":          {"start_time_ms", "end_time_ms", "min_magnitude", "min_level", "min_lat", "max_lat", "min_lon", "max_lon", "page_size", "page_token"},
		"/v1/detections":       {"active_only", "since_ms", "page_size", "page_token"},
		"/v1/stations":         {"net"},
		"/api/v2/eq/report":    {"limit", "page", "minIntensity", "maxIntensity", "minMagnitude", "maxMagnitude", "minDepth", "maxDepth", "startTime", "endTime"},
		"/v1/reports/R1":       {},
		"/v1/detections/D1":    {},
		"/api/v1/trem/station": {},
	}
	served := 0
	for path, names := range params {
		for _, name := range names {
			for _, v := range hostile {
				a := do(t, "GET", base+path+"?"+url.Values{name: {v}}.Encode(), "", nil)
				if a.code >= 500 {
					t.Errorf("GET %s?%s=%q: %d %s", path, name, v, a.code, a.body)
				} else if a.code != 200 {
					errorBody(t, a)
				} else {
					served++ // a value that is valid after all (net=' is just a name)
				}
			}
		}
		if !strings.HasPrefix(path, "/api/") {
			if a := do(t, "GET", base+path+"?colour=red", "", nil); a.code != 400 {
				t.Errorf("GET %s with an unknown parameter: %d", path, a.code)
			}
		}
	}
	for _, v := range hostile {
		for _, path := range []string{"/v1/reports/", "/v1/detections/", "/api/v2/eq/report/", "/v1/stations/", "/v1/clients/"} {
			method := "GET"
			if path == "/v1/clients/" {
				method = "DELETE"
			}
			a := do(t, method, base+path+url.PathEscape(v), adminToken, nil)
			if a.code >= 500 || (a.code != 200 && a.code != 404 && a.code != 400) {
				t.Errorf("%s %s%q: %d %s", method, path, v, a.code, a.body)
			}
		}
	}
	for _, tc := range []struct{ name, query string }{
		{"repeated", "page_size=1&page_size=2"},
		{"path field", "id=x"},
		{"start after end", "start_time_ms=5&end_time_ms=4"},
		{"box inverted", "min_lat=24&max_lat=23"},
		{"page too big", "page_size=501"},
		{"token of detections", "page_token=AWQAAAAAAAAAAUQx"},
		{"undecodable", "min_level=%zz"},
	} {
		if a := do(t, "GET", base+"/v1/reports?"+tc.query, "", nil); a.code != 400 {
			t.Errorf("%s: %d %s", tc.name, a.code, a.body)
		}
	}
	// The largest page is a page: its look-ahead row is the store's concern.
	for _, path := range []string{"/v1/reports?page_size=500", "/v1/detections?page_size=500"} {
		if a := do(t, "GET", base+path, "", nil); a.code != 200 {
			t.Errorf("%s: %d %s", path, a.code, a.body)
		}
	}
	for _, q := range []string{"limit=1;DROP%20TABLE%20reports", "limit=%zz", "page=1&page=2"} {
		if a := do(t, "GET", base+"/api/v2/eq/report?"+q, "", nil); a.code != 400 {
			t.Errorf("compatible list with %s: %d %s", q, a.code, a.body)
		}
	}
	if a := do(t, "PATCH", base+"/v1/reports", "", nil); a.code != 405 && a.code != 404 {
		t.Errorf("PATCH: %d", a.code)
	}
	if a := do(t, "POST", base+"/api/v2/eq/report", "", nil); a.code != 405 {
		t.Errorf("POST to a compatible route: %d", a.code)
	} else {
		errorBody(t, a)
	}
	if a := do(t, "GET", base+"/v1/nothing", "", nil); a.code != 404 {
		t.Errorf("unknown route: %d", a.code)
	} else {
		errorBody(t, a)
	}
	if a := do(t, "GET", base+"/v1/reports", "", nil, "Authorization", "Basic dXNlcjpwYXNz"); a.code != 401 {
		t.Errorf("basic auth: %d", a.code)
	}
	t.Logf("%d hostile values were valid input", served)
}

// TestConditionalGET: the same query in any parameter order has the same
// ETag; If-None-Match gets 304 until the data changes.
func TestConditionalGET(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken))
	if a := do(t, "POST", base+"/v1/reports", adminToken, report("E1", 1700000000000, 5, 4)); a.code != 200 {
		t.Fatal(a.code, string(a.body))
	}
	for _, tc := range []struct{ first, reordered string }{
		{"/v1/reports?min_level=3&page_size=2", "/v1/reports?page_size=2&min_level=3"},
		{"/api/v2/eq/report?limit=5&page=1&key=", "/api/v2/eq/report?key=&page=1&limit=5"},
		{"/api/v2/eq/report/E1", "/api/v2/eq/report/E1"},
		{"/v1/reports/E1", "/v1/reports/E1"},
		{"/v1/detections?active_only=true", "/v1/detections?active_only=true"},
		{"/api/v1/trem/station", "/api/v1/trem/station"},
		{"/v1/stations", "/v1/stations"},
		{"/openapi.json", "/openapi.json"},
	} {
		a := do(t, "GET", base+tc.first, "", nil)
		tag := a.header.Get("ETag")
		if a.code != 200 || tag == "" || a.header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("%s: %d, ETag %q", tc.first, a.code, tag)
		}
		b := do(t, "GET", base+tc.reordered, "", nil, "If-None-Match", `"other", `+tag)
		if b.code != 304 || len(b.body) != 0 || b.header.Get("ETag") != tag {
			t.Fatalf("%s with If-None-Match %s: %d %q", tc.reordered, tag, b.code, b.body)
		}
		if c := do(t, "GET", base+tc.first, "", nil, "If-None-Match", `"other"`); c.code != 200 {
			t.Fatalf("%s with another tag: %d", tc.first, c.code)
		}
	}
	a := do(t, "GET", base+"/v1/reports", "", nil)
	tag := a.header.Get("ETag")
	do(t, "POST", base+"/v1/reports", adminToken, report("E2", 1700000001000, 5, 4))
	if b := do(t, "GET", base+"/v1/reports", "", nil, "If-None-Match", tag); b.code != 200 || b.header.Get("ETag") == tag {
		t.Fatalf("after a change: %d, tag %q", b.code, b.header.Get("ETag"))
	}
	if a := do(t, "GET", base+"/v1/reports/none", "", nil); a.code != 404 || a.header.Get("ETag") != "" {
		t.Fatalf("errors carry no ETag: %d %q", a.code, a.header.Get("ETag"))
	}
}

// TestRateLimits: per address without a key, per key with one (the key's
// own limit first), 429 with Retry-After; the health probe is exempt.
func TestRateLimits(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken,
		"-rate-limit-ip", "0.5", "-rate-burst-ip", "3", "-rate-limit-key", "0.5", "-rate-burst-key", "5"))
	_, slow := newClient(t, base, adminToken, "writer", map[string]any{"rate_limit": 0.5, "rate_burst": 2})
	_, plain := newClient(t, base, adminToken, "writer", nil)
	count := func(token string, n int) (ok int, limited answer) {
		for range n {
			a := do(t, "GET", base+"/v1/detections", token, nil)
			switch a.code {
			case 200:
				ok++
			case 429:
				limited = a
			default:
				t.Fatalf("%d %s", a.code, a.body)
			}
		}
		return ok, limited
	}
	// Admin tokens are not limited; the address's burst of 3 is then
	// spent by anonymous calls (the first key lookups drew on it too).
	for range 10 {
		if a := do(t, "GET", base+"/v1/clients", adminToken, nil); a.code != 200 {
			t.Fatalf("admin token limited: %d", a.code)
		}
	}
	ok, limited := count("", 5)
	if ok > 3 || limited.code != 429 || limited.header.Get("Retry-After") == "" {
		t.Fatalf("anonymous: %d served, last refusal %d %q", ok, limited.code, limited.header.Get("Retry-After"))
	}
	errorBody(t, limited)
	if ok, _ := count(slow, 4); ok != 2 {
		t.Fatalf("key with its own burst of 2: %d served", ok)
	}
	if ok, _ := count(plain, 7); ok != 5 {
		t.Fatalf("key with the default burst of 5: %d served", ok)
	}
	for range 5 {
		if a := do(t, "GET", base+"/readyz", "", nil); a.code != 200 {
			t.Fatalf("readyz limited: %d", a.code)
		}
	}
}

// TestDatabaseDown: with the database gone, routes that need it answer
// 503 with Retry-After (clients switch core), never 500.
func TestDatabaseDown(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.DSN()
	base := start(t, testConfig(t, "-database-url", dsn, "-admin-tokens", adminToken, "-db-timeout", "2s"))
	if a := do(t, "GET", base+"/api/v2/eq/report", "", nil); a.code != 200 || string(a.body) != "[]" {
		t.Fatalf("before: %d %s", a.code, a.body)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/reports", "/v1/reports/X", "/v1/detections", "/api/v2/eq/report", "/api/v2/eq/report/X", "/api/v1/trem/station"} {
		a := do(t, "GET", base+path, "", nil)
		if a.code != 503 || a.header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %s, Retry-After %q", path, a.code, a.body, a.header.Get("Retry-After"))
			continue
		}
		errorBody(t, a)
	}
	if a := do(t, "POST", base+"/v1/reports", adminToken, report("D1", 1, 1, 1)); a.code != 503 {
		t.Errorf("POST: %d %s", a.code, a.body)
	}
	// The edges must never take "cannot tell" for "unknown key".
	check := map[string]any{"keys": []string{"shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}
	if a := do(t, "POST", base+"/v1/keys:check", "", check); a.code != 503 || a.header.Get("Retry-After") == "" {
		t.Errorf("key check: %d %s", a.code, a.body)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the data API to recover", func() bool { return do(t, "GET", base+"/v1/reports", "", nil).code == 200 })
}

// TestMultiHostDatabaseURL: a libpq multi-host URL with
// target_session_attrs=read-write (how services reach the primary without
// a proxy) works: the dead first host is skipped and writes land on the
// read-write one.
func TestMultiHostDatabaseURL(t *testing.T) {
	u, err := url.Parse(pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := freeaddr.TCP(t)
	u.Host = dead + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	base := start(t, testConfig(t, "-database-url", u.String(), "-admin-tokens", adminToken))
	if a := do(t, "POST", base+"/v1/reports", adminToken, report("M1", 1, 1, 1)); a.code != 200 {
		t.Fatalf("write through a multi-host URL: %d %s", a.code, a.body)
	}
}

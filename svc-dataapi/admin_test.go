package dataapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"shindo.dev/lib/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get(base + "/v1/stations"); err == nil {
			resp.Body.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatal("data API never came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	if code, _ := call(t, "POST", base+"/v1/stations", adminToken, station); code != 409 {
		t.Fatalf("duplicate create: %d", code)
	}
	// The cached registry picks the new station up without a restart.
	waitFor(t, "station in the registry", func() bool {
		code, _ := call(t, "GET", base+"/v1/stations/HUA01", "", nil)
		return code == 200
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

	code, body = call(t, "PUT", base+"/v1/stations/HUA01", adminToken, map[string]any{"name": "Hualien City", "net": "TW", "lat": 23.98, "lon": 121.6, "code": 970})
	if st, _ := body["station"].(map[string]any); code != 200 || st["name"] != "Hualien City" {
		t.Fatalf("update: %d %v", code, body)
	}
	code, body = call(t, "DELETE", base+"/v1/stations/HUA01", adminToken, nil)
	if st, _ := body["station"].(map[string]any); code != 200 || st["active"] != false {
		t.Fatalf("retire: %d %v", code, body)
	}
	waitFor(t, "retirement in the registry", func() bool {
		_, body := call(t, "GET", base+"/v1/stations/HUA01", "", nil)
		st, _ := body["station"].(map[string]any)
		return st["active"] == false
	})

	// Hostile-looking IDs are data, stored and found literally.
	evil := "x'); DROP TABLE stations;--"
	if code, body := call(t, "POST", base+"/v1/stations", adminToken, map[string]any{"id": evil}); code != 200 {
		t.Fatalf("create %q: %d %v", evil, code, body)
	}
	waitFor(t, "the odd ID", func() bool {
		code, body := call(t, "GET", base+"/v1/stations/"+url.PathEscape(evil), "", nil)
		st, _ := body["station"].(map[string]any)
		return code == 200 && st["id"] == evil
	})
	_, body = call(t, "GET", base+"/v1/stations", "", nil)
	if list, _ := body["stations"].([]any); len(list) != 2 || strings.Contains(mustJSON(body), "key") {
		t.Fatalf("list: %v", body)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

package dataapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// TestRESTGateway runs the service in-process and exercises its REST
// surface through grpc-gateway.
func TestRESTGateway(t *testing.T) {
	// Not parallel: see TestProvisioning.
	reg := filepath.Join(t.TempDir(), "stations.json")
	doc := `[{"id":"S2","name":"Hualien","net":"SIM","lat":23.99,"lon":121.61,"code":970,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"},
	         {"id":"S1","net":"OTHER","lat":25.03,"lon":121.52,"code":100,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f","active":false}]`
	if err := os.WriteFile(reg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "-registry", reg, "-registry-interval", "1s")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + cfg.HTTPAddr
	get := func(path string) (int, string) {
		t.Helper()
		var resp *http.Response
		poll.UntilNil(t, 5*time.Second, "GET "+path, func() (err error) {
			resp, err = http.Get(base + path)
			return err
		})
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, body := get("/v1/stations")
	var list struct {
		Stations []map[string]any `json:"stations"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Stations) != 2 {
		t.Fatalf("/v1/stations: %d %s", code, body)
	}
	if list.Stations[0]["id"] != "S1" || list.Stations[0]["active"] != false || strings.Contains(body, "key") {
		t.Fatalf("stations %s (ordered by ID, inactive flagged, never keys)", body)
	}
	if code, body := get("/v1/stations?net=SIM"); code != 200 || strings.Count(body, `"id"`) != 1 {
		t.Fatalf("filtered: %d %s", code, body)
	}
	if code, body := get("/v1/stations/S2"); code != 200 || !strings.Contains(body, `"code":970`) {
		t.Fatalf("get: %d %s", code, body)
	}
	if code, body := get("/v1/stations/NOPE"); code != 404 || !strings.Contains(body, "not found") {
		t.Fatalf("unknown station: %d %s", code, body)
	}
	if code, _ := get("/v1/stations?net=" + strings.Repeat("x", 40)); code != 400 {
		t.Fatalf("long net: %d", code)
	}
	code, body = get("/openapi.json")
	var oa map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &oa) != nil || !strings.Contains(body, `"/v1/stations/{id}"`) {
		t.Fatalf("/openapi.json: %d", code)
	}
}

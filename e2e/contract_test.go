package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"shindo.dev/devkit/poll"
)

// TestOpenAPIContract: the document an edge serves at /openapi.json is
// true of what it sends. Every operation the document lists is called
// through that edge, and each request and live response is validated
// against the document by a schema validator we did not write
// (kin-openapi's openapi3filter, on the Swagger 2.0 document converted to
// OpenAPI 3 by its openapi2conv): field names as sent (proto names), types,
// status codes. An operation the document lists and this test does not
// call fails the test, so a route added to proto/ is checked too; and so
// does a documented path the edge does not answer.
func TestOpenAPIContract(t *testing.T) {
	d := startDev(t, "-stations", "3")
	edge := d.endpoints.get(t, "TPE-1", "edge", "http")
	token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(token))

	code, body := httpGet(t, edge+"/openapi.json")
	if code != http.StatusOK {
		t.Fatalf("/openapi.json: %d %s", code, body)
	}
	var doc2 openapi2.T
	if err := json.Unmarshal([]byte(body), &doc2); err != nil {
		t.Fatalf("/openapi.json is not Swagger 2.0: %v", err)
	}
	doc, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		t.Fatalf("convert to OpenAPI 3: %v", err)
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: edge}}
	// Closed: a field the server sends must be in the document, so a
	// document naming fields otherwise than the server (timeMs for
	// time_ms) fails, not only one with wrong types.
	for _, ref := range doc.Components.Schemas {
		closeSchema(ref.Value, map[*openapi3.Schema]bool{})
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	// A station of the fleet and a report to read back; a past tick in the
	// cores' archives and a window of the fleet's waveforms, once both are
	// there (the archives write behind the live path).
	station := d.stations[0].ID
	report := fmt.Sprintf("contract-%d", time.Now().UnixNano())
	now := time.Now().UnixMilli()
	var past, wstart, wend int64
	if !poll.Within(30*time.Second, func() bool {
		past = (time.Now().UnixMilli()/500 - 6) * 500
		wstart, wend = time.Now().UnixMilli()-8_000, time.Now().UnixMilli()-4_000
		ok := true
		for _, core := range []string{"TNN-1", "TYO-1"} {
			api := d.endpoints.get(t, core, "dataapi", "http")
			c1, _ := httpGet(t, fmt.Sprintf("%s/v1/rts/snapshot?time_ms=%d", api, past))
			c2, _ := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", api, station, wstart, wend))
			ok = ok && c1 == http.StatusOK && c2 == http.StatusOK
		}
		return ok
	}) {
		t.Fatalf("no archived tick (%d) or waveform window (%d–%d) at both cores within 30 s", past, wstart, wend)
	}
	// One naming: both cores' archives call the station by the SEED codes
	// the registry gave it.
	type codes struct {
		Network  string `json:"network_code"`
		Station  string `json:"station_code"`
		Location string `json:"location_code"`
	}
	var registered struct{ Station codes }
	if _, body := httpGet(t, d.endpoints.get(t, "TNN-1", "dataapi", "http")+"/v1/stations/"+station); json.Unmarshal([]byte(body), &registered) != nil ||
		registered.Station.Network == "" || registered.Station.Station == "" {
		t.Fatalf("station %s: no SEED codes in %s", station, body)
	}
	for _, core := range []string{"TNN-1", "TYO-1"} {
		var archived codes
		_, body := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", d.endpoints.get(t, core, "dataapi", "http"), station, wstart, wend))
		if json.Unmarshal([]byte(body), &archived) != nil || archived != registered.Station {
			t.Errorf("%s archives station %s as %+v, the registry names it %+v", core, station, archived, registered.Station)
		}
	}
	type call struct {
		method, path string
		body         any
		admin        bool
		want         int
	}
	calls := []call{
		{"GET", "/v1/stations", nil, false, 200},
		{"GET", "/v1/stations?net=SIM", nil, false, 200},
		{"GET", "/v1/stations/" + station, nil, false, 200},
		{"GET", "/v1/stations/NOSUCH", nil, false, 404},
		{"POST", "/v1/stations", map[string]any{"id": "OAPI1", "name": "contract", "lat": 23.5, "lon": 121.0, "code": 981}, true, 200},
		{"PUT", "/v1/stations/OAPI1", map[string]any{"name": "contract 2", "lat": 23.6, "lon": 121.1, "code": 981}, true, 200},
		{"POST", "/v1/stations/OAPI1:rotateKey", map[string]any{"overlap_seconds": 3}, true, 200},
		{"POST", "/v1/stations/OAPI1:resetSeq", map[string]any{}, true, 200},
		{"DELETE", "/v1/stations/OAPI1", nil, true, 200},
		{"POST", "/v1/reports", map[string]any{"id": report, "time_ms": fmt.Sprint(now), "lat": 23.9, "lon": 121.6, "depth_km": 15,
			"magnitude": 6.1, "location": "Hualien County", "max_level": 6, "areas": []any{map[string]any{"code": 970, "level": 6}}}, true, 200},
		{"GET", "/v1/reports", nil, false, 200},
		{"GET", fmt.Sprintf("/v1/reports?start_time_ms=%d&min_magnitude=1", now-60_000), nil, false, 200},
		{"GET", "/v1/reports/" + report, nil, false, 200},
		{"GET", "/v1/detections", nil, false, 200},
		{"GET", "/v1/detections?active_only=true", nil, false, 200},
		{"GET", "/v1/detections/0-0", nil, false, 404},
		{"POST", "/v1/clients", map[string]any{"name": "contract", "role": "subscriber", "topics": []string{"websocket.eew.v1"}}, true, 200},
		{"GET", "/v1/clients", nil, true, 200},
		{"DELETE", "/v1/clients/{key_id}", nil, true, 200}, // the key ID of the client just created
		{"POST", "/v1/keys:check", map[string]any{"keys": []string{"nope"}}, true, 200},
		{"GET", "/v1/links", nil, false, 200},
		{"GET", "/v1/links?station_id=" + station, nil, false, 200},
		{"GET", "/v1/rts/snapshot", nil, false, 200},
		{"GET", fmt.Sprintf("/v1/rts/snapshot?time_ms=%d", past), nil, false, 200},
		{"GET", fmt.Sprintf("/v1/rts/snapshot?time_ms=%d", now-86_400_000), nil, false, 404},
		{"GET", "/v1/edge/status", nil, false, 200},
		{"GET", fmt.Sprintf("/v1/waveforms/%s?start_ms=%d&end_ms=%d", station, wstart, wend), nil, false, 200},
		{"GET", fmt.Sprintf("/v1/waveforms/NOSUCH?start_ms=%d&end_ms=%d", wstart, wend), nil, false, 404},
	}

	covered := map[string]bool{}
	var clientKeyID string
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range calls {
		path := strings.Replace(c.path, "{key_id}", clientKeyID, 1)
		var reqBody []byte
		if c.body != nil {
			reqBody, _ = json.Marshal(c.body)
		}
		req, _ := http.NewRequest(c.method, edge+path, bytes.NewReader(reqBody))
		if c.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.admin {
			req.Header.Set("Authorization", "Bearer "+admin)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s %s: not in the document: %v", c.method, path, err)
			continue
		}
		covered[route.Method+" "+route.Path] = true
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		if c.body != nil {
			req.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("%s %s: the request breaks the document: %v", c.method, path, err)
		}
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, path, err)
			continue
		}
		respBody, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d: %s", c.method, path, resp.StatusCode, c.want, respBody)
			continue
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		out.SetBodyBytes(respBody)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s %s: the response breaks the document: %v\n%s", c.method, path, err, first512(respBody))
		}
		if !nonEmptyFields(respBody) {
			t.Errorf("%s %s: the response names no field the document names: %s", c.method, path, first512(respBody))
		}
		if c.method == "POST" && strings.HasSuffix(path, "/v1/clients") {
			var created struct {
				Client struct {
					KeyID string `json:"key_id"`
				} `json:"client"`
			}
			json.Unmarshal(respBody, &created)
			clientKeyID = created.Client.KeyID
		}
	}
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !covered[method+" "+path] {
				missing = append(missing, method+" "+path)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("operations in the document this test does not call: %v", missing)
	}

	// A core serves the document of what it answers: the edges' own
	// route is not in it.
	code, body = httpGet(t, d.endpoints.get(t, "TNN-1", "dataapi", "http")+"/openapi.json")
	if code != http.StatusOK || strings.Contains(body, "/v1/edge/status") || !strings.Contains(body, "/v1/rts/snapshot") {
		t.Errorf("a core's /openapi.json: %d, lists /v1/edge/status or lacks /v1/rts/snapshot", code)
	}
}

// closeSchema forbids properties an object schema does not list, in it and
// in the schemas it contains. Maps (additionalProperties given) and
// google.protobuf.Any stay open.
func closeSchema(s *openapi3.Schema, seen map[*openapi3.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		if _, any := s.Properties["@type"]; !any {
			closed := false
			s.AdditionalProperties.Has = &closed
		}
	}
	for _, p := range s.Properties {
		closeSchema(p.Value, seen)
	}
	if s.Items != nil {
		closeSchema(s.Items.Value, seen)
	}
}

// nonEmptyFields reports whether a JSON object response has a field: a
// document naming fields the server does not send would still validate
// (no field is required), so each response must at least carry one.
func nonEmptyFields(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && len(m) > 0
}

func first512(b []byte) string {
	if len(b) > 512 {
		return string(b[:512]) + "…"
	}
	return string(b)
}

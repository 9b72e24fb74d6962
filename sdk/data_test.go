package sdk

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// TestTypedDataAPI: the typed calls send their request's fields as the
// gateway's query parameters and decode the answers, as the gateways write
// them (proto names, 64-bit integers as strings), into the generated
// messages; a field the client does not know (a newer server's) is skipped.
func TestTypedDataAPI(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/stations":
			w.Write([]byte(`{"stations":[{"id":"S1","name":"one","net":"SIM","lat":23.5,"lon":121.5,"code":970}]}`))
		case "/v1/reports":
			w.Write([]byte(`{"reports":[{"id":"R1","time_ms":"1796150000000","magnitude":6.1,"areas":[{"code":970,"level":6}]}],"next_page_token":"p2"}`))
		case "/v1/reports/R1":
			w.Write([]byte(`{"report":{"id":"R1","time_ms":"1796150000000"}}`))
		case "/v1/detections":
			w.Write([]byte(`{"detections":[{"id":"D1","serial":3}],"next_page_token":""}`))
		case "/v1/detections/D1":
			w.Write([]byte(`{"detection":{"id":"D1","serial":3,"renamedField":1}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New([]string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	stations, err := c.Stations(ctx, "SIM")
	if err != nil || len(stations) != 1 || stations[0].GetId() != "S1" || stations[0].GetCode() != 970 || query != "net=SIM" {
		t.Fatalf("stations %v, %v (query %q)", stations, err, query)
	}
	reports, next, err := c.Reports(ctx, &datav1.ListReportsRequest{StartTimeMs: proto.Int64(1796140000000), MinMagnitude: proto.Float64(4.5), PageSize: 10})
	if err != nil || len(reports) != 1 || reports[0].GetTimeMs() != 1796150000000 || len(reports[0].GetAreas()) != 1 || next != "p2" {
		t.Fatalf("reports %v, next %q, %v", reports, next, err)
	}
	for _, want := range []string{"start_time_ms=1796140000000", "min_magnitude=4.5", "page_size=10"} {
		if !strings.Contains(query, want) {
			t.Errorf("query %q lacks %s", query, want)
		}
	}
	if r, err := c.Report(ctx, "R1"); err != nil || r.GetTimeMs() != 1796150000000 {
		t.Fatalf("report %v, %v", r, err)
	}
	detections, next, err := c.Detections(ctx, &datav1.ListDetectionsRequest{ActiveOnly: true})
	if err != nil || len(detections) != 1 || detections[0].GetSerial() != 3 || next != "" || query != "active_only=true" {
		t.Fatalf("detections %v, %q, %v (query %q)", detections, next, err, query)
	}
	if d, err := c.Detection(ctx, "D1"); err != nil || d.GetSerial() != 3 {
		t.Fatalf("an answer with a field the client does not know: %v, %v", d, err)
	}
}

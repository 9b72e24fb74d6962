package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDashboardRoutes: / leads to the dashboard, config.json names the
// edge and the entrances, and reads are open to other origins.
func TestDashboardRoutes(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	registerDashboard(mux, "KHH-1", []string{"http://tpe.example:8080", "http://khh.example:8080"})
	srv := httptest.NewServer(allowCrossOrigin(mux))
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := client.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("/: %s → %q", resp.Status, resp.Header.Get("Location"))
	}

	resp, err = client.Get(srv.URL + "/dashboard/config.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg struct {
		Site      string   `json:"site"`
		Entrances []string `json:"entrances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Site != "KHH-1" || len(cfg.Entrances) != 2 || cfg.Entrances[1] != "http://khh.example:8080" {
		t.Fatalf("config %+v", cfg)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatal("reads not open to other origins")
	}

	index, err := client.Get(srv.URL + "/dashboard/")
	if err != nil {
		t.Fatal(err)
	}
	index.Body.Close()
	if index.StatusCode != http.StatusOK {
		t.Fatalf("dashboard: %s", index.Status)
	}
}

package devcontrol

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	dir := t.TempDir()
	if _, err := URL(dir); err == nil || !strings.Contains(err.Error(), "no running shindo dev") {
		t.Fatalf("no endpoints.json: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "endpoints.json"), []byte(`{"dev":{}}`), 0o600)
	if _, err := URL(dir); err == nil || !strings.Contains(err.Error(), "names no control API") {
		t.Fatalf("no control: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "endpoints.json"), []byte(`{"dev":{"control":"http://127.0.0.1:17950"}}`), 0o600)
	if u, err := URL(dir); err != nil || u != "http://127.0.0.1:17950" {
		t.Fatalf("URL %q, %v", u, err)
	}
}

func TestCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"fine":true}`))
		case "/named":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no process \"X\""}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if b, err := Call(ctx, srv.Client(), http.MethodGet, srv.URL, "/ok"); err != nil || string(b) != `{"fine":true}` {
		t.Fatalf("ok: %q %v", b, err)
	}
	if _, err := Call(ctx, srv.Client(), http.MethodPost, srv.URL, "/named"); err == nil || err.Error() != `no process "X"` || !NotFound(err) {
		t.Fatalf("named error: %v", err)
	}
	if _, err := Call(ctx, srv.Client(), http.MethodGet, srv.URL, "/other"); err == nil || !strings.Contains(err.Error(), "502") || NotFound(err) {
		t.Fatalf("bare status: %v", err)
	}
	srv.Close()
	if _, err := Call(ctx, http.DefaultClient, http.MethodGet, srv.URL, "/ok"); err == nil || !strings.Contains(err.Error(), "is shindo dev still running") {
		t.Fatalf("closed: %v", err)
	}
}

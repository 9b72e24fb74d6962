package faultcmd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestArgs: each command line parses to the control API route it drives,
// and a wrong one is refused.
func TestArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args         []string
		method, path string
	}{
		{[]string{"ps"}, "GET", "/v1/processes"},
		{[]string{"kill", "TNN-1"}, "POST", "/v1/sites/TNN-1/kill"},
		{[]string{"start", "KHH-1-edge"}, "POST", "/v1/processes/KHH-1-edge/start"},
		{[]string{"partition"}, "POST", "/v1/intersite/partition"},
		{[]string{"heal"}, "POST", "/v1/intersite/heal"},
		{[]string{"links"}, "GET", "/v1/links"},
		{[]string{"degrade", "uplink-TYO-1", "lossy"}, "POST", "/v1/links/uplink-TYO-1/degrade?profile=lossy"},
		{[]string{"degrade", "intersite", "a b"}, "POST", "/v1/links/intersite/degrade?profile=a+b"},
		{[]string{"cut", "uplink-TNN-1"}, "POST", "/v1/links/uplink-TNN-1/cut"},
		{[]string{"heal", "uplink-TNN-1"}, "POST", "/v1/links/uplink-TNN-1/heal"},
		{[]string{"heal", "intersite"}, "POST", "/v1/links/intersite/heal"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			c, err := parseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if m, p := c.route(); m != tc.method || p != tc.path {
				t.Fatalf("route %s %s, want %s %s", m, p, tc.method, tc.path)
			}
		})
	}
	for _, args := range [][]string{nil, {"explode"}, {"kill"}, {"kill", ""}, {"ps", "TNN-1"}, {"stop", "a", "b"},
		{"links", "uplink-TNN-1"}, {"partition", "intersite"}, {"degrade"}, {"degrade", "uplink-TNN-1"},
		{"degrade", "uplink-TNN-1", ""}, {"degrade", "uplink-TNN-1", "lossy", "typhoon"}, {"cut"}, {"cut", ""},
		{"cut", "uplink-TNN-1", "uplink-TYO-1"}, {"heal", ""}, {"heal", "a", "b"}} {
		if _, err := parseArgs(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if !isSite("TNN-1") || isSite("TNN-1-rts") || isSite("fleet") {
		t.Error("site and process names confused")
	}
}

// TestErrors: bad usage exits 2 with the usage; no running dev exits 1
// saying how to start one.
func TestErrors(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := Main(context.Background(), []string{"kill"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "Usage: shindo fault") {
		t.Fatalf("bad usage: %d %q", code, errOut.String())
	}
	for _, want := range []string{"degrade LINK PROFILE", "typhoon", "uplink-TYO-1"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	errOut.Reset()
	dir := t.TempDir()
	if code := Main(context.Background(), []string{"-dir", dir, "ps"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no running shindo dev") {
		t.Fatalf("no dev: %d %q", code, errOut.String())
	}
	os.WriteFile(filepath.Join(dir, "endpoints.json"), []byte(`{"dev":{}}`), 0o600)
	errOut.Reset()
	if code := Main(context.Background(), []string{"-dir", dir, "ps"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "names no control API") {
		t.Fatalf("old endpoints: %d %q", code, errOut.String())
	}
}

// TestLinkCommands drives a stand-in control API: the link commands send
// their requests and print what it answers, and its errors reach stderr.
func TestLinkCommands(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/links":
			w.Write([]byte(`{"links":[{"name":"uplink-TNN-1","kind":"uplink","from":"stations","to":"TNN-1","profile":"typhoon","phase":"gust",
				"udp":"127.0.0.1:17070","ws":"ws://127.0.0.1:17071/v1/station/ws"},
				{"name":"intersite","kind":"intersite","from":"TNN-1","to":"TYO-1","profile":"clear","phase":"clear",
				"nats":{"TYO-1":"nats://127.0.0.1:17152","TNN-1":"nats://127.0.0.1:17052"}}],
				"unimpairable":[{"name":"edge-TPE-1-TNN-1","why":"not impairable on loopback yet"}],
				"profiles":[{"name":"clear","summary":"no impairment"}]}`))
		case r.URL.Path == "/v1/links/uplink-KHH-1/cut":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"unknown link \"uplink-KHH-1\": links are uplink-TNN-1, uplink-TYO-1, intersite"}`))
		case r.URL.Path == "/v1/intersite/heal":
			w.Write([]byte(`{"partitioned":false}`))
		default:
			name := strings.Split(r.URL.Path, "/")[3]
			profile := map[string]string{"degrade": r.URL.Query().Get("profile"), "cut": "cut", "heal": "clear"}[strings.Split(r.URL.Path, "/")[4]]
			json.NewEncoder(w).Encode(map[string]string{"name": name, "profile": profile})
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "endpoints.json"), []byte(`{"dev":{"control":"`+srv.URL+`"}}`), 0o600)
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Main(context.Background(), append([]string{"-dir", dir}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, _ := run("links")
	for _, want := range []string{"uplink-TNN-1  stations  TNN-1  typhoon (gust)  127.0.0.1:17070, ws://127.0.0.1:17071/v1/station/ws",
		"intersite     TNN-1     TYO-1  clear           TNN-1 nats://127.0.0.1:17052, TYO-1 nats://127.0.0.1:17152",
		"edge-TPE-1-TNN-1: not impairable", "clear     no impairment"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("links: %d, output lacks %q:\n%s", code, want, out)
		}
	}
	if code, out, _ := run("degrade", "uplink-TYO-1", "lossy"); code != 0 || out != "uplink-TYO-1: lossy\n" {
		t.Errorf("degrade: %d %q", code, out)
	}
	if code, out, _ := run("cut", "uplink-TNN-1"); code != 0 || out != "uplink-TNN-1: cut\n" {
		t.Errorf("cut: %d %q", code, out)
	}
	if code, out, _ := run("heal", "uplink-TNN-1"); code != 0 || out != "uplink-TNN-1: clear\n" {
		t.Errorf("heal: %d %q", code, out)
	}
	if code, out, _ := run("heal"); code != 0 || !strings.Contains(out, "healed") {
		t.Errorf("heal the cores: %d %q", code, out)
	}
	if code, _, errOut := run("cut", "uplink-KHH-1"); code != 1 || !strings.Contains(errOut, "links are uplink-TNN-1, uplink-TYO-1, intersite") {
		t.Errorf("unknown link: %d %q", code, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /v1/links", "POST /v1/links/uplink-TYO-1/degrade?profile=lossy", "POST /v1/links/uplink-TNN-1/cut",
		"POST /v1/links/uplink-TNN-1/heal", "POST /v1/intersite/heal", "POST /v1/links/uplink-KHH-1/cut"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

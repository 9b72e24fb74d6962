package rts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shindo.dev/lib/conf"
)

func load(args ...string) error {
	cfg := DefaultConfig()
	return conf.Load(&cfg, "RTS", append([]string{"-registry", "stations.json"}, args...),
		conf.Options{Env: func(string) (string, bool) { return "", false }, Name: Name})
}

func TestConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "areas.json")
	if err := os.WriteFile(good, []byte(`{"areas":[{"id":1,"rect":{"south":23,"north":24,"west":121,"east":122}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"areas":[{"id":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"-areas", good, "-detect-stations", "4", "-detect-radius-km", "40", "-detect-window", "5s"}, ""},
		{[]string{"-areas", bad}, "neither rect nor polygon"},
		{[]string{"-areas", filepath.Join(dir, "missing.json")}, "open areas"},
		{[]string{"-detect-stations", "1"}, "detect-stations"},
		{[]string{"-detect-stations", "0"}, "detect-stations"},
		{[]string{"-detect-window", "0s"}, "detect-window"},
		{[]string{"-detect-max-duration", "5s"}, "detect-max-duration"},
		{[]string{"-alert-intensity", "9"}, "alert-intensity"},
		{[]string{"-archive-dir", dir, "-archive-retention", "24h"}, ""},
		{[]string{"-archive-retention", "10m"}, "archive-retention"},
	}
	for _, tt := range tests {
		err := load(tt.args...)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

package faultcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"ps"}, {"kill", "TNN-1"}, {"start", "KHH-1-edge"}, {"partition"}, {"heal"}} {
		if _, _, err := parseArgs(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	for _, args := range [][]string{nil, {"explode"}, {"kill"}, {"kill", ""}, {"ps", "TNN-1"}, {"stop", "a", "b"}} {
		if _, _, err := parseArgs(args); err == nil {
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

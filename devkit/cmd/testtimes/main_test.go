package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures in testdata are real `go test -json` output (Go 1.26) of a
// throwaway package: TestQuick logs and passes, TestSlow sleeps 300 ms,
// TestBroken has a passing and a failing subtest, TestHangs sleeps an hour
// under a 2 s -timeout; build.json is a package that does not compile.
func TestSummaries(t *testing.T) {
	tests := []struct {
		fixture string
		wantErr bool
		want    []string // in this order
		notWant []string
	}{
		{
			fixture: "pass.json",
			want: []string{
				"--- PASS: TestQuick", "--- PASS: TestSlow (300ms)", "ok  \texample.com/tt/p\t0.314s",
				"top-level tests by duration", "300ms", "TestSlow", "TestQuick",
			},
			// A passing test's log is not printed, as with plain go test.
			notWant: []string{"quick says hello"},
		},
		{
			fixture: "fail.json",
			wantErr: true,
			want: []string{
				"before the subtests", "fine subtest", "the bad subtest failed",
				"--- FAIL: TestBroken (", "--- SKIP: TestHangs", "FAIL\texample.com/tt/p",
				"fail  TestBroken",
			},
			notWant: []string{"quick says hello"},
		},
		{
			fixture: "timeout.json",
			wantErr: true,
			want: []string{
				"--- PASS: TestQuick", "=== TestHangs (did not end)", "about to hang",
				"panic: test timed out after 2s", "FAIL\texample.com/tt/p",
			},
		},
		{
			fixture: "build.json",
			wantErr: true,
			want:    []string{"undefined: undefined", "FAIL\texample.com/tt/q [build failed]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			in, err := os.Open(filepath.Join("testdata", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			jsonOut := filepath.Join(t.TempDir(), "events.json")
			var out bytes.Buffer
			err = run(in, &out, jsonOut)
			if tt.wantErr != errors.Is(err, errFailed) {
				t.Errorf("run: %v, want failure %v", err, tt.wantErr)
			}
			got := out.String()
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order); whole output:\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("output has %q; whole output:\n%s", w, got)
				}
			}
			kept, err := os.ReadFile(jsonOut)
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(filepath.Join("testdata", tt.fixture))
			if !bytes.Equal(kept, orig) {
				t.Errorf("-json kept %d bytes, want the %d read", len(kept), len(orig))
			}
		})
	}
}

// No package result at all — go test never started, or was killed — is a
// failure, not a silent pass.
func TestNothingIsAFailure(t *testing.T) {
	var out bytes.Buffer
	err := run(strings.NewReader("go: cannot find main module\n"), &out, "")
	if !errors.Is(err, errFailed) {
		t.Errorf("run: %v, want errFailed", err)
	}
	if !strings.Contains(out.String(), "cannot find main module") {
		t.Errorf("go's own words were not passed through: %q", out.String())
	}
}

// Package jmatest gives tests the JMA strong-motion records kept in the
// repository's shared test data, with their reference intensities.
package jmatest

import (
	"os"
	"path/filepath"
	"testing"

	"shindo.dev/seismo/accelcsv"
)

// Reference is the expected official intensity of one record (JMA.md §5).
type Reference struct {
	File     string
	A0       float64 // gal
	I        float64 // unrounded, to three decimals
	Reported float64
	Class    string
}

// References lists every record in shared/testdata/jma.
var References = []Reference{
	{"AA06EA01.csv", 127.92, 5.154, 5.1, "5+"},
	{"Q4149CF2.csv", 251.74, 5.742, 5.7, "6-"},
	{"Q4169D2004.csv", 74.35, 4.683, 4.6, "5-"},
	{"Q416EED018.csv", 106.05, 4.991, 4.9, "5-"},
}

// Dir finds shared/testdata/jma by walking up from the working directory, so
// tests work from any package and from a checkout with a different layout.
// It skips the test if the records are not there.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("working directory: %v", err)
	}
	for {
		cand := filepath.Join(dir, "shared", "testdata", "jma")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("JMA records not found: no shared/testdata/jma in any parent directory")
			return ""
		}
		dir = parent
	}
}

// Load reads one record from Dir.
func Load(tb testing.TB, name string) *accelcsv.Record {
	tb.Helper()
	f, err := os.Open(filepath.Join(Dir(tb), name))
	if err != nil {
		tb.Fatalf("open record: %v", err)
	}
	defer f.Close()
	rec, err := accelcsv.ReadJMA(f)
	if err != nil {
		tb.Fatalf("read %s: %v", name, err)
	}
	return rec
}

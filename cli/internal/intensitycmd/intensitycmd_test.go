package intensitycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jmaDir finds shared/testdata/jma above the working directory.
func jmaDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		cand := filepath.Join(dir, "shared", "testdata", "jma")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("JMA records not found: no shared/testdata/jma in any parent directory")
		}
		dir = parent
	}
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func decode(t *testing.T, stdout string) []Result {
	t.Helper()
	var rs []Result
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("output is not JSON objects: %v\n%s", err, stdout)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestJMARecords(t *testing.T) {
	t.Parallel()
	dir := jmaDir(t)
	want := map[string]struct {
		reported float64
		class    string
	}{
		"AA06EA01.csv":   {5.1, "5+"},
		"Q4149CF2.csv":   {5.7, "6-"},
		"Q4169D2004.csv": {4.6, "5-"},
		"Q416EED018.csv": {4.9, "5-"},
	}
	var args []string
	for name := range want {
		args = append(args, filepath.Join(dir, name))
	}
	code, stdout, stderr := run(t, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	rs := decode(t, stdout)
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d", len(rs), len(want))
	}
	for _, r := range rs {
		w := want[filepath.Base(r.File)]
		if r.Reported != w.reported || r.Class != w.class {
			t.Errorf("%s: reported %.1f class %s, want %.1f %s", r.File, r.Reported, r.Class, w.reported, w.class)
		}
		if r.RateHz != 100 || r.Samples < 20000 || r.PGAGal <= 0 || r.PGVCms <= 0 {
			t.Errorf("%s: implausible %+v", r.File, r)
		}
		if d := r.RealtimeMax - r.Intensity; d > 0.05 || d < -0.05 {
			t.Errorf("%s: real-time max %.3f vs intensity %.3f", r.File, r.RealtimeMax, r.Intensity)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sine is a plain record: 20 s of a 1 Hz circular motion at amp.
func sine(sep string, amp float64) string {
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		s, c := math.Sincos(2 * math.Pi * float64(i) / 100)
		fmt.Fprintf(&b, "%.6f%s%.6f%s0\n", amp*c, sep, amp*s, sep)
	}
	return b.String()
}

func TestPlainFilesAndUnits(t *testing.T) {
	t.Parallel()
	gal := writeFile(t, "gal.csv", "ns,ew,ud\n"+sine(",", 100))
	ms2 := writeFile(t, "ms2.tsv", sine("\t", 1))
	code, stdout, stderr := run(t, "--rate", "100", gal)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code2, stdout2, stderr2 := run(t, "-rate=100", "-unit=ms2", ms2)
	if code2 != 0 {
		t.Fatalf("exit %d: %s", code2, stderr2)
	}
	a, b := decode(t, stdout), decode(t, stdout2)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("results %d and %d, want 1 each", len(a), len(b))
	}
	// 1 m/s² is 100 gal: the same motion (to the printed precision).
	if d := a[0].Intensity - b[0].Intensity; d > 1e-4 || d < -1e-4 {
		t.Errorf("gal %.4f vs m/s² %.4f", a[0].Intensity, b[0].Intensity)
	}
	// 100 gal at 1 Hz: I = 2·log10(100·0.996369) + 0.94 ≈ 4.937 in the middle;
	// the abrupt ends of the record add a little.
	if a[0].Intensity < 4.9 || a[0].Intensity > 5.1 || a[0].Samples != 2000 {
		t.Errorf("circular 1 Hz, 100 gal: %+v", a[0])
	}
}

func TestBadInputIsReportedAndOthersContinue(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "good.csv", sine(",", 50))
	ragged := writeFile(t, "ragged.csv", "1,2,3\n4,5\n")
	text := writeFile(t, "text.csv", "1,2,3\n1,abc,3\n")
	short := writeFile(t, "short.csv", "1,2,3\n4,5,6\n")
	missing := filepath.Join(t.TempDir(), "missing.csv")
	code, stdout, stderr := run(t, "--rate", "100", ragged, missing, good, text, short)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if rs := decode(t, stdout); len(rs) != 1 || rs[0].File != good {
		t.Errorf("want exactly the good file on stdout, got %q", stdout)
	}
	for _, want := range []string{
		ragged + ": line 2: ragged row",
		missing + ": no such file",
		text + ": line 2: not a finite number",
		short + ": intensity: record shorter than 0.3 s",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestUnknownRate(t *testing.T) {
	t.Parallel()
	plain := writeFile(t, "plain.csv", sine(",", 10))
	badJMA := writeFile(t, "bad.csv", " SAMPLING RATE= fastHz\n NS,EW,UD\n1,2,3\n")
	code, _, stderr := run(t, plain, badJMA)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{plain + ": unknown sample rate", badJMA + ": line 1: unknown sample rate"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown flag", []string{"--bogus", "x"}, 2, "flag provided but not defined"},
		{"bad unit", []string{"--unit", "furlong", "x"}, 2, "--unit"},
		{"bad rate", []string{"--rate", "-5", "x"}, 2, "--rate"},
		{"bad rate value", []string{"--rate", "fast", "x"}, 2, "invalid value"},
		{"bad format", []string{"--format", "xml", "x"}, 2, "--format"},
		{"no files", nil, 2, "no files given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) || !strings.Contains(stderr, "Usage: shindo intensity") {
				t.Errorf("exit %d, stderr %q; want %d with %q and usage", code, stderr, tt.wantCode, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
	code, stdout, _ := run(t, "-h")
	if code != 0 || !strings.Contains(stdout, "Usage: shindo intensity") {
		t.Errorf("-h: exit %d, stdout %q", code, stdout)
	}
}

func TestTextFormat(t *testing.T) {
	t.Parallel()
	f := writeFile(t, "a.csv", sine(",", 100))
	code, stdout, stderr := run(t, "--format", "text", "--rate", "100", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "REPORTED") || (!strings.Contains(lines[1], " 5+  ") && !strings.Contains(lines[1], " 5-  ")) || !strings.HasSuffix(lines[1], f) {
		t.Errorf("table:\n%s", stdout)
	}
	// Every column, the file name too, is set off by spaces.
	if !strings.Contains(lines[0], " RT-MAX ") || !strings.Contains(lines[1], "  "+f) {
		t.Errorf("columns run together:\n%s", stdout)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"--rate", "100", "x"}, &out, &errb); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}

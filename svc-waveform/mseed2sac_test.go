package waveform

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

// sacFile is what the test reads of a SAC binary file: the header words it
// checks and the samples.
type sacFile struct {
	delta, b     float32
	npts         int32
	start        time.Time // reference time + b
	station, cmp string
	net          string
	data         []float32
}

// readSAC parses a little-endian SAC binary file: a 632-byte header (70
// floats, 40 integers, 192 bytes of strings), then npts float32 samples.
func readSAC(t *testing.T, path string) sacFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 632 {
		t.Fatalf("%s: %d bytes", path, len(b))
	}
	le := binary.LittleEndian
	f := func(i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) }
	n := func(i int) int32 { return int32(le.Uint32(b[280+4*i:])) }
	s := func(off, size int) string { return strings.TrimSpace(string(b[off : off+size])) }
	if v := n(6); v != 6 {
		t.Fatalf("%s: header version %d: not little-endian SAC", path, v)
	}
	sac := sacFile{delta: f(0), b: f(5), npts: n(9), station: s(440, 8), cmp: s(600, 8), net: s(608, 8)}
	ref := time.Date(int(n(0)), 1, 1, int(n(2)), int(n(3)), int(n(4)), int(n(5))*1e6, time.UTC).AddDate(0, 0, int(n(1))-1)
	sac.start = ref.Add(time.Duration(math.Round(float64(sac.b)*1000)) * time.Millisecond)
	if len(b) != 632+4*int(sac.npts) {
		t.Fatalf("%s: %d bytes for %d samples", path, len(b), sac.npts)
	}
	for i := range int(sac.npts) {
		sac.data = append(sac.data, math.Float32frombits(le.Uint32(b[632+4*i:])))
	}
	return sac
}

// TestMseed2sac has an independent reader, mseed2sac (libmseed), convert
// the archive's miniSEED export to SAC and compares every sample with what
// was stored.
func TestMseed2sac(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("mseed2sac")
	if err != nil {
		t.Fatal("mseed2sac not found: install it (Debian: apt-get install -y mseed2sac); CI installs it in .ci/run")
	}
	ts := startServer(t)
	start := time.Now().Add(-2*time.Hour).UnixMilli() / 500 * 500
	var recs []*ingestv1.Record
	for j := range int64(720) { // six minutes, with a gap of 10 s
		if j >= 300 && j < 320 {
			continue
		}
		recs = append(recs, sensorRecord("KHH-A1", start+500*j, 25))
	}
	ts.ingest(t, &waveformv1.IngestRequest{BatchId: 1, Records: recs})

	body, _ := ts.export(t, &waveformv1.ExportRequest{StationId: "KHH-A1", StartMs: start, EndMs: start + 360_000})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "export.mseed"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "-f", "3", "export.mseed") // 3: little-endian binary SAC
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "warning") || strings.Contains(strings.ToLower(string(out)), "error") {
		t.Fatalf("mseed2sac: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.SAC"))
	// Three channels, each in two pieces around the gap.
	if len(files) != 6 {
		t.Fatalf("mseed2sac wrote %v\n%s", files, out)
	}
	axis := map[string]int{"BNZ": 0, "BNN": 1, "BNE": 2}
	total := map[string]int{}
	for _, path := range files {
		sac := readSAC(t, path)
		a, ok := axis[sac.cmp]
		if !ok || sac.net != "SH" || sac.station != "KHHA1" {
			t.Fatalf("%s: %s.%s.%s", path, sac.net, sac.station, sac.cmp)
		}
		if sac.delta != 0.02 {
			t.Errorf("%s: delta %v, want 0.02", path, sac.delta)
		}
		first := sac.start.UnixMilli()
		if first != start && first != start+320*500 {
			t.Errorf("%s starts at %v", path, sac.start)
		}
		for i, v := range sac.data {
			ms := first + 20*int64(i)
			if want := count("KHH-A1", a, ms); v != float32(want) {
				t.Fatalf("%s sample %d: %v, want %d", path, i, v, want)
			}
		}
		total[sac.cmp] += int(sac.npts)
	}
	for ch := range axis {
		if total[ch] != 700*25 {
			t.Errorf("%s: %d samples in SAC, want %d", ch, total[ch], 700*25)
		}
	}
}

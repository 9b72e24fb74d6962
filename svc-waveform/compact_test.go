package waveform

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/seismo/accelcsv"
	"shindo.dev/seismo/measure"
	"shindo.dev/seismo/resample"
	"shindo.dev/svc-waveform/internal/archive"
)

// jmaRecords are the JMA strong-motion records in the shared test data.
var jmaRecords = []string{"AA06EA01.csv", "Q4149CF2.csv", "Q4169D2004.csv", "Q416EED018.csv"}

// jmaDir finds shared/testdata/jma above the working directory.
func jmaDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		cand := filepath.Join(dir, "shared", "testdata", "jma")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("JMA records not found: no shared/testdata/jma in any parent directory")
		}
		dir = parent
	}
}

// jmaFrames turns a JMA record into the frames a station would send for
// it: decimated to 50 Hz (resample.Halve), counts of 0.001 gal and the
// intensity series from the station pipeline (seismo/measure).
func jmaFrames(tb testing.TB, path, station string, startMs int64) (frames []archive.Frame, samples int) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rec, err := accelcsv.ReadJMA(f)
	if err != nil {
		tb.Fatal(err)
	}
	if rec.RateHz != 100 {
		tb.Fatalf("%s: %v Hz", path, rec.RateHz)
	}
	ns, ew, ud := resample.Halve(rec.NS), resample.Halve(rec.EW), resample.Halve(rec.UD)
	p, err := measure.New(measure.Config{StartMs: startMs, ScaleGal: measure.DefaultScaleGal})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range ns {
		if !p.Add(ns[i], ew[i], ud[i]) {
			continue
		}
		s, in := p.Sensor().Clone(), p.Intensity()
		frames = append(frames,
			archive.Frame{Station: station, TimeMs: s.FirstSampleMs, RateHz: s.RateHz, ScaleGal: s.ScaleGal, NS: s.NS, EW: s.EW, UD: s.UD},
			archive.Frame{Station: station, Intensity: true, TimeMs: in.WindowEndMs, Values: [3]float32{in.Intensity, in.PGAGal, in.PGVCms}})
		samples += len(s.NS)
	}
	return frames, samples
}

// archiveJMA stores the four records as four stations, closes the archive
// (every buffer written as records) and returns the bytes per sample of
// the acceleration channels and of the intensity series per frame.
func archiveJMA(tb testing.TB) (perSample, perIntensityFrame float64) {
	tb.Helper()
	dir := jmaDir(tb)
	data := tb.TempDir()
	store, err := archive.Open(archive.Options{Dir: data, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now().Add(-time.Hour).UnixMilli() / 500 * 500
	samples, intensity := 0, 0
	for _, name := range jmaRecords {
		frames, n := jmaFrames(tb, filepath.Join(dir, name), "JMA-"+strings.TrimSuffix(name, ".csv"), start)
		out := make([]archive.Outcome, len(frames))
		if _, err := store.Apply(frames, out); err != nil {
			tb.Fatal(err)
		}
		for j, o := range out {
			if o != archive.Stored {
				tb.Fatalf("%s frame %d: %v", name, j, o)
			}
		}
		samples += 3 * n
		intensity += len(frames) / 2
	}
	if err := store.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
	var accel, ints int64
	filepath.WalkDir(filepath.Join(data, "sds"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, _ := d.Info()
		if strings.Contains(d.Name(), ".BN") {
			accel += fi.Size()
		} else {
			ints += fi.Size()
		}
		return nil
	})
	return float64(accel) / float64(samples), float64(ints) / float64(intensity)
}

// TestCompactness: real strong-motion data, as a station sends it, takes
// at most 2 bytes per sample in the archive.
func TestCompactness(t *testing.T) {
	t.Parallel()
	perSample, perFrame := archiveJMA(t)
	t.Logf("JMA records: %.3f bytes per sample (BN? channels); intensity series %.1f bytes per 500 ms frame", perSample, perFrame)
	if perSample > 2 {
		t.Errorf("%.3f bytes per sample, want at most 2", perSample)
	}
}

// BenchmarkJMABytesPerSample reports the archive's size for the JMA
// records (the figure TestCompactness checks).
func BenchmarkJMABytesPerSample(b *testing.B) {
	var perSample, perFrame float64
	for b.Loop() {
		perSample, perFrame = archiveJMA(b)
	}
	b.ReportMetric(perSample, "bytes/sample")
	b.ReportMetric(perFrame, "bytes/intensity-frame")
}

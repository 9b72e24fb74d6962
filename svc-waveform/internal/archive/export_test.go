package archive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/seismo/mseed"
)

// TestExportPassesRecordsThrough: Export hands over the stored records
// that lie wholly inside its window byte for byte, and cuts anew only
// those at the window's ends and the samples not yet in a record: every
// sample of the window once, in time order, as Query has them.
func TestExportPassesRecordsThrough(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 10, 0, 0, time.UTC)
	dir := t.TempDir()
	s := openTest(t, dir, &clock{t: now}, nil)
	// 11:40 to 12:00: across an hour, which Export reads one at a time,
	// and stored records reach from one into the next.
	base := now.Add(-30 * time.Minute).UnixMilli()
	var frames []Frame
	for i := int64(0); i < 20*60*2; i++ { // 20 minutes of 500 ms frames
		frames = append(frames, sensorFrame(1, base+500*i))
	}
	s.apply(frames...)
	// The commit loop writes the day file after the frames are durable in
	// the log, which is what apply waited for: it may take a moment, and
	// until then the samples are only in memory.
	var files []string
	poll.Within(10*time.Second, func() bool {
		files, _ = filepath.Glob(filepath.Join(dir, "sds", "*", "*", "*", "BNZ.D", "*"))
		return len(files) == 1
	})
	if len(files) != 1 {
		t.Fatalf("day files %v", files)
	}
	// A window whose ends fall inside records, reaching the samples still
	// in memory (the last record's worth: at most one record per channel
	// waits unwritten).
	from, to := base+61_230, base+20*60_000
	var out []byte
	n, err := s.Export(stationID(1), from, to, []int{chZ}, func(b []byte) error { out = append(out, b...); return nil })
	if err != nil || n == 0 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	recs, err := mseed.ReadAll(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	next := from / 20 * 20
	if from%20 != 0 {
		next += 20
	}
	for i, r := range recs {
		if ms := r.Start.UnixMilli(); ms != next {
			t.Fatalf("record %d starts %d ms after the previous ended: a gap or a repeat", i, ms-next)
		}
		for k, v := range r.Ints {
			if want := value(1, 0, next/20+int64(k)); v != want {
				t.Fatalf("record %d sample %d: %d, want %d", i, k, v, want)
			}
		}
		next += int64(len(r.Ints)) * 20
	}
	if next != to {
		t.Errorf("the export ends at %d, want %d", next, to)
	}
	// The records inside the window are the day file's own.
	disk, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := 0; i+recordLen <= len(out); i += recordLen {
		if bytes.Contains(disk, out[i:i+recordLen]) {
			same++
		}
	}
	// All but the first (cut by the window) and the last (samples still
	// in memory, and the record the window's end cuts).
	if same < len(recs)-3 {
		t.Errorf("%d of the export's %d records are the file's own: the rest were encoded anew", same, len(recs))
	}
}

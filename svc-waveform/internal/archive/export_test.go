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
	// The records inside the window are the day file's own, once the
	// commit loop has written them: Export hands over records cut and not
	// yet written (pending) as they will be written.
	same := 0
	poll.Within(10*time.Second, func() bool {
		disk, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		same = 0
		for i := 0; i+recordLen <= len(out); i += recordLen {
			if bytes.Contains(disk, out[i:i+recordLen]) {
				same++
			}
		}
		return same >= len(recs)-3
	})
	// All but the first (cut by the window) and the last (samples still
	// in memory, and the record the window's end cuts).
	if same < len(recs)-3 {
		t.Errorf("%d of the export's %d records are the file's own: the rest were encoded anew", same, len(recs))
	}
}

// TestExportSpansAreTheStoredRecords: an export asked for spans of the day
// files is, once each span is read from its file, byte for byte the export
// of records — over windows that cut records, cross an hour, hold a gap
// and a late stretch that goes back in time, and reach the samples still
// in memory — and hands the long runs of stored records over as spans.
// (That the runs of a stretch are not read to be handed over shows in
// svc-dataapi's BenchmarkDataselectDay.)
func TestExportSpansAreTheStoredRecords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 10, 0, 0, time.UTC)
	dir := t.TempDir()
	s := openTest(t, dir, &clock{t: now}, nil)
	base := now.Add(-30 * time.Minute).UnixMilli()                // 11:40
	hole := func(i int64) bool { return i >= 7*120 && i < 8*120 } // 11:47–11:48
	var frames []Frame
	for i := int64(0); i < 20*60*2; i++ {
		if !hole(i) {
			frames = append(frames, sensorFrame(1, base+500*i))
		}
	}
	s.apply(frames...)
	var late []Frame
	for i := int64(7 * 120); i < 8*120; i++ {
		late = append(late, sensorFrame(1, base+500*i))
	}
	s.apply(late...)
	// Both applies' records on disk (all but the last of each channel):
	// the files have stopped growing.
	var size int64
	poll.Within(10*time.Second, func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "sds", "*", "*", "*", "BN?.D", "*"))
		var n int64
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				n += st.Size()
			}
		}
		stable := n == size && len(files) == 3
		size = n
		return stable
	})
	longest := int64(0)
	for _, w := range []struct{ from, to int64 }{
		{base, base + 20*60_000},
		{base + 61_230, base + 20*60_000},     // cut at its start, to the samples in memory
		{base + 10_010, base + 19*60_000 + 7}, // cut at both ends, across 12:00
		{base + 6*60_000, base + 9*60_000},    // around the hole and its late stretch
		{base + 20*60_000 - 5_000, base + 20*60_000},
	} {
		var want []byte
		nw, err := s.Export(stationID(1), w.from, w.to, []int{chZ, chN, chE}, func(b []byte) error { want = append(want, b...); return nil })
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		ng, err := s.ExportParts(stationID(1), w.from, w.to, []int{chZ, chN, chE}, true, func(p Part) error {
			if p.Length == 0 {
				got = append(got, p.Data...)
				return nil
			}
			if len(p.Data) > 0 || p.Length%recordLen != 0 || filepath.IsAbs(p.Path) {
				t.Fatalf("part %+v: data and a span, or a span not of records", p)
			}
			longest = max(longest, p.Length/recordLen)
			f, err := os.Open(filepath.Join(dir, "sds", p.Path))
			if err != nil {
				return err
			}
			defer f.Close()
			b := make([]byte, p.Length)
			if _, err := f.ReadAt(b, p.Offset); err != nil {
				return err
			}
			got = append(got, b...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if nw != ng || !bytes.Equal(got, want) {
			t.Errorf("window %d–%d: spans give %d records, %d bytes; the records %d, %d bytes", w.from-base, w.to-base, ng, len(got), nw, len(want))
		}
	}
	// 12 minutes of a channel after the hole are some 38 records.
	if longest < 30 {
		t.Errorf("the longest span held %d records: the runs of stored records went out as data", longest)
	}
}

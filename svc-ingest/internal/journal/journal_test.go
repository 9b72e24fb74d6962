package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func payload(i int) []byte { return []byte(fmt.Sprintf("record-%06d", i)) }

func open(t testing.TB, dir string, opts Options) *Journal {
	t.Helper()
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func readAll(t *testing.T, j *Journal, from uint64) []Entry {
	t.Helper()
	var out []Entry
	for {
		es, err := j.Read(from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
		from = es[len(es)-1].Index + 1
	}
}

func TestAppendReadReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := open(t, dir, Options{SegmentBytes: 4096, Cache: 100})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 250 {
				if _, err := j.Append(ctx, payload(w*1000+i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if j.Next() != 1000 {
		t.Fatalf("next %d", j.Next())
	}
	got := readAll(t, j, 0)
	if len(got) != 1000 {
		t.Fatalf("read %d records", len(got))
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.Index != uint64(i) || seen[string(e.Payload)] {
			t.Fatalf("entry %d: %d %q", i, e.Index, e.Payload)
		}
		seen[string(e.Payload)] = true
	}
	j.SetCursor("rts", 600)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 3 {
		t.Fatalf("only %d segments at 4 KiB each", len(segs))
	}

	j = open(t, dir, Options{SegmentBytes: 4096})
	defer j.Close()
	if j.Next() != 1000 || j.Cursor("rts") != 600 || j.Cursor("new") != 0 {
		t.Fatalf("after reopen: next %d cursor %d", j.Next(), j.Cursor("rts"))
	}
	if again := readAll(t, j, 0); len(again) != 1000 || !bytes.Equal(again[999].Payload, got[999].Payload) {
		t.Fatalf("reread %d records", len(again))
	}
	first, err := j.Append(ctx, []byte("after"), []byte("reopen"))
	if err != nil || first != 1000 {
		t.Fatalf("append after reopen: %d %v", first, err)
	}
}

// TestTornTail simulates a crash mid-write: garbage or a half frame at the
// end of the last segment is cut off and appending continues after the
// last whole record.
func TestTornTail(t *testing.T) {
	t.Parallel()
	for _, tail := range [][]byte{{0x05}, {0x20, 0, 0, 0, 1, 2, 3, 4, 'x'}, bytes.Repeat([]byte{0xff}, 100)} {
		dir := t.TempDir()
		j := open(t, dir, Options{})
		for i := range 10 {
			j.Append(context.Background(), payload(i))
		}
		j.Close()
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		f, _ := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
		f.Write(tail)
		f.Close()
		j = open(t, dir, Options{})
		if j.Next() != 10 {
			t.Fatalf("tail %x: next %d, want 10", tail, j.Next())
		}
		j.Append(context.Background(), payload(10))
		if es := readAll(t, j, 0); len(es) != 11 || string(es[10].Payload) != string(payload(10)) {
			t.Fatalf("tail %x: %d records after recovery", tail, len(es))
		}
		j.Close()
	}
}

func TestWaitAndClose(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{})
	done := make(chan error, 1)
	go func() { done <- j.Wait(context.Background(), 0) }()
	select {
	case <-done:
		t.Fatal("Wait returned on an empty journal")
	case <-time.After(20 * time.Millisecond):
	}
	j.Append(context.Background(), payload(0))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- j.Wait(context.Background(), 5) }()
	j.Close()
	if err := <-done; err != ErrClosed {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, err := j.Append(context.Background(), payload(1)); err != ErrClosed {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestTrimKeepsWhatCursorsAndRetentionNeed(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	j := open(t, t.TempDir(), Options{SegmentBytes: 200, Retention: time.Hour, Now: clock})
	defer j.Close()
	for i := range 100 {
		j.Append(context.Background(), payload(i))
	}
	j.SetCursor("rts", 100)
	j.SetCursor("waveform", 50)
	if n, _ := j.Trim(); n != 0 {
		t.Fatalf("trimmed %d segments inside the retention", n)
	}
	now = now.Add(2 * time.Hour)
	n, err := j.Trim()
	if err != nil || n == 0 {
		t.Fatalf("trimmed %d, %v", n, err)
	}
	if j.First() > 50 {
		t.Fatalf("first %d: trimmed past the waveform cursor", j.First())
	}
	if es := readAll(t, j, 0); es[0].Index != j.First() || es[len(es)-1].Index != 99 {
		t.Fatalf("after trim: %d..%d", es[0].Index, es[len(es)-1].Index)
	}
}

func BenchmarkAppend(b *testing.B) {
	j, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	p := bytes.Repeat([]byte{7}, 180)
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = p
	}
	b.SetBytes(int64(len(p) * len(batch)))
	for b.Loop() {
		j.Append(context.Background(), batch...)
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// TestScanMatchesRead: Scan, the restart's sequential read, sees exactly
// what Read sees from any index — across segments, in the active one, after
// a reopen and after a trim.
func TestScanMatchesRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	j := open(t, dir, Options{SegmentBytes: 300, Cache: 10, Now: func() time.Time { return now }})
	for i := range 200 {
		if _, err := j.Append(context.Background(), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(from uint64) {
		t.Helper()
		want := readAll(t, j, from)
		var got []Entry
		if err := j.Scan(from, func(index uint64, p []byte) {
			got = append(got, Entry{Index: index, Payload: bytes.Clone(p)})
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("from %d: scanned %d records, read %d", from, len(got), len(want))
		}
		for i := range want {
			if got[i].Index != want[i].Index || !bytes.Equal(got[i].Payload, want[i].Payload) {
				t.Fatalf("from %d, record %d: scanned %d %q, read %d %q", from, i, got[i].Index, got[i].Payload, want[i].Index, want[i].Payload)
			}
		}
	}
	for _, from := range []uint64{0, 1, 17, 150, 199, 200, 500} {
		check(from)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir, Options{SegmentBytes: 300, Now: func() time.Time { return now }})
	defer j.Close()
	j.SetCursor("rts", 120)
	if n, err := j.Trim(); err != nil || n == 0 {
		t.Fatalf("trimmed %d segments, %v", n, err)
	}
	for _, from := range []uint64{0, 130, 199} {
		check(from)
	}
}

// BenchmarkRestoreScan reads 200,000 station-sized records back as a
// restart does, with Scan and with Read.
func BenchmarkRestoreScan(b *testing.B) {
	j, err := Open(b.TempDir(), Options{Cache: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	p := bytes.Repeat([]byte{7}, 300)
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = p
	}
	const records = 200_000
	for range records / len(batch) {
		if _, err := j.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Scan", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := j.Scan(0, func(uint64, []byte) { n++ }); err != nil || n != records {
				b.Fatal(n, err)
			}
		}
		b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("Read", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for from := uint64(0); ; {
				es, err := j.Read(from, 8192)
				if err != nil {
					b.Fatal(err)
				}
				if len(es) == 0 {
					break
				}
				n += len(es)
				from = es[len(es)-1].Index + 1
			}
			if n != records {
				b.Fatal(n)
			}
		}
		b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
	})
}

// TestReadersSeeRecordsBeforeTheirSync: a commit's records reach readers
// once written, while its fsync runs (the forwarders do not wait for the
// disk), and the next commit is written meanwhile; the appends return only
// after their fsync; a cursor set past the synced end is saved at that
// end, and in full once the sync is done.
func TestReadersSeeRecordsBeforeTheirSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := open(t, dir, Options{})
	if _, err := j.Append(context.Background(), []byte("synced")); err != nil {
		t.Fatal(err)
	}
	hold, syncing := make(chan struct{}), make(chan struct{}, 2)
	j.syncFile = func(f *os.File) error {
		syncing <- struct{}{}
		<-hold
		return f.Sync()
	}
	appended := make(chan error, 1)
	go func() {
		_, err := j.Append(context.Background(), []byte("written"))
		appended <- err
	}()
	<-syncing
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait for the record being synced: %v", err)
	}
	if es := readAll(t, j, 1); len(es) != 1 || string(es[0].Payload) != "written" {
		t.Fatalf("read %v while its sync runs", es)
	}
	select {
	case err := <-appended:
		t.Fatalf("Append returned (%v) before its sync", err)
	default:
	}
	// The next commit is written while that sync still runs.
	go func() {
		_, err := j.Append(context.Background(), []byte("next"))
		appended <- err
	}()
	if err := j.Wait(ctx, 2); err != nil {
		t.Fatalf("Wait for a record written during another's sync: %v", err)
	}
	j.SetCursor("waveform", 2) // a consumer acked the unsynced record
	if err := j.SaveCursors(); err != nil {
		t.Fatal(err)
	}
	if got := savedCursors(t, dir)["waveform"]; got != 1 {
		t.Errorf("cursor saved at %d while record 1 is unsynced, want 1", got)
	}
	close(hold)
	for range 2 {
		if err := <-appended; err != nil {
			t.Fatal(err)
		}
	}
	if err := j.SaveCursors(); err != nil {
		t.Fatal(err)
	}
	if got := savedCursors(t, dir)["waveform"]; got != 2 {
		t.Errorf("cursor saved at %d after the sync, want 2", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func savedCursors(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cursors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]uint64
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

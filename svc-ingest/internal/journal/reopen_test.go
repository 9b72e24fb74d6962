package journal

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fill appends records 0..n-1 (payload(i)) to a journal of small segments
// in dir, closes it and returns the segment files, oldest first.
func fill(t *testing.T, dir string, n int) []string {
	t.Helper()
	j := open(t, dir, Options{SegmentBytes: 300})
	for i := range n {
		if _, err := j.Append(context.Background(), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 5 {
		t.Fatalf("%d segments", len(segs))
	}
	return segs
}

// damage flips a byte in the payload of the first record of the segment
// file at path.
func damage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[8] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenReadsOnlyTheNewestSegments: a journal opens without reading its
// sealed segments, only the last two (a restart after a crash waited for
// every segment of the retention to be read and checksummed), and a
// damaged sealed segment is reported to whoever reads it through Read,
// which is how records leave ingest (Scan's readers only look).
func TestOpenReadsOnlyTheNewestSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	segs := fill(t, dir, 200)
	damage(t, segs[2])
	third, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(segs[2]), ".seg"), 10, 64)

	j := open(t, dir, Options{SegmentBytes: 300})
	defer j.Close()
	if j.Next() != 200 || j.First() != 0 {
		t.Fatalf("reopened: first %d next %d, want 0 and 200", j.First(), j.Next())
	}
	if _, err := j.Read(third, 1); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("reading the damaged segment: %v", err)
	}
	// The segments after it read as ever, and appends go on.
	later, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(segs[4]), ".seg"), 10, 64)
	if es := readAll(t, j, later); len(es) != int(200-later) || !bytes.Equal(es[0].Payload, payload(int(later))) {
		t.Fatalf("read %d records from %d", len(es), later)
	}
	if first, err := j.Append(context.Background(), []byte("after")); err != nil || first != 200 {
		t.Fatalf("append: %d %v", first, err)
	}
}

// TestOpenChecksTheSegmentBeforeTheLast: the sealed segment a machine's
// crash can have left short — its last sync overlaps the next segment's
// start — is read at open; damaged or short, the journal does not open
// rather than give its missing records' indexes to new ones.
func TestOpenChecksTheSegmentBeforeTheLast(t *testing.T) {
	t.Parallel()
	for _, cut := range []func(t *testing.T, path string){
		damage,
		func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()-3); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			n := int(b[0]) + 8 // the first frame, whole
			if err := os.Truncate(path, int64(n)); err != nil {
				t.Fatal(err)
			}
		},
	} {
		dir := t.TempDir()
		segs := fill(t, dir, 100)
		cut(t, segs[len(segs)-2])
		if j, err := Open(dir, Options{SegmentBytes: 300}); err == nil {
			j.Close()
			t.Fatal("opened a journal whose segment before the last is damaged")
		}
	}
}

// TestScanOfUnreadSegments: Scan from any index over sealed segments not
// read since the journal opened gives what Read gives.
func TestScanOfUnreadSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fill(t, dir, 200)
	for _, from := range []uint64{0, 1, 17, 99, 150, 199, 200} {
		j := open(t, dir, Options{SegmentBytes: 300})
		var got []Entry
		if err := j.Scan(from, func(index uint64, p []byte) {
			got = append(got, Entry{Index: index, Payload: bytes.Clone(p)})
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != int(200-from) {
			t.Fatalf("from %d: scanned %d records", from, len(got))
		}
		for i, e := range got {
			if want := from + uint64(i); e.Index != want || !bytes.Equal(e.Payload, payload(int(want))) {
				t.Fatalf("from %d: record %d is %d %q", from, i, e.Index, e.Payload)
			}
		}
		j.Close()
	}
}

// TestSearch finds the first record past a threshold as a scan of every
// record would, in a journal just opened (sealed segments not read), one
// whose sealed segments are indexed, and one whose last segment is empty.
func TestSearch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fill(t, dir, 200)
	value := func(p []byte) int {
		n, err := strconv.Atoi(strings.TrimPrefix(string(p), "record-"))
		if err != nil {
			return -1 // unreadable: not after
		}
		return n
	}
	check := func(j *Journal, what string) {
		t.Helper()
		for _, at := range []int{-5, 0, 1, 37, 38, 99, 100, 101, 198, 199, 200, 1000} {
			got, err := j.Search(func(p []byte) bool { return value(p) >= at })
			want := uint64(min(max(at, 0), int(j.Next())))
			if err != nil || got != want {
				t.Errorf("%s: first record ≥ %d: %d, %v; want %d", what, at, got, err, want)
			}
		}
	}
	j := open(t, dir, Options{SegmentBytes: 300})
	check(j, "just opened")
	readAll(t, j, 0)
	check(j, "indexed")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A last segment full at close is followed by an empty one at open.
	dir = t.TempDir()
	j = open(t, dir, Options{SegmentBytes: 300})
	for i := range 200 {
		if _, err := j.Append(context.Background(), payload(i)); err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		rotated := j.segs[len(j.segs)-1].count == 0
		j.mu.Unlock()
		if i > 50 && rotated {
			break
		}
	}
	j.Close()
	j = open(t, dir, Options{SegmentBytes: 300})
	defer j.Close()
	if j.segs[len(j.segs)-1].count != 0 {
		t.Fatalf("last segment holds %d records", j.segs[len(j.segs)-1].count)
	}
	check(j, "ending in an empty segment")
}

// BenchmarkOpen reopens a journal of 1,000,000 station-sized records (eight
// 64 MiB segments) as a restarted ingest does, beside reading every segment
// file once, which is what opening cost before sealed segments were left
// unread.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	j, err := Open(dir, Options{Cache: 1})
	if err != nil {
		b.Fatal(err)
	}
	p := bytes.Repeat([]byte{7}, 450)
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = p
	}
	const records = 1_000_000
	for range records / len(batch) {
		if _, err := j.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("Open", func(b *testing.B) {
		for b.Loop() {
			j, err := Open(dir, Options{})
			if err != nil || j.Next() != records {
				b.Fatal(err)
			}
			j.Close()
		}
	})
	b.Run("read-every-segment", func(b *testing.B) {
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		for b.Loop() {
			for _, s := range segs {
				f, err := os.Open(s)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, f); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		}
	})
}

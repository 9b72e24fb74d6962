package journal

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fill appends records 0..n-1 (payload(i)) to a journal of small segments
// in dir, closes it and returns the segment files, oldest first.
func fill(t testing.TB, dir string, n int) []string {
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
// every segment of the retention to be read and checksummed), and the
// damage of a sealed segment is found when it is first read: the damaged
// record is passed as lost (nil), counted, and the rest read as ever.
func TestOpenReadsOnlyTheNewestSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	segs := fill(t, dir, 200)
	damage(t, segs[2])
	third, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(segs[2]), ".seg"), 10, 64)

	j := open(t, dir, Options{SegmentBytes: 300, Log: quietLog})
	defer j.Close()
	if j.Next() != 200 || j.First() != 0 {
		t.Fatalf("reopened: first %d next %d, want 0 and 200", j.First(), j.Next())
	}
	if j.Lost() != 0 {
		t.Fatalf("%d records lost before the damaged segment was read", j.Lost())
	}
	if es, err := j.Read(third, 1); err != nil || len(es) != 1 || es[0].Index != third || es[0].Payload != nil {
		t.Fatalf("reading the damaged record: %v %v", es, err)
	}
	if es := readAll(t, j, third); !lostOnly(es, third, 200, third) {
		t.Fatalf("read from the damaged record: %v", es)
	}
	if j.Lost() != 1 {
		t.Fatalf("%d records counted lost, want 1", j.Lost())
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

// TestOpenLocatesTheSegmentBeforeTheLast: the sealed segment a machine's
// crash can have left short — its last sync overlaps the next segment's
// start — is read at open; damaged or short, the journal opens with the
// records it cannot find marked lost, keeping every index where it was
// (an ingest that refused to start would leave its core blind).
func TestOpenLocatesTheSegmentBeforeTheLast(t *testing.T) {
	t.Parallel()
	for name, cut := range map[string]func(t *testing.T, path string) (lost []int){
		"damaged": func(t *testing.T, path string) []int { damage(t, path); return []int{0} },
		"short": func(t *testing.T, path string) []int {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()-3); err != nil {
				t.Fatal(err)
			}
			return []int{-1}
		},
		"one frame left": func(t *testing.T, path string) []int {
			b, _ := os.ReadFile(path)
			n := int(b[0]) + 8 // the first frame, whole
			if err := os.Truncate(path, int64(n)); err != nil {
				t.Fatal(err)
			}
			return []int{1, -1}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			segs := fill(t, dir, 100)
			lost := cut(t, segs[len(segs)-2])
			j := open(t, dir, Options{SegmentBytes: 300, Log: quietLog})
			defer j.Close()
			first := segFirst(segs[len(segs)-2])
			end := segFirst(segs[len(segs)-1])
			if j.Next() != 100 {
				t.Fatalf("next %d, want 100", j.Next())
			}
			// lost: indexes in the segment, -1 for its last; {1, -1}: all
			// but the first.
			want := map[uint64]bool{}
			for _, k := range lost {
				if k < 0 {
					want[end-1] = true
				} else {
					want[first+uint64(k)] = true
				}
			}
			if len(lost) == 2 {
				for i := first + 1; i < end; i++ {
					want[i] = true
				}
			}
			es := readAll(t, j, 0)
			if len(es) != 100 {
				t.Fatalf("read %d records, want 100", len(es))
			}
			for i, e := range es {
				if e.Index != uint64(i) || (e.Payload == nil) != want[e.Index] || (e.Payload != nil && !bytes.Equal(e.Payload, payload(i))) {
					t.Fatalf("record %d: %d %q (lost: %v)", i, e.Index, e.Payload, want[e.Index])
				}
			}
			if j.Lost() != uint64(len(want)) {
				t.Fatalf("%d counted lost, want %d", j.Lost(), len(want))
			}
			// New records take the indexes after the last, as ever.
			if i, err := j.Append(context.Background(), []byte("after")); err != nil || i != 100 {
				t.Fatalf("append: %d %v", i, err)
			}
		})
	}
}

func segFirst(path string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".seg"), 10, 64)
	return n
}

// lostOnly reports whether es are the records from..to-1, each with its
// payload but those at lost, which are nil.
func lostOnly(es []Entry, from, to uint64, lost ...uint64) bool {
	if uint64(len(es)) != to-from {
		return false
	}
	for i, e := range es {
		idx := from + uint64(i)
		if e.Index != idx {
			return false
		}
		if slices.Contains(lost, idx) {
			if e.Payload != nil {
				return false
			}
		} else if !bytes.Equal(e.Payload, payload(int(idx))) {
			return false
		}
	}
	return true
}

// TestDamageInsideASegment: a zeroed stretch inside a sealed segment of
// many records loses only the records it touches; Read passes them as lost
// and finds every later one, and Scan — reading the segment unchecked
// front to back — stops trusting its frames there and reads the rest
// checked, giving the same records.
func TestDamageInsideASegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := open(t, dir, Options{SegmentBytes: 64 << 10})
	for i := 0; i < 20000; i += 100 {
		var batch [][]byte
		for k := range 100 {
			batch = append(batch, payload(i+k))
		}
		if _, err := j.Append(context.Background(), batch...); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	path := segs[1] // sealed, not read at open
	b, _ := os.ReadFile(path)
	const at, n = 10_000, 100 // records are 21 bytes framed
	clear(b[at : at+n])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	first := segFirst(path)
	var lost []uint64
	for k := uint64(at / 21); k <= (at+n-1)/21; k++ {
		lost = append(lost, first+k)
	}

	j = open(t, dir, Options{SegmentBytes: 64 << 10, Log: quietLog})
	var scanned []Entry
	if err := j.Scan(0, func(index uint64, p []byte) {
		scanned = append(scanned, Entry{Index: index, Payload: bytes.Clone(p)})
	}); err != nil {
		t.Fatal(err)
	}
	if j.Lost() != uint64(len(lost)) {
		t.Fatalf("Scan found %d lost, want %d", j.Lost(), len(lost))
	}
	read := readAll(t, j, 0)
	if !lostOnly(read, 0, 20000, lost...) {
		t.Fatalf("read %d records; lost %v", len(read), lost)
	}
	// The record the stretch begins in has its header whole: Scan, which
	// does not checksum, passes it on damaged, as it would any record
	// damaged inside; the zeros after it are where it stops trusting.
	if i := slices.IndexFunc(scanned, func(e Entry) bool { return e.Index == lost[0] }); i >= 0 {
		scanned = slices.Delete(scanned, i, i+1)
	}
	var wantScan []Entry
	for _, e := range read {
		if e.Payload != nil {
			wantScan = append(wantScan, e)
		}
	}
	if len(scanned) != len(wantScan) {
		t.Fatalf("scanned %d records, read %d", len(scanned), len(wantScan))
	}
	for i := range scanned {
		if scanned[i].Index != wantScan[i].Index || !bytes.Equal(scanned[i].Payload, wantScan[i].Payload) {
			t.Fatalf("scanned %d %q, read %d %q", scanned[i].Index, scanned[i].Payload, wantScan[i].Index, wantScan[i].Payload)
		}
	}
	j.Close()

	// A journal opened again and read first through Read, then Search.
	j = open(t, dir, Options{SegmentBytes: 64 << 10, Log: quietLog})
	defer j.Close()
	if es := readAll(t, j, first); !lostOnly(es, first, 20000, lost...) {
		t.Fatalf("read from %d: %d records", first, len(es))
	}
	target := lost[len(lost)-1] + 1
	got, err := j.Search(func(p []byte) bool { return string(p) >= string(payload(int(target))) })
	if err != nil || got != target {
		t.Fatalf("search past the damage: %d %v, want %d", got, err, target)
	}
}

// TestZeroedTailIsNoRecords: a file system may keep a crashed append's
// length without its data — zeros. Zeros frame as empty records whose
// checksum checks; they are a torn tail, cut off, and nothing is
// appended empty.
func TestZeroedTailIsNoRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	segs := fill(t, dir, 100)
	last := segs[len(segs)-1]
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j := open(t, dir, Options{SegmentBytes: 300})
	defer j.Close()
	if j.Next() != 100 {
		t.Fatalf("next %d after a zeroed tail, want 100", j.Next())
	}
	if _, err := j.Append(context.Background(), []byte{}); err == nil {
		t.Fatal("appended an empty record")
	}
}

// FuzzDamagedSegment: whatever the bytes of a sealed segment, the journal
// opens, Read gives every index of it once, in order (a record found or
// lost), Scan and Search end, and nothing panics.
func FuzzDamagedSegment(f *testing.F) {
	dir := f.TempDir()
	segs := fill(f, dir, 60)
	for _, p := range segs[:3] {
		b, _ := os.ReadFile(p)
		f.Add(b)
		f.Add(b[:len(b)/2])
		zeroed := bytes.Clone(b)
		clear(zeroed[10:30])
		f.Add(zeroed)
	}
	f.Add([]byte{})
	files := map[string][]byte{}
	for _, p := range segs {
		files[filepath.Base(p)], _ = os.ReadFile(p)
	}
	victim := filepath.Base(segs[1])
	f.Fuzz(func(t *testing.T, seg []byte) {
		dir := t.TempDir()
		for name, b := range files {
			if name == victim {
				b = seg
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		j, err := Open(dir, Options{SegmentBytes: 300, Log: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if err := j.Scan(0, func(uint64, []byte) {}); err != nil {
			t.Fatal(err)
		}
		es := readAll(t, j, 0)
		if len(es) != 60 {
			t.Fatalf("read %d records, want 60", len(es))
		}
		for i, e := range es {
			if e.Index != uint64(i) {
				t.Fatalf("record %d has index %d", i, e.Index)
			}
		}
		if _, err := j.Search(func(p []byte) bool { return string(p) >= "record-000030" }); err != nil {
			t.Fatal(err)
		}
	})
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

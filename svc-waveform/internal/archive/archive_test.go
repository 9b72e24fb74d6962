package archive

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/seismo/mseed"
)

// clock is a settable clock for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// value is the deterministic count of a station's axis at a sample index:
// a few hundred counts of wandering signal, with now and then a jump that
// needs a wide Steim-2 packing.
func value(station, axis int, idx int64) int32 {
	h := uint64(idx)*0x9e3779b97f4a7c15 ^ uint64(station)*0xbf58476d1ce4e5b9 ^ uint64(axis)*0x94d049bb133111eb
	h ^= h >> 31
	v := int32(300*math.Sin(float64(idx)/9+float64(station))) + int32(h%41) - 20
	if h%997 == 0 {
		v += 200000
	}
	return v
}

func stationID(i int) string { return fmt.Sprintf("SIM%05d", i) }

func sensorFrame(station int, firstMs int64) Frame {
	f := Frame{Station: stationID(station), TimeMs: firstMs, RateHz: 50, ScaleGal: 0.001}
	lo := firstMs / 20
	for i := range int64(25) {
		f.UD = append(f.UD, value(station, 0, lo+i))
		f.NS = append(f.NS, value(station, 1, lo+i))
		f.EW = append(f.EW, value(station, 2, lo+i))
	}
	return f
}

func intensityValues(station int, endMs int64) [3]float32 {
	x := float32(endMs/500%1000) / 100
	return [3]float32{x + float32(station)/1000, x * 10, x / 10}
}

func intensityFrame(station int, endMs int64) Frame {
	return Frame{Station: stationID(station), Intensity: true, TimeMs: endMs, Values: intensityValues(station, endMs)}
}

type testStore struct {
	*Store
	t      *testing.T
	dir    string
	clock  *clock
	cancel context.CancelFunc
	done   chan error
}

func openTest(t *testing.T, dir string, c *clock, edit func(*Options)) *testStore {
	t.Helper()
	opts := Options{Dir: dir, Now: c.Now, CheckpointEvery: time.Hour, Log: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&opts)
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testStore{Store: s, t: t, dir: dir, clock: c, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- s.Run(ctx) }()
	t.Cleanup(func() { ts.stop() })
	return ts
}

// stop ends the commit loop and closes the store (a clean shutdown).
func (ts *testStore) stop() {
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	<-ts.done
	ts.cancel = nil
	if err := ts.Close(context.Background()); err != nil {
		ts.t.Errorf("Close: %v", err)
	}
}

// crash stops the store as a kill -9 would: nothing is flushed, written
// files stay as the OS has them.
func (ts *testStore) crash() {
	ts.cancel()
	<-ts.done
	ts.cancel = nil
	ts.mu.Lock()
	ts.closed = true
	ts.mu.Unlock()
	ts.release()
}

// apply stores frames and waits until they are durable.
func (ts *testStore) apply(frames ...Frame) []Outcome {
	ts.t.Helper()
	out := make([]Outcome, len(frames))
	lsn, err := ts.Apply(frames, out)
	if err != nil {
		ts.t.Fatalf("Apply: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.WaitDurable(ctx, lsn); err != nil {
		ts.t.Fatalf("WaitDurable: %v", err)
	}
	return out
}

// checkSamples verifies that Query returns exactly the expected samples of
// station over [startMs, endMs): every index in want, with its value, and
// nothing else.
func checkSamples(t *testing.T, s *Store, station int, startMs, endMs int64, want map[int64]bool) {
	t.Helper()
	res, err := s.Query(stationID(station), startMs, endMs, false)
	if err != nil {
		t.Fatalf("Query %s: %v", stationID(station), err)
	}
	got := map[int64]bool{}
	for _, c := range res.Chunks {
		if len(c.UD) > chunkSamples || len(c.NS) != len(c.UD) || len(c.EW) != len(c.UD) {
			t.Fatalf("chunk of %d/%d/%d samples", len(c.UD), len(c.NS), len(c.EW))
		}
		for i := range c.UD {
			idx := c.FirstMs/20 + int64(i)
			if got[idx] {
				t.Fatalf("%s: sample %d twice", stationID(station), idx)
			}
			got[idx] = true
			for axis, x := range [][]int32{c.UD, c.NS, c.EW} {
				if w := value(station, axis, idx); x[i] != w {
					t.Fatalf("%s axis %d sample %d: %d, want %d", stationID(station), axis, idx, x[i], w)
				}
			}
		}
	}
	for idx := range want {
		if idx*20 >= startMs && idx*20 < endMs && !got[idx] {
			t.Fatalf("%s: sample %d (%s) missing", stationID(station), idx, time.UnixMilli(idx*20).UTC())
		}
	}
	for idx := range got {
		if !want[idx] {
			t.Fatalf("%s: sample %d never stored", stationID(station), idx)
		}
	}
}

// diskRecords reads every record under the archive's SDS root and fails if
// two records of a channel hold the same sample: what is stored, is stored
// once. It returns the number of samples per channel code.
func diskRecords(t *testing.T, dir string) map[string]int {
	t.Helper()
	spans := map[string][]span{}
	counts := map[string]int{}
	root := filepath.Join(dir, "sds")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(b)%recordLen != 0 {
			t.Errorf("%s: %d bytes, not whole records", path, len(b))
		}
		for off := 0; off+recordLen <= len(b); off += recordLen {
			rec, err := mseed.Parse(b[off : off+recordLen])
			if err != nil {
				t.Fatalf("%s at %d: %v", path, off, err)
			}
			if !strings.HasPrefix(filepath.Base(path), rec.Network+"."+rec.Station+"."+rec.Location+"."+rec.Channel+".D.") {
				t.Fatalf("%s holds a record of %s", path, rec.SourceName())
			}
			day := rec.Start.Format("2006.002")
			if !strings.HasSuffix(path, day) || !strings.HasSuffix(path, rec.End().Add(-time.Millisecond).Format("2006.002")) {
				t.Fatalf("%s holds a record of %v–%v", path, rec.Start, rec.End())
			}
			p := int64(rec.SamplePeriod() / time.Millisecond)
			lo := rec.Start.UnixMilli() / p
			key := rec.SourceName()
			spans[key] = append(spans[key], span{lo, lo + int64(rec.NumSamples)})
			counts[rec.Channel] += rec.NumSamples
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].lo < ss[j].lo })
		for i := 1; i < len(ss); i++ {
			if ss[i].lo < ss[i-1].hi {
				t.Fatalf("%s: records %v and %v overlap", key, ss[i-1], ss[i])
			}
		}
	}
	return counts
}

func TestIvset(t *testing.T) {
	t.Parallel()
	var v ivset
	model := map[int64]bool{}
	r := rand.New(rand.NewPCG(1, 1))
	for range 3000 {
		lo := r.Int64N(2000)
		hi := lo + r.Int64N(30)
		var gaps []span
		v.gaps(lo, hi, func(a, b int64) { gaps = append(gaps, span{a, b}) })
		var want []span
		for x := lo; x < hi; x++ {
			if !model[x] {
				if n := len(want); n > 0 && want[n-1].hi == x {
					want[n-1].hi++
				} else {
					want = append(want, span{x, x + 1})
				}
			}
		}
		if !slices.Equal(gaps, want) {
			t.Fatalf("gaps(%d, %d) = %v, want %v (set %v)", lo, hi, gaps, want, v.s)
		}
		v.add(lo, hi)
		for x := lo; x < hi; x++ {
			model[x] = true
		}
		for i := 1; i < len(v.s); i++ {
			if v.s[i].lo <= v.s[i-1].hi {
				t.Fatalf("spans not merged: %v", v.s)
			}
		}
		if x := r.Int64N(2100); v.contains(x) != model[x] {
			t.Fatalf("contains(%d) = %v", x, !model[x])
		}
	}
	v.trimBelow(1000)
	if v.contains(999) || !v.contains(1000) == model[1000] {
		t.Errorf("trimBelow: %v", v.s[:1])
	}
}

// TestRoundTrip stores many stations over a window that crosses record
// boundaries and UTC midnight, with frames reordered, duplicated and
// resent, and reads back exactly what was sent, stored once.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	midnight := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC).UnixMilli()
	c := &clock{t: time.UnixMilli(midnight + 10*60*1000)}
	dir := t.TempDir()
	s := openTest(t, dir, c, nil)

	const stations = 40
	start := midnight - 90*1000 // 90 s before midnight
	const frames = 360          // 3 minutes
	r := rand.New(rand.NewPCG(7, 8))
	want := make([]map[int64]bool, stations)
	var all []Frame
	intensities := 0
	for st := range stations {
		want[st] = map[int64]bool{}
		for j := range frames {
			t0 := start + int64(j)*500
			if st%7 == 3 && j%50 == 17 {
				continue // lost for good: a gap
			}
			all = append(all, sensorFrame(st, t0), intensityFrame(st, t0+500))
			intensities++
			for i := range int64(25) {
				want[st][t0/20+i] = true
			}
		}
	}
	// Reorder locally (as late retransmissions do) and duplicate some.
	for i := range all {
		j := min(len(all)-1, i+r.IntN(40))
		all[i], all[j] = all[j], all[i]
	}
	var stored, dups int
	for len(all) > 0 {
		n := min(len(all), 1+r.IntN(300))
		batch := slices.Clone(all[:n])
		all = all[n:]
		if r.IntN(4) == 0 {
			batch = append(batch, batch[:n/3]...) // the same frame twice in a batch
		}
		for _, o := range s.apply(batch...) {
			switch o {
			case Stored:
				stored++
			case Duplicate:
				dups++
			default:
				t.Fatalf("outcome %v", o)
			}
		}
		if r.IntN(5) == 0 {
			for _, o := range s.apply(batch...) { // resent after a reconnect
				if o != Duplicate {
					t.Fatalf("resent frame: %v", o)
				}
			}
		}
	}
	if stored == 0 || dups == 0 {
		t.Fatalf("stored %d, duplicates %d", stored, dups)
	}
	// A frame overlapping stored ones by half is stored for the rest only.
	half := sensorFrame(1, start+int64(frames)*500-240)
	s.apply(half)
	for i := range int64(25) {
		want[1][half.TimeMs/20+i] = true
	}

	check := func(label string) {
		t.Helper()
		for st := range stations {
			checkSamples(t, s.Store, st, start-1000, start+int64(frames)*500+1000, want[st])
		}
		// A window inside the data, cut at odd times.
		checkSamples(t, s.Store, 5, midnight-1234, midnight+5678, want[5])
		res, err := s.Query(stationID(2), start, start+int64(frames)*500+500, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Intensity) != frames {
			t.Fatalf("%s: %d intensity frames, want %d", label, len(res.Intensity), frames)
		}
		for i, in := range res.Intensity {
			if in.WindowEndMs != start+int64(i+1)*500 || [3]float32{in.Intensity, in.PGA, in.PGV} != intensityValues(2, in.WindowEndMs) {
				t.Fatalf("%s: intensity %d: %+v", label, i, in)
			}
		}
		if res.Network != "SH" || res.Station != "00002" || res.Location != "00" || res.ScaleGal != 0.001 {
			t.Fatalf("names %+v", res)
		}
	}
	check("buffered")
	// After a checkpoint (some of it in records) and after a clean close
	// (all of it in records), the same.
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check("checkpointed")
	s.stop()
	if segs, _ := listSegments(filepath.Join(dir, "wal")); len(segs) != 0 {
		t.Fatalf("clean close left WAL segments %v", segs)
	}
	counts := diskRecords(t, dir)
	total := 0
	for st := range stations {
		total += len(want[st])
	}
	if counts["BNZ"] != total || counts["BNN"] != total || counts["BNE"] != total || counts["MXI"] != intensities {
		t.Fatalf("on disk %v, want %d samples per axis and %d intensity frames", counts, total, intensities)
	}
	s = openTest(t, dir, c, nil)
	check("reopened")
	// Day files on both sides of midnight.
	for _, day := range []string{"2025.062", "2025.063"} {
		p := filepath.Join(dir, "sds", "2025", "SH", "00003", "BNZ.D", "SH.00003.00.BNZ.D."+day)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("day file: %v", err)
		}
	}
	if st := s.Stats(); st.BufferedSamples != 0 {
		t.Errorf("reopened after a clean close with %d samples buffered", st.BufferedSamples)
	}
}

// TestCrashRecovery crashes the store (no flush, no close) at many points
// and checks after each reopening that every durable frame is there once.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 6, 1, 23, 58, 0, 0, time.UTC).UnixMilli()
	c := &clock{t: time.UnixMilli(base)}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	const stations = 12
	want := make([]map[int64]bool, stations)
	for i := range want {
		want[i] = map[int64]bool{}
	}
	next := make([]int64, stations)
	for i := range next {
		next[i] = base
	}
	for round := range 12 {
		s := openTest(t, dir, c, func(o *Options) { o.FlushAge = 5 * time.Second })
		for step := range 40 {
			var batch []Frame
			for range 1 + r.IntN(30) {
				st := r.IntN(stations)
				t0 := next[st]
				next[st] += 500
				batch = append(batch, sensorFrame(st, t0), intensityFrame(st, t0+500))
				for i := range int64(25) {
					want[st][t0/20+i] = true
				}
			}
			s.apply(batch...)
			c.Set(c.Now().Add(time.Duration(r.IntN(3000)) * time.Millisecond))
			if step%13 == 5 {
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// An entry applied but never synced may be lost; it was not acked.
		lost := sensorFrame(99, base)
		if _, err := s.Apply([]Frame{lost}, make([]Outcome, 1)); err != nil {
			t.Fatal(err)
		}
		s.crash()
		s = openTest(t, dir, c, nil)
		for st := range stations {
			checkSamplesDurable(t, s.Store, st, base-1000, next[st]+1000, want[st])
		}
		diskRecords(t, dir)
		if round%4 == 3 {
			s.stop()
		} else {
			s.crash()
		}
		_ = round
	}
}

// checkSamplesDurable is checkSamples over windows no longer than a Query
// allows.
func checkSamplesDurable(t *testing.T, s *Store, st int, from, to int64, want map[int64]bool) {
	t.Helper()
	for a := from; a < to; a += MaxQueryMs {
		checkSamples(t, s, st, a, min(a+MaxQueryMs, to), want)
	}
}

// TestRetention moves the clock instead of waiting a week.
func TestRetention(t *testing.T) {
	t.Parallel()
	day0 := time.Date(2025, 1, 10, 0, 0, 0, 0, time.UTC)
	c := &clock{t: day0.Add(12 * time.Hour)}
	dir := t.TempDir()
	s := openTest(t, dir, c, nil)
	// Ten minutes of data around noon on each of days 0–2.
	for d := range 3 {
		noon := day0.AddDate(0, 0, d).Add(12 * time.Hour)
		c.Set(noon.Add(10 * time.Minute))
		var batch []Frame
		for j := range 1200 {
			t0 := noon.UnixMilli() + int64(j)*500
			batch = append(batch, sensorFrame(1, t0), intensityFrame(1, t0+500))
		}
		s.apply(batch...)
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	usage := func() (files int, bytes int64) {
		filepath.WalkDir(filepath.Join(dir, "sds"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fi, _ := d.Info()
				files++
				bytes += fi.Size()
			}
			return nil
		})
		return
	}
	files, _ := usage()
	if files != 3*numChannels {
		t.Fatalf("%d day files, want %d", files, 3*numChannels)
	}
	has := func(d int) bool {
		noon := day0.AddDate(0, 0, d).Add(12 * time.Hour).UnixMilli()
		res, err := s.Query(stationID(1), noon, noon+60_000, true)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Chunks) > 0 && len(res.Intensity) > 0
	}
	tests := []struct {
		now      time.Time
		visible  [3]bool
		dayFiles int
	}{
		// Day 0's data is 7 days old at day 7 noon (+10 min): gone from
		// queries, its file stays until the whole day is older.
		{day0.AddDate(0, 0, 7).Add(11 * time.Hour), [3]bool{true, true, true}, 3},
		{day0.AddDate(0, 0, 7).Add(12*time.Hour + 11*time.Minute), [3]bool{false, true, true}, 3},
		{day0.AddDate(0, 0, 8).Add(time.Minute), [3]bool{false, true, true}, 2},
		{day0.AddDate(0, 0, 9).Add(11 * time.Hour), [3]bool{false, false, true}, 1},
		{day0.AddDate(0, 0, 30), [3]bool{false, false, false}, 0},
	}
	for _, tt := range tests {
		c.Set(tt.now)
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		for d, v := range tt.visible {
			if has(d) != v {
				t.Errorf("at %v: day %d visible %v, want %v", tt.now, d, !v, v)
			}
		}
		if files, _ := usage(); files != tt.dayFiles*numChannels {
			t.Errorf("at %v: %d files, want %d", tt.now, files, tt.dayFiles*numChannels)
		}
	}
	// Old frames are refused, not stored; the empty tree is pruned.
	out := s.apply(sensorFrame(1, day0.UnixMilli()+1000))
	if out[0] != Expired {
		t.Errorf("8-day-old frame: %v", out[0])
	}
	if out := s.apply(sensorFrame(1, c.Now().Add(time.Hour).UnixMilli())); out[0] != Expired {
		t.Errorf("frame from the future: %v", out[0])
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sds")); len(ents) != 0 {
		t.Errorf("SDS root keeps %d entries", len(ents))
	}
	// A restart (walking the tree) keeps it that way.
	s.stop()
	s = openTest(t, dir, c, nil)
	if files, _ := usage(); files != 0 {
		t.Errorf("%d files after restart", files)
	}
}

func TestMalformedFrames(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 5, 5, 5, 5, 0, 0, time.UTC)
	s := openTest(t, t.TempDir(), &clock{t: now}, nil)
	good := sensorFrame(1, now.UnixMilli()-60_000)
	edits := []func(*Frame){
		func(f *Frame) { f.Station = "" },
		func(f *Frame) { f.Station = strings.Repeat("x", 200) },
		func(f *Frame) { f.RateHz = 100 },
		func(f *Frame) { f.TimeMs += 7 },
		func(f *Frame) { f.TimeMs = -20 },
		func(f *Frame) { f.NS = f.NS[:3] },
		func(f *Frame) { f.UD, f.NS, f.EW = nil, nil, nil },
		func(f *Frame) { f.ScaleGal = 0 },
		func(f *Frame) { f.ScaleGal = float32(math.Inf(1)) },
		func(f *Frame) { f.ScaleGal = float32(math.NaN()) },
		func(f *Frame) { *f = intensityFrame(1, f.TimeMs+250) },
	}
	for i, edit := range edits {
		f := good
		f.UD, f.NS, f.EW = slices.Clone(f.UD), slices.Clone(f.NS), slices.Clone(f.EW)
		edit(&f)
		if out := s.apply(f); out[0] != Malformed {
			t.Errorf("edit %d: %v", i, out[0])
		}
	}
	// A frame at another count size is converted to the station's.
	s.apply(good)
	f := sensorFrame(1, good.TimeMs+500)
	f.ScaleGal = 0.002
	for i := range f.UD {
		f.UD[i] /= 2
	}
	s.apply(f)
	res, err := s.Query(stationID(1), good.TimeMs, good.TimeMs+1000, false)
	if err != nil || len(res.Chunks) != 1 || len(res.Chunks[0].UD) != 50 {
		t.Fatalf("query: %+v %v", res, err)
	}
	if got, want := res.Chunks[0].UD[25], 2*(value(1, 0, f.TimeMs/20)/2); got != want {
		t.Errorf("rescaled sample %d, want %d", got, want)
	}
	if _, err := s.Query("nobody", 0, 1000, false); err != ErrUnknownStation {
		t.Errorf("unknown station: %v", err)
	}
	for _, w := range [][2]int64{{1000, 1000}, {2000, 1000}, {-5, 100}, {0, MaxQueryMs + 1}} {
		if _, err := s.Query(stationID(1), w[0], w[1], false); err == nil {
			t.Errorf("window %v accepted", w)
		}
	}
}

// TestDirectoryLock: a second store on the same directory is refused.
func TestDirectoryLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openTest(t, dir, &clock{t: time.Now()}, nil)
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
}

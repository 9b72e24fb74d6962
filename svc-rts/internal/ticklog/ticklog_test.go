package ticklog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/compatjson"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is the first tick of the tests: the start of a UTC hour.
const t0 = int64(1_800_000_000_000) - 1_800_000_000_000%hourMs

// fleet makes the snapshots of n stations over ticks: noisy quiet values,
// some stations triggered, some carried over from an earlier frame (an
// age of 500 to 2500 ms), and a detection with its flash, as svc-rts sends
// them.
func fleet(n, ticks int, from int64, seed uint64) []*rtsv1.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]*rtsv1.Snapshot, ticks)
	for k := range ticks {
		s := &rtsv1.Snapshot{TimeMs: from + int64(k)*tickMs, Site: "TNN-1"}
		for i := range n {
			if rng.IntN(50) == 0 {
				continue // offline this tick
			}
			st := &rtsv1.StationState{
				StationId: fmt.Sprintf("%07d", 1_000_000+i*37),
				Pga:       float32(rng.Float64() * 2), Pgv: float32(rng.Float64() * 0.05),
				Intensity: float32(-2 + rng.Float64()), DisplayIntensity: float32(-1.5 + rng.Float64()*0.2),
			}
			if i%97 == 0 {
				st.Alert, st.Intensity, st.Pga = true, 3.14159, 123.4567
			}
			if (i+k)%11 == 0 {
				st.AgeMs = uint32(1+(i+k)%5) * tickMs
			}
			s.Stations = append(s.Stations, st)
		}
		if k%3 == 0 {
			s.Boxes = []*rtsv1.BoxLevel{{BoxId: 18, Level: 4}}
			s.Areas = []*rtsv1.AreaLevel{{Code: 974, Level: 4}, {Code: 970, Level: 3}}
			s.Detections = []*rtsv1.Detection{{
				Id: "1800000005500-18", Serial: uint32(k + 1), OriginTimeMs: from, Lat: 23.78, Lon: 121.67, DepthKm: 10,
				Magnitude: 6.8, Location: "花蓮縣壽豐鄉", LocationCode: 974, MaxLevel: 6, Stations: 40,
				Areas: []*rtsv1.AreaLevel{{Code: 970, Level: 5}, {Code: 974, Level: 6}}, AreaSerial: 3,
				Lpgm: []*rtsv1.StationLPGM{{StationId: "1000037", Level: 2, SvaCms: 17.3}},
			}}
		}
		out[k] = s
	}
	return out
}

// rendered is what a replay client reads of a snapshot.
func rendered(s *rtsv1.Snapshot) string {
	return string(compatjson.RTS(s)) + string(compatjson.EEW(compatjson.DefaultAuthor, s.GetDetections()))
}

// TestCodecReplaysByteForByte: a block decodes to snapshots that render
// exactly as the originals — the replay is the live stream — and equal
// them but for the station values' precision: IDs, alerts and ages are
// kept exactly.
func TestCodecReplaysByteForByte(t *testing.T) {
	t.Parallel()
	snaps := fleet(300, blockTicks, t0, 1)
	snaps[5].Stations[0].Pga = float32(math.NaN()) // printed as 0
	snaps[6].Stations = nil                        // nobody online
	snaps[7].Stations[1].Pgv = -0.0004999          // rounds to -0 and prints 0
	snaps[8].Stations[2].Intensity = 7.005         // a halfway case
	// Ages svc-rts does not send, kept all the same.
	snaps[9].Stations[0].AgeMs = 3500
	snaps[9].Stations[1].AgeMs = 250
	snaps[9].Stations[2].AgeMs = math.MaxUint32
	snaps[9].Stations[2].Alert = true
	carried := 0
	for _, s := range snaps {
		for _, st := range s.GetStations() {
			if st.GetAgeMs() > 0 {
				carried++
			}
		}
	}
	if carried < 100 {
		t.Fatalf("only %d carried values in the fleet", carried)
	}
	raw, err := encodeBlock(snaps)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBlock(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(snaps) {
		t.Fatalf("%d snapshots back, want %d", len(got), len(snaps))
	}
	for k := range snaps {
		if a, b := rendered(got[k]), rendered(snaps[k]); a != b {
			t.Fatalf("tick %d renders differently:\n got %.300s\nwant %.300s", k, a, b)
		}
		if !proto.Equal(withoutStations(got[k]), withoutStations(snaps[k])) || len(got[k].Stations) != len(snaps[k].Stations) {
			t.Fatalf("tick %d: %v", k, got[k])
		}
		for i, st := range snaps[k].GetStations() {
			if want := archived(st); !proto.Equal(got[k].Stations[i], want) {
				t.Fatalf("tick %d: station %v, want %v", k, got[k].Stations[i], want)
			}
		}
	}
}

// archived is st as the archive keeps it: its values at the precision the
// compatible JSON prints, every other field as it is.
func archived(st *rtsv1.StationState) *rtsv1.StationState {
	c := proto.Clone(st).(*rtsv1.StationState)
	c.Pga = dequantize(quantize(st.GetPga(), motionScale), motionScale)
	c.Pgv = dequantize(quantize(st.GetPgv(), motionScale), motionScale)
	c.Intensity = dequantize(quantize(st.GetIntensity(), intensityScale), intensityScale)
	c.DisplayIntensity = dequantize(quantize(st.GetDisplayIntensity(), intensityScale), intensityScale)
	return c
}

// TestReadsArchiveWrittenBeforeAge: an hour file written before age_ms was
// on the wire (testdata/v0, by the codec of commit a46447a, from
// fleet(8, 25, t0, 9)) still reads, every station with age 0 — what those
// snapshots carried.
func TestReadsArchiveWrittenBeforeAge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := fileName(t0)
	old, err := os.ReadFile(filepath.Join("testdata", "v0", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), old, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range fleet(8, 25, t0, 9) {
		got, err := l.At(want.GetTimeMs())
		if err != nil {
			t.Fatalf("tick %d: %v", want.GetTimeMs(), err)
		}
		if len(got.GetStations()) != len(want.GetStations()) {
			t.Fatalf("tick %d: %d stations, want %d", want.GetTimeMs(), len(got.GetStations()), len(want.GetStations()))
		}
		for i, st := range want.GetStations() {
			st.AgeMs = 0 // not on the wire then
			if w := archived(st); !proto.Equal(got.Stations[i], w) {
				t.Fatalf("tick %d: station %v, want %v", want.GetTimeMs(), got.Stations[i], w)
			}
		}
		if rendered(got) != rendered(want) {
			t.Fatalf("tick %d renders differently", want.GetTimeMs())
		}
	}
}

func withoutStations(s *rtsv1.Snapshot) *rtsv1.Snapshot {
	c := proto.Clone(s).(*rtsv1.Snapshot)
	c.Stations = nil
	return c
}

// TestQuantizeRoundTrip: for any float32, the value the archive keeps
// prints as the original prints.
func TestQuantizeRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2, 2))
	for range 200_000 {
		v := float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*5-2))
		for _, scale := range []float64{motionScale, intensityScale} {
			s := &rtsv1.Snapshot{Stations: []*rtsv1.StationState{{StationId: "x", Pga: v, Intensity: v}}}
			back := &rtsv1.Snapshot{Stations: []*rtsv1.StationState{{StationId: "x",
				Pga: dequantize(quantize(v, motionScale), motionScale), Intensity: dequantize(quantize(v, intensityScale), intensityScale)}}}
			if a, b := compatjson.RTS(back), compatjson.RTS(s); !bytes.Equal(a, b) {
				t.Fatalf("%v (scale %v): %s, want %s", v, scale, a, b)
			}
		}
	}
}

// TestStationFieldsCovered fails when StationState gains a field the codec
// does not store: a replay would silently lose it.
func TestStationFieldsCovered(t *testing.T) {
	t.Parallel()
	if n := (&rtsv1.StationState{}).ProtoReflect().Descriptor().Fields().Len(); n != stationFields {
		t.Fatalf("StationState has %d fields, the archive stores %d: extend encodeBlock and decodeBlock", n, stationFields)
	}
}

// TestLogAppendAt: every tick appended is found — while its block is
// open, sealed, written — and again after a restart; ticks not computed
// are NotFound, later ones Future, and a clock stepping back changes
// nothing.
func TestLogAppendAt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	// An hour boundary inside the run, and a gap of skipped ticks.
	from := t0 + hourMs - 30*tickMs
	snaps := fleet(50, 100, from, 3)
	snaps = append(snaps[:40], snaps[45:]...)
	for i, s := range snaps {
		l.Append(s)
		// Any tick so far, whatever state its block is in.
		old := snaps[i/2]
		got, err := l.At(old.GetTimeMs() + 499)
		if err != nil || rendered(got) != rendered(old) {
			t.Fatalf("after appending %d: tick %d: %v", s.GetTimeMs(), old.GetTimeMs(), err)
		}
	}
	l.Append(snaps[10]) // a clock stepped back: ignored
	if _, err := l.At(from + 41*tickMs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("skipped tick: %v", err)
	}
	if _, err := l.At(from + 1000*tickMs); !errors.Is(err, ErrFuture) {
		t.Fatalf("future tick: %v", err)
	}
	if _, err := l.At(from - tickMs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tick before the archive: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Dropped != 0 || st.Blocks == 0 {
		t.Fatalf("stats %+v", st)
	}

	// A restart finds everything, also the block that was open.
	l2, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		got, err := l2.At(s.GetTimeMs())
		if err != nil || rendered(got) != rendered(s) {
			t.Fatalf("after restart: tick %d: %v", s.GetTimeMs(), err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+fileSuffix))
	if len(files) != 2 {
		t.Fatalf("files %v, want one per hour", files)
	}
}

// TestTornBlockCutOff: a block half written when the process died is cut
// off at the next start; the blocks before it are served and appending
// goes on after them.
func TestTornBlockCutOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	snaps := fleet(20, 3*blockTicks, t0, 4)
	for _, s := range snaps[:2*blockTicks+1] {
		l.Append(s)
	}
	for range 2 {
		l.write(<-l.queue)
	}
	path := filepath.Join(dir, fileName(t0))
	fi, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{200, 1, 0, 0, 9, 9, 9}) // a frame header cut short
	f.Close()

	l2, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(path); fi2.Size() != fi.Size() {
		t.Fatalf("size %d after opening, want %d", fi2.Size(), fi.Size())
	}
	if got, err := l2.At(snaps[blockTicks+3].GetTimeMs()); err != nil || rendered(got) != rendered(snaps[blockTicks+3]) {
		t.Fatalf("second block: %v", err)
	}
	for _, s := range snaps[2*blockTicks:] {
		l2.Append(s)
	}
	for len(l2.queue) > 0 {
		l2.write(<-l2.queue)
	}
	l2.mu.Lock()
	l2.sealLocked()
	l2.mu.Unlock()
	l2.write(<-l2.queue)
	l3, err := Open(dir, 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l3.At(snaps[len(snaps)-1].GetTimeMs()); err != nil || rendered(got) != rendered(snaps[len(snaps)-1]) {
		t.Fatalf("after the cut: %v", err)
	}
}

// TestExpire: hours older than the retention are removed and no longer
// served.
func TestExpire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, 2*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{t0, t0 + 3*hourMs} {
		for _, s := range fleet(5, 2, from, 5) {
			l.Append(s)
		}
		l.mu.Lock()
		l.sealLocked()
		l.mu.Unlock()
		l.write(<-l.queue)
	}
	l.expire(time.UnixMilli(t0 + 4*hourMs))
	if _, err := l.At(t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired tick: %v", err)
	}
	if _, err := l.At(t0 + 3*hourMs); err != nil {
		t.Fatalf("kept tick: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*"+fileSuffix)); len(files) != 1 {
		t.Fatalf("files %v", files)
	}
}

// FuzzDecodeBlock: a damaged block is refused, never a panic or an
// allocation beyond the block's own claims.
func FuzzDecodeBlock(f *testing.F) {
	for _, n := range []int{0, 1, 5} {
		raw, _ := encodeBlock(fleet(n+1, 3, t0, uint64(n)))
		f.Add(raw)
	}
	escaped := fleet(2, 2, t0, 8)
	escaped[1].Stations[0].AgeMs = 1234
	raw, _ := encodeBlock(escaped)
	f.Add(raw)
	f.Add([]byte{255, 255, 255, 255, 15})
	f.Fuzz(func(t *testing.T, raw []byte) {
		snaps, err := decodeBlock(raw, t0)
		if err == nil && len(snaps) > maxBlockTicks {
			t.Fatalf("%d snapshots", len(snaps))
		}
		// A payload that decodes whole decodes tick by tick to the same.
		// whatever order the ticks are asked in.
		if err != nil {
			return
		}
		br, err := newBlockReader(raw, t0)
		if err != nil {
			t.Fatalf("decodes whole but not its header: %v", err)
		}
		for _, k := range []int{len(snaps) - 1, 0, len(snaps) / 2, len(snaps)/2 + 1} {
			if k < 0 || k >= len(snaps) {
				continue
			}
			one, err := br.at(snaps[k].GetTimeMs())
			if err != nil || !proto.Equal(one, snaps[k]) {
				t.Fatalf("tick %d alone: %v, %v; whole: %v", snaps[k].GetTimeMs(), one, err, snaps[k])
			}
		}
	})
}

// TestBlockReader: one tick read alone is the tick decoded with its
// block, for every tick and in any order (onwards, back, the same twice);
// a tick the block does not hold is not found, and a damaged payload is
// an error, not a panic.
func TestBlockReader(t *testing.T) {
	t.Parallel()
	snaps := fleet(300, blockTicks, t0, 9)
	snaps = append(snaps[:4], snaps[5:]...) // a tick missing: the core was behind
	raw, err := encodeBlock(snaps)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := decodeBlock(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	br, err := newBlockReader(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	order := []int{0, 1, 2, 2, 7, 3, len(whole) - 1, 0}
	for k := range whole {
		order = append(order, k)
	}
	for _, k := range order {
		one, err := br.at(whole[k].GetTimeMs())
		if err != nil {
			t.Fatalf("tick %d: %v", k, err)
		}
		if !proto.Equal(one, whole[k]) || rendered(one) != rendered(snaps[k]) {
			t.Fatalf("tick %d alone differs:\n got %.300s\nwant %.300s", k, rendered(one), rendered(snaps[k]))
		}
	}
	for _, ms := range []int64{t0 + 4*tickMs, t0 - tickMs, t0 + blockTicks*tickMs, t0 + 1} {
		if s, err := br.at(ms); !errors.Is(err, ErrNotFound) {
			t.Errorf("tick %d: %v, %v; want ErrNotFound", ms, s, err)
		}
	}
	half, err := newBlockReader(raw[:len(raw)/2], t0)
	if err != nil {
		t.Fatal(err) // the header is whole
	}
	if _, err := half.at(snaps[len(snaps)-1].GetTimeMs()); !errors.Is(err, errCorrupt) {
		t.Errorf("half a payload: %v, want errCorrupt", err)
	}
	if s, err := half.at(t0); err != nil || !proto.Equal(s, whole[0]) {
		t.Errorf("the first tick of half a payload after an error: %v, %v", s, err)
	}
}

// TestReplayCacheBounded: a replay client reading tick after tick through
// many archived blocks leaves the archive holding no more than its cache
// bound — compact payloads, not decoded snapshots — and reads from the
// cache what it read from disk. Not parallel: it measures the heap.
func TestReplayCacheBounded(t *testing.T) {
	l, err := Open(t.TempDir(), 7*24*time.Hour, quiet)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 3 * cacheBlocks
	for k := range blocks + 1 {
		for _, s := range fleet(1000, blockTicks, t0+int64(k*blockTicks)*tickMs, uint64(k)) {
			l.Append(s)
		}
		for len(l.queue) > 0 {
			l.write(<-l.queue)
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for k := range blocks {
		for i := range blockTicks {
			ms := t0 + int64(k*blockTicks+i)*tickMs
			first, err := l.At(ms)
			if err != nil || first.GetTimeMs() != ms {
				t.Fatalf("tick %d: %v, %v", ms, first, err)
			}
			again, err := l.At(ms)
			if err != nil || !proto.Equal(first, again) {
				t.Fatalf("tick %d from the cache: %v", ms, err)
			}
		}
	}
	grew := int64(heap()) - int64(before)
	l.mu.Lock()
	held, n := 0, len(l.cache)
	for _, c := range l.cache {
		held += c.br.size()
	}
	l.mu.Unlock()
	t.Logf("cache: %d blocks, %d kB of payload; heap grew %d kB", n, held>>10, grew>>10)
	if n > cacheBlocks || (n > 1 && held > cacheBytes) {
		t.Errorf("cache holds %d blocks, %d bytes: over its bound", n, held)
	}
	// Decoded, the 16 blocks the cache may hold would take over 40 MB.
	if grew > 2*cacheBytes {
		t.Errorf("the heap grew by %d kB reading the archive, more than twice the cache bound", grew>>10)
	}
}

// BenchmarkArchive appends the ticks of 1,000 stations and reads them back:
// the bytes per tick on disk, the time of a read of a block the cache does
// not hold (miss), and of a replay client's read of the next tick, mostly
// from the cache (consecutive); the heap the archive holds after the reads
// (retained-kB, after a collection).
//
//	cd svc-rts && go test -run '^$' -bench Archive -benchtime 2000x ./internal/ticklog/
func BenchmarkArchive(b *testing.B) {
	snaps := fleet(1000, 200, t0, 6)
	l, err := Open(b.TempDir(), 7*24*time.Hour, quiet)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range snaps {
		l.Append(s)
		for len(l.queue) > 0 {
			l.write(<-l.queue)
		}
	}
	st := l.Stats()
	var raw int
	for _, s := range snaps[:blockTicks] {
		raw += proto.Size(s)
	}
	stored := len(snaps) - len(l.open) // the open block is read from memory
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	read := func(b *testing.B, tick func(i int) int, miss bool) {
		l.mu.Lock()
		l.cache = nil
		l.mu.Unlock()
		before := heap()
		b.ResetTimer()
		for i := range b.N {
			if miss {
				l.mu.Lock()
				l.cache = nil
				l.mu.Unlock()
			}
			if _, err := l.At(snaps[tick(i)].GetTimeMs()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(int64(heap())-int64(before))/1024, "retained-kB")
		b.ReportMetric(float64(st.Bytes)/float64(st.Blocks*blockTicks), "bytes/tick")
		b.ReportMetric(float64(raw)/blockTicks, "proto-bytes/tick")
	}
	b.Run("miss", func(b *testing.B) { read(b, func(i int) int { return (i * 2) % stored }, true) })
	b.Run("consecutive", func(b *testing.B) { read(b, func(i int) int { return i % stored }, false) })
}

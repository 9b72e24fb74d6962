package archive

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
)

// Limits of one request.
const (
	// MaxQueryMs is the longest window of Query.
	MaxQueryMs = 60 * 60 * 1000
	// MaxExportMs is the longest window of Export.
	MaxExportMs = dayMs
	// chunkSamples is the longest chunk Query returns (60 s).
	chunkSamples = 3000
	// exportPart is how much miniSEED Export hands over at a time.
	exportPart = 64 * recordLen
)

// Result is what Query found.
type Result struct {
	// SEED names of the station's channels.
	Network, Station, Location string
	// ScaleGal is the station's count size: counts × ScaleGal = gal.
	ScaleGal float32
	// Chunks are contiguous runs of three-axis samples, at most 60 s each.
	Chunks []Chunk
	// Intensity is the intensity series, when asked for.
	Intensity []Intensity
}

// Chunk is a contiguous run of samples of all three axes.
type Chunk struct {
	FirstMs    int64
	NS, EW, UD []int32
}

// Intensity is one stored intensity frame.
type Intensity struct {
	WindowEndMs         int64
	Intensity, PGA, PGV float32
}

// stretch is a sequence of consecutive records of a day file, each
// starting where the one before it ended: their start times increase, so
// it can be binary-searched, the end of one is the start of the next, and
// a run of them covers its time without a gap (an export hands such runs
// over unread). A file written in order is one stretch, or one between
// each two gaps; a late record that goes back in time starts another.
type stretch struct {
	first, last int64 // offsets of the first and last record
	lo, hi      int64 // first record's start, last record's end (sample indexes)
}

// fileIndex locates records in a day file: built by reading the headers
// the first time a query needs the file, then kept up to date as records
// are written.
type fileIndex struct {
	upto      int64 // bytes of the file covered
	stretches []stretch
}

func (x *fileIndex) appendRecord(off, lo, hi int64) {
	if off != x.upto {
		return // a later query scans what is missing
	}
	x.upto = off + recordLen
	if n := len(x.stretches); n > 0 {
		s := &x.stretches[n-1]
		if s.last+recordLen == off && lo == s.hi {
			s.last, s.hi = off, hi
			return
		}
	}
	x.stretches = append(x.stretches, stretch{first: off, last: off, lo: lo, hi: hi})
}

func (x *fileIndex) clone() *fileIndex {
	if x == nil {
		return &fileIndex{}
	}
	return &fileIndex{upto: x.upto, stretches: append([]stretch(nil), x.stretches...)}
}

// sampleRange reads the sample span of the record header at b.
func sampleRange(b []byte, periodMs int64) (lo, hi int64, ok bool) {
	h, err := mseed.ParseHeader(b)
	if err != nil || h.RecordLen != recordLen {
		return 0, 0, false
	}
	ms := h.Start.UnixMilli()
	if ms%periodMs != 0 {
		return 0, 0, false
	}
	lo = ms / periodMs
	return lo, lo + int64(h.NumSamples), true
}

// scan extends the index over [x.upto, to) of file f.
func (x *fileIndex) scan(f *os.File, to, periodMs int64) error {
	buf := make([]byte, 128*recordLen)
	for x.upto < to {
		n := min(int64(len(buf)), to-x.upto)
		if _, err := f.ReadAt(buf[:n], x.upto); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for k := int64(0); k+recordLen <= n; k += recordLen {
			off := x.upto
			if lo, hi, ok := sampleRange(buf[k:k+recordLen], periodMs); ok {
				x.appendRecord(off, lo, hi)
			} else {
				x.upto += recordLen // unreadable: skipped, and it breaks the stretch
			}
		}
		if n < recordLen {
			break
		}
	}
	return nil
}

// window is a dense view of one channel over sample indexes [a, a+len).
type window struct {
	a    int64
	vals []int32
	have []uint64
}

func newWindow(a, b int64) *window {
	n := max(b-a, 0)
	return &window{a: a, vals: make([]int32, n), have: make([]uint64, (n+63)/64)}
}

func (w *window) put(lo int64, x []int32) {
	end := w.a + int64(len(w.vals))
	for i, v := range x {
		j := lo + int64(i)
		if j < w.a || j >= end {
			continue
		}
		k := j - w.a
		w.vals[k] = v
		w.have[k/64] |= 1 << (k % 64)
	}
}

func (w *window) has(k int64) bool { return w.have[k/64]&(1<<(k%64)) != 0 }

// putRecord decodes a record into the window.
func (w *window) putRecord(b []byte, periodMs int64) {
	rec, err := mseed.Parse(b)
	if err != nil || rec.Start.UnixMilli()%periodMs != 0 {
		return
	}
	lo := rec.Start.UnixMilli() / periodMs
	if rec.Floats != nil {
		x := make([]int32, len(rec.Floats))
		for i, f := range rec.Floats {
			x[i] = int32(math.Float32bits(float32(f)))
		}
		w.put(lo, x)
		return
	}
	w.put(lo, rec.Ints)
}

// chanSnap is what a read of one channel needs, taken under the lock.
type chanSnap struct {
	kind    *chanKind
	files   []fileSnap
	pending [][]byte
	runs    []span
	samples [][]int32
}

type fileSnap struct {
	df      *dayFile
	path    string
	written int64
	idx     *fileIndex
}

// snapChannel copies, under s.mu, what is in memory of channel c over
// [a, b) and where its files stand.
func (s *Store) snapChannel(st *station, c int, a, b int64) chanSnap {
	ch := &st.ch[c]
	k := ch.kind
	snap := chanSnap{kind: k}
	for day := dayOf(a * k.periodMs); day <= dayOf((b-1)*k.periodMs); day++ {
		f := s.dayFile(st, ch, day)
		if f.written > 0 {
			snap.files = append(snap.files, fileSnap{df: f, path: f.path, written: f.written, idx: f.idx.clone()})
		}
	}
	for _, p := range ch.pending {
		if p.lo < b && p.hi > a {
			snap.pending = append(snap.pending, p.buf)
		}
	}
	for _, r := range ch.runs {
		lo, hi := max(r.start, a), min(r.end(), b)
		if lo < hi {
			snap.runs = append(snap.runs, span{lo, hi})
			snap.samples = append(snap.samples, append([]int32(nil), r.x[lo-r.start:hi-r.start]...))
		}
	}
	return snap
}

// fill reads a snapshot into a window over [a, b).
func (s *Store) fill(snap *chanSnap, a, b int64) (*window, error) {
	w := newWindow(a, b)
	period := snap.kind.periodMs
	for i := range snap.files {
		if err := s.readFile(&snap.files[i], w, a, b, period); err != nil {
			return nil, err
		}
	}
	for _, p := range snap.pending {
		w.putRecord(p, period)
	}
	for i, r := range snap.runs {
		w.put(r.lo, snap.samples[i])
	}
	return w, nil
}

// readFile puts the records of a day file that overlap [a, b) into w.
func (s *Store) readFile(fsnap *fileSnap, w *window, a, b, period int64) error {
	return s.eachRecord(fsnap, a, b, period, false, nil, func(rec []byte, _ int64) { w.putRecord(rec, period) })
}

// eachRecord calls fn with each record of a day file that may overlap
// [a, b) (fn checks), in file order, with its offset in the file; rec is
// valid during the call only,
// unless keep: then each read has a buffer of its own, and fn may keep
// the records it is given (one allocation per 32 records, not one each).
// whole, when not nil, is offered each stretch first, with its
// records' count and their starts to search, and may take records k0 to k1
// (inclusive) of it unread: fn is not called with them.
func (s *Store) eachRecord(fsnap *fileSnap, a, b, period int64, keep bool, whole wholeFunc, fn func(rec []byte, off int64)) error {
	f, err := os.Open(filepath.Join(s.sds, fsnap.path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // expired meanwhile
	}
	if err != nil {
		return fmt.Errorf("open day file: %w", err)
	}
	defer f.Close()
	idx := fsnap.idx
	if idx.upto < fsnap.written {
		if err := idx.scan(f, fsnap.written, period); err != nil {
			return fmt.Errorf("index day file: %w", err)
		}
		s.mu.Lock()
		if fsnap.df.idx == nil || fsnap.df.idx.upto < idx.upto {
			fsnap.df.idx = idx.clone()
		}
		s.mu.Unlock()
	}
	hdr := make([]byte, mseed.DataOffset)
	startOf := func(off int64) (int64, bool) {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return 0, false
		}
		lo, _, ok := sampleRange(hdr, period)
		return lo, ok
	}
	var buf []byte
	if !keep {
		buf = make([]byte, 32*recordLen)
	}
	for _, st := range idx.stretches {
		if st.lo >= b || st.hi <= a {
			continue
		}
		count := (st.last-st.first)/recordLen + 1
		// The first record starting at or after a; the one before it may
		// reach into the window too.
		k := int64(sort.Search(int(count), func(i int) bool {
			lo, ok := startOf(st.first + int64(i)*recordLen)
			return !ok || lo >= a
		}))
		k = max(k-1, 0)
		skip, skipTo := int64(-1), int64(-1) // offsets of the first and last record whole took
		if whole != nil {
			if k0, k1, ok := whole(&st, count, startOf); ok {
				skip, skipTo = st.first+k0*recordLen, st.first+k1*recordLen
			}
		}
		for off := st.first + k*recordLen; off <= st.last; {
			if off == skip {
				off = skipTo + recordLen
				continue
			}
			if keep {
				buf = make([]byte, 32*recordLen) // the last read's records are fn's
			}
			n := min(int64(len(buf)), st.last+recordLen-off)
			if off < skip {
				n = min(n, skip-off)
			}
			if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read day file: %w", err)
			}
			done := false
			for j := int64(0); j+recordLen <= n; j += recordLen {
				lo, _, ok := sampleRange(buf[j:j+recordLen], period)
				if ok && lo >= b {
					done = true
					break
				}
				if ok {
					fn(buf[j:j+recordLen], off+j)
				}
			}
			if done {
				break
			}
			off += n
		}
	}
	return nil
}

// snapChannels takes, under the lock, what reading channels chans of
// station id over the sample indexes in [startMs, endMs) needs, and those
// indexes per channel.
func (s *Store) snapChannels(id string, startMs, endMs int64, chans []int) (*station, []chanSnap, []span, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stations[id]
	if st == nil {
		return nil, nil, nil, ErrUnknownStation
	}
	snaps := make([]chanSnap, len(chans))
	ranges := make([]span, len(chans))
	for i, c := range chans {
		p := kinds[c].periodMs
		a, b := ceilDiv(startMs, p), ceilDiv(endMs, p)
		ranges[i] = span{a, max(a, b)}
		if a < b {
			snaps[i] = s.snapChannel(st, c, a, b)
		}
	}
	return st, snaps, ranges, nil
}

// read returns the windows of the given channels of station id over the
// sample indexes that fall in [startMs, endMs).
func (s *Store) read(id string, startMs, endMs int64, chans []int) (*station, []*window, error) {
	now := s.opts.Now().UnixMilli()
	startMs = max(startMs, now-s.opts.Retention.Milliseconds())
	st, snaps, ranges, err := s.snapChannels(id, startMs, endMs, chans)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*window, len(chans))
	for i := range chans {
		if ranges[i].lo >= ranges[i].hi {
			out[i] = newWindow(ranges[i].lo, ranges[i].lo)
			continue
		}
		w, err := s.fill(&snaps[i], ranges[i].lo, ranges[i].hi)
		if err != nil {
			return nil, nil, err
		}
		out[i] = w
	}
	return st, out, nil
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

func checkWindow(startMs, endMs, maxMs int64) error {
	if startMs < 0 || endMs <= startMs {
		return fmt.Errorf("%w: end must be after start", ErrWindow)
	}
	if endMs-startMs > maxMs {
		return fmt.Errorf("%w: longer than %s", ErrWindow, time.Duration(maxMs)*time.Millisecond)
	}
	return nil
}

// Query returns what the archive holds of station id in [startMs, endMs)
// (at most MaxQueryMs): the samples whose time is in the window and, with
// withIntensity, the intensity frames whose window end is.
func (s *Store) Query(id string, startMs, endMs int64, withIntensity bool) (*Result, error) {
	if err := checkWindow(startMs, endMs, MaxQueryMs); err != nil {
		return nil, err
	}
	chans := []int{chZ, chN, chE}
	if withIntensity {
		chans = append(chans, chI, chA, chV)
	}
	st, ws, err := s.read(id, startMs, endMs, chans)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	res := &Result{Network: st.net, Station: st.sta, Location: st.loc, ScaleGal: st.scale}
	s.mu.Unlock()
	z, n, e := ws[0], ws[1], ws[2]
	for k := int64(0); k < int64(len(z.vals)); {
		if !(z.has(k) && n.has(k) && e.has(k)) {
			k++
			continue
		}
		j := k
		for j < int64(len(z.vals)) && j-k < chunkSamples && z.has(j) && n.has(j) && e.has(j) {
			j++
		}
		res.Chunks = append(res.Chunks, Chunk{
			FirstMs: (z.a + k) * kinds[chZ].periodMs,
			UD:      append([]int32(nil), z.vals[k:j]...),
			NS:      append([]int32(nil), n.vals[k:j]...),
			EW:      append([]int32(nil), e.vals[k:j]...),
		})
		k = j
	}
	if withIntensity {
		iw, aw, vw := ws[3], ws[4], ws[5]
		for k := range int64(len(iw.vals)) {
			if iw.has(k) && aw.has(k) && vw.has(k) {
				res.Intensity = append(res.Intensity, Intensity{
					WindowEndMs: (iw.a + k) * kinds[chI].periodMs,
					Intensity:   math.Float32frombits(uint32(iw.vals[k])),
					PGA:         math.Float32frombits(uint32(aw.vals[k])),
					PGV:         math.Float32frombits(uint32(vw.vals[k])),
				})
			}
		}
	}
	return res, nil
}

// Names returns the SEED codes station id is archived under.
func (s *Store) Names(id string) (seedcode.Codes, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stations[id]
	if st == nil {
		return seedcode.Codes{}, false
	}
	return seedcode.Codes{Network: st.net, Station: st.sta, Location: st.loc}, true
}

// ExportChannels returns the channels Export writes for SEED channel codes
// (nil: BNZ, BNN, BNE, and with withIntensity MXI, MXA, MXV): an error names
// a code the archive does not keep, or one given twice.
func ExportChannels(codes []string, withIntensity bool) ([]int, error) {
	if len(codes) == 0 {
		if withIntensity {
			return []int{chZ, chN, chE, chI, chA, chV}, nil
		}
		return []int{chZ, chN, chE}, nil
	}
	if len(codes) > numChannels {
		return nil, fmt.Errorf("%w: %d channels, at most %d", ErrChannel, len(codes), numChannels)
	}
	out := make([]int, 0, len(codes))
	for _, code := range codes {
		c := slices.IndexFunc(kinds[:], func(k chanKind) bool { return k.code == code })
		switch {
		case c < 0:
			return nil, fmt.Errorf("%w: %.8q is not archived (BNZ, BNN, BNE, MXI, MXA, MXV)", ErrChannel, code)
		case slices.Contains(out, c):
			return nil, fmt.Errorf("%w: %s given twice", ErrChannel, code)
		}
		out = append(out, c)
	}
	return out, nil
}

// Export writes what the archive holds of station id in [startMs, endMs)
// (at most MaxExportMs) as miniSEED records, cut to the window, to emit in
// parts of whole records: per hour of the window, channel by channel in
// the order of chans (ExportChannels). It returns the number of records;
// none is not an error.
func (s *Store) Export(id string, startMs, endMs int64, chans []int, emit func([]byte) error) (int, error) {
	return s.ExportParts(id, startMs, endMs, chans, false, func(p Part) error { return emit(p.Data) })
}

// Part is a piece of an export, in order: records in Data, or, in an
// export asked for spans, a run of stored records as they lie in a day
// file: Length bytes at Offset of Path, relative to the SDS root.
type Part struct {
	Data           []byte
	Path           string
	Offset, Length int64
}

// ExportParts is Export, and with spans it hands the stored records that go
// out as they are on disk over as spans of their day files, for a reader
// that shares the archive's disk to send them itself, unread here (a day
// of a channel is some 6,000 records in one or a few spans). A span is
// valid while its file exists: day files are only appended to, and
// removed whole when they expire.
func (s *Store) ExportParts(id string, startMs, endMs int64, chans []int, spans bool, emit func(Part) error) (int, error) {
	if err := checkWindow(startMs, endMs, MaxExportMs); err != nil {
		return 0, err
	}
	var out []byte
	var run Part // the span growing, Length 0 for none
	records := 0
	flush := func() error {
		if run.Length > 0 {
			err := emit(run)
			run = Part{}
			if err != nil {
				return err
			}
		}
		if len(out) == 0 {
			return nil
		}
		err := emit(Part{Data: out})
		out = out[:0]
		return err
	}
	const hourMs = 60 * 60 * 1000
	now := s.opts.Now().UnixMilli()
	startMs = max(startMs, now-s.opts.Retention.Milliseconds())
	states := make([]exportState, len(chans))
	for i, c := range chans {
		p := kinds[c].periodMs
		states[i] = exportState{from: ceilDiv(startMs, p), to: ceilDiv(endMs, p), maxDone: math.MinInt64}
	}
	for t := startMs; t < endMs; t += hourMs {
		tEnd := min(t+hourMs, endMs)
		st, snaps, ranges, err := s.snapChannels(id, t, tEnd, chans)
		if err != nil {
			return records, err
		}
		s.mu.Lock()
		net, sta, loc := st.net, st.sta, st.loc
		s.mu.Unlock()
		for i, c := range chans {
			if ranges[i].lo >= ranges[i].hi {
				continue
			}
			err := s.exportChannel(&snaps[i], &kinds[c], ranges[i].lo, ranges[i].hi, &states[i], net, sta, loc, spans, &records, func(p piece) error {
				if spans && p.path != "" {
					if run.Length > 0 && (run.Path != p.path || run.Offset+run.Length != p.off) {
						if err := flush(); err != nil {
							return err
						}
					}
					if len(out) > 0 {
						if err := flush(); err != nil {
							return err
						}
					}
					if run.Length == 0 {
						run = Part{Path: p.path, Offset: p.off}
					}
					run.Length += p.n * recordLen
					return nil
				}
				if run.Length > 0 {
					if err := flush(); err != nil {
						return err
					}
				}
				out = append(out, p.rec...)
				if len(out) >= exportPart {
					return flush()
				}
				return nil
			})
			if err != nil {
				return records, err
			}
		}
	}
	return records, flush()
}

// Stats describes the store's state, for tests and benchmarks.
type Stats struct {
	Stations        int
	BufferedSamples int
	PendingRecords  int
	WALSegments     int
}

// Stats returns the current state.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{Stations: len(s.stations), PendingRecords: len(s.pending)}
	for _, x := range s.order {
		for c := range x.ch {
			for _, r := range x.ch[c].runs {
				st.BufferedSamples += len(r.x)
			}
		}
	}
	s.mu.Unlock()
	segs, _ := listSegments(s.walDir)
	st.WALSegments = len(segs)
	return st
}

// wholeFunc chooses records k0 to k1 of a stretch of count records
// to hand over unread; start reads the start of the record at an offset.
type wholeFunc func(st *stretch, count int64, start func(off int64) (int64, bool)) (k0, k1 int64, ok bool)

// piece is a record of an export, by the index of its first sample: its
// bytes, or, in an export of spans, where it lies on disk when it goes out
// as it is stored there — then n records from there (path "" otherwise).
type piece struct {
	lo   int64
	rec  []byte
	path string
	off  int64
	n    int64
}

// exportState is what an export carries from one hour to the next, per
// channel.
type exportState struct {
	from, to int64 // the export's window, sample indexes
	// maxDone is the end of the last record handed over as stored; tail
	// is that record when it reaches into the next hour, which then skips
	// it.
	maxDone int64
	tail    span
}

// exportChannel emits, in time order, the records of one channel over the
// hour's sample indexes [a, b). A stored record that starts in the hour
// and lies wholly inside the export's window is handed over as it is on
// disk, with no decoding (a day of a channel is some 6,000 of them), and
// may reach into the next hour; only the records the window's ends cut,
// records that go back in time, and samples not yet in a record are
// decoded and encoded anew. With spans, the records of a stretch that go
// out whole are one piece that says where they lie, found by binary search
// and not read.
func (s *Store) exportChannel(snap *chanSnap, k *chanKind, a, b int64, es *exportState, net, sta, loc string, spans bool, records *int, emit func(piece) error) error {
	var w *window // the samples to encode anew, made when needed
	// The record the hour before handed over whole and that reaches into
	// this one (es.tail moves on as this hour's records go out).
	prevTail := es.tail
	var raw []span // handed over whole, ascending; the last hour's tail first
	if prevTail.hi > a {
		raw = append(raw, prevTail)
	}
	var pieces []piece
	put := func(rec []byte) {
		if w == nil {
			w = newWindow(a, b)
		}
		w.putRecord(rec, k.periodMs)
	}
	// take sorts a record into the pieces handed over whole or the
	// samples encoded anew; it keeps rec, unless the record goes out as a
	// span of its file (path).
	take := func(rec []byte, path string, off int64) {
		lo, hi, ok := sampleRange(rec, k.periodMs)
		switch {
		case !ok || hi <= a || lo >= b:
		case lo < a && prevTail == (span{lo, hi}):
			// Handed over whole by the hour it starts in.
		case lo >= a && lo >= es.from && hi <= es.to && lo >= es.maxDone:
			if path != "" {
				pieces = append(pieces, piece{lo: lo, path: path, off: off, n: 1})
			} else {
				pieces = append(pieces, piece{lo: lo, rec: rec})
			}
			raw = append(raw, span{lo, hi})
			es.maxDone = hi
			if hi > b {
				es.tail = span{lo, hi}
			}
		default:
			put(rec)
		}
	}
	for i := range snap.files {
		f := &snap.files[i]
		var whole wholeFunc
		if spans {
			// The records of a stretch that lie wholly in the
			// export's window and start in the hour, from the first at
			// or after what went out, are one span: their starts are
			// binary-searched, and each one's end is the next one's start.
			whole = func(st *stretch, count int64, start func(int64) (int64, bool)) (int64, int64, bool) {
				at := func(k int64) int64 {
					if k >= count {
						return st.hi
					}
					lo, ok := start(st.first + k*recordLen)
					if !ok {
						return math.MaxInt64 // unreadable: stops the search, and the span
					}
					return lo
				}
				from := max(a, es.from, es.maxDone)
				k0 := int64(sort.Search(int(count), func(i int) bool { return at(int64(i)) >= from }))
				k1 := int64(sort.Search(int(count), func(i int) bool { return at(int64(i)) >= b })) - 1
				if k1 >= k0 && at(k1+1) > es.to {
					k1-- // cut by the window's end: encoded anew
				}
				if k1 < k0 {
					return 0, 0, false
				}
				lo, lo1, hi := at(k0), at(k1), at(k1+1)
				if lo == math.MaxInt64 || lo1 == math.MaxInt64 || hi == math.MaxInt64 {
					return 0, 0, false
				}
				pieces = append(pieces, piece{lo: lo, path: f.path, off: st.first + k0*recordLen, n: k1 - k0 + 1})
				raw = append(raw, span{lo, hi})
				es.maxDone = hi
				if hi > b {
					es.tail = span{lo1, hi}
				}
				return k0, k1, true
			}
		}
		err := s.eachRecord(f, a, b, k.periodMs, !spans, whole, func(rec []byte, off int64) {
			if spans {
				take(rec, f.path, off)
			} else {
				take(rec, "", 0)
			}
		})
		if err != nil {
			return err
		}
	}
	for _, p := range snap.pending {
		take(p, "", 0)
	}
	for i, r := range snap.runs {
		if w == nil {
			w = newWindow(a, b)
		}
		w.put(r.lo, snap.samples[i])
	}
	if w != nil {
		// What is left, less what went out whole (a record that went back
		// in time may repeat some). raw is in time order and its spans
		// apart (each starts at or after maxDone), so the samples are
		// walked once, what went out whole skipped a span at a time: an
		// hour with samples still in memory is 180,000 sample indexes,
		// nearly all of them covered.
		n := int64(len(w.vals))
		r := sort.Search(len(raw), func(i int) bool { return raw[i].hi > w.a })
		for j := int64(0); j < n; {
			if r < len(raw) && raw[r].lo <= w.a+j {
				j = raw[r].hi - w.a
				r++
				continue
			}
			if !w.has(j) {
				j++
				continue
			}
			stop := n
			if r < len(raw) {
				stop = min(stop, raw[r].lo-w.a)
			}
			end := j
			for end < stop && w.has(end) {
				end++
			}
			for j < end {
				h := mseed.Header{
					SeqNo: *records%999999 + 1, Network: net, Station: sta, Location: loc, Channel: k.code,
					Start: time.UnixMilli((w.a + j) * k.periodMs).UTC(), SampleRate: k.rate, Encoding: k.enc,
				}
				buf := make([]byte, recordLen)
				var n int
				var err error
				if k.enc == mseed.Float32 {
					fl := make([]float32, end-j)
					for q := range fl {
						fl[q] = math.Float32frombits(uint32(w.vals[j+int64(q)]))
					}
					n, err = mseed.PackFloat32s(buf, h, fl)
				} else {
					n, err = mseed.PackInts(buf, h, w.vals[j:end])
				}
				if err != nil {
					return fmt.Errorf("encode export: %w", err)
				}
				pieces = append(pieces, piece{lo: w.a + j, rec: buf})
				j += int64(n)
			}
		}
	}
	if w != nil || spans {
		// Encoded pieces, and a span taken before the records ahead of
		// it were read, go in time order.
		slices.SortStableFunc(pieces, func(x, y piece) int { return cmp.Compare(x.lo, y.lo) })
	}
	for _, p := range pieces {
		*records += int(max(p.n, 1))
		if err := emit(p); err != nil {
			return err
		}
	}
	return nil
}

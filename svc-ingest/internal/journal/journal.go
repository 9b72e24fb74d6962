// Package journal is svc-ingest's crash-safe record log: every packet the
// core accepts is appended here, and fsynced, before the station is acked,
// so an ack always means the record survives a crash of the process or the
// machine. Consumers (the streams to svc-rts and svc-waveform, the sync
// with the peer core) read it from durable cursors and resume where they
// left off after any restart.
//
// Appends from concurrent callers are group-committed: one writer takes
// everything queued and writes it, and a syncer fsyncs everything written
// so far once and releases those appends, so the cost of a sync is shared
// by a whole burst of packets (JetStream's fsync per message would cap a
// core at a few thousand packets a second; its default 2-minute sync
// interval would lose acknowledged data). Readers see a record once it is
// written, before its sync; cursors are saved only up to the synced end.
//
// On disk the journal is a directory of segment files named after the
// index of their first record; each record is framed as
// [length uint32][crc32c uint32][payload]. A torn tail (a crash mid-write)
// is cut off at the first frame that does not check, which can only be a
// record whose append had not returned.
package journal

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxRecord bounds one payload; a station datagram is at most 1200 bytes.
// A payload is never empty: a frame of length 0 and checksum 0 — which is
// what zeroed bytes read as — checks, and a stretch of zeros on disk (a
// zeroed sector, a file extended by a crash before its data was written)
// must not read as records.
const maxRecord = 1 << 16

// ErrClosed is returned after Close.
var ErrClosed = errors.New("journal closed")

// errDamaged is a frame that does not check.
var errDamaged = errors.New("damaged")

// Options tune a journal.
type Options struct {
	// SegmentBytes is the size at which a new segment starts.
	SegmentBytes int64
	// Retention is how long records are kept at least, even when every
	// cursor has passed them (the peer's backfill reads them).
	Retention time.Duration
	// Cache is how many recent records are kept in memory for readers.
	Cache int
	// Log receives the damage found in segments; slog.Default when nil.
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Entry is one record with its index. A nil Payload is a record lost to
// damage on disk (see Lost): its index is passed so that readers move on.
type Entry struct {
	Index   uint64
	Payload []byte
}

type segment struct {
	first   uint64 // index of the first record
	count   uint64
	path    string
	size    int64
	created time.Time
	// offsets holds the byte offset of each record, for random reads; nil
	// for a sealed segment until it is first read at random (see index).
	// A record lost to damage has offset -1.
	offsets []int64
	lost    uint64 // records with offset -1
}

type appendReq struct {
	payloads [][]byte
	first    uint64
	done     chan error
}

// Journal is an open journal. It is safe for concurrent use.
type Journal struct {
	dir  string
	opts Options

	mu      sync.Mutex
	segs    []*segment
	active  *os.File
	writer  *bufio.Writer
	next    uint64  // index the next record gets
	synced  uint64  // records below this index are fsynced
	cache   []Entry // ring of the newest records
	cursors map[string]uint64
	dirty   bool
	closed  bool
	// rotateFailures counts segments that could not be started.
	rotateFailures uint64
	lost           uint64        // records found lost to damage, see Lost
	grew           chan struct{} // closed and replaced on every commit
	syncs          chan syncJob  // commitLoop → syncLoop

	queue    chan *appendReq
	quit     chan struct{}
	stopped  chan struct{}
	readSegs map[string]*os.File
	dirFile  *os.File // held open: syncing the directory needs no new descriptor

	spareMu sync.Mutex
	spares  []*os.File // see open

	// syncFile syncs a commit's segment: (*os.File).Sync, held up in tests.
	syncFile func(*os.File) error
}

// spareDescriptors is how many descriptors the journal holds only to give
// back. A process out of descriptors (a connection flood that beat the
// listeners' budget) must shed clients, never fail a durable write: the
// journal then closes a spare and opens what it needs in its place.
const spareDescriptors = 4

// open calls open, and while it fails for want of descriptors, frees a
// spare and calls it again.
func (j *Journal) open(open func() (*os.File, error)) (*os.File, error) {
	defer j.refillSpares()
	f, err := open()
	for outOfDescriptors(err) {
		j.spareMu.Lock()
		n := len(j.spares)
		if n == 0 {
			j.spareMu.Unlock()
			break
		}
		j.spares[n-1].Close()
		j.spares = j.spares[:n-1]
		j.spareMu.Unlock()
		f, err = open()
	}
	return f, err
}

// refillSpares takes back the spares open gave away, as far as the process
// has descriptors again.
func (j *Journal) refillSpares() {
	j.spareMu.Lock()
	defer j.spareMu.Unlock()
	for len(j.spares) < spareDescriptors {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return
		}
		j.spares = append(j.spares, f)
	}
}

// outOfDescriptors tells whether err is the process's or the system's
// descriptor table being full: a passing condition, not a broken disk.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Open opens (or creates) the journal in dir, recovering from a crash.
func Open(dir string, opts Options) (*Journal, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 64 << 20
	}
	if opts.Cache <= 0 {
		opts.Cache = 1 << 16
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &Journal{
		dir: dir, opts: opts, cursors: map[string]uint64{}, grew: make(chan struct{}),
		queue: make(chan *appendReq, 1024), quit: make(chan struct{}), stopped: make(chan struct{}), readSegs: map[string]*os.File{},
		syncFile: (*os.File).Sync, syncs: make(chan syncJob, 64),
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.dirFile = d
	j.refillSpares()
	if err := j.load(); err != nil {
		j.closeFiles()
		return nil, err
	}
	go j.commitLoop()
	return j, nil
}

// load finds the segments and reads back the newest two. A sealed segment
// is only named and measured here: its records are the indexes up to the
// next segment's name, and its offsets are built when it is first read at
// random. Reading and checksumming the whole retention — an hour at a
// thousand stations is 15 million records — kept a restarted ingest from
// its stations for most of a minute on a loaded machine. The last segment
// may end in a torn record (a crash mid-write), which is cut off; the one
// before it is the only sealed segment a machine's crash can have left
// short (its last sync and the next segment's start overlap), so it is
// located too, its missing records marked lost: they were not synced, so
// never acknowledged, and their stations sent them again.
func (j *Journal) load() error {
	names, err := filepath.Glob(filepath.Join(j.dir, "*.seg"))
	if err != nil {
		return err
	}
	for _, name := range names {
		first, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), ".seg"), 10, 64)
		if err != nil {
			return fmt.Errorf("journal: unexpected file %s", name)
		}
		j.segs = append(j.segs, &segment{first: first, path: name})
	}
	slices.SortFunc(j.segs, func(a, b *segment) int { return cmpU(a.first, b.first) })
	n := len(j.segs)
	for i, s := range j.segs {
		st, err := os.Stat(s.path)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		s.size, s.created = st.Size(), st.ModTime()
		switch {
		case i == n-1:
			if err := j.scan(s); err != nil {
				return err
			}
		default:
			s.count = j.segs[i+1].first - s.first
			if i == n-2 {
				offsets, err := j.index(s.path, s.count, s.size)
				if err != nil {
					return err
				}
				j.setOffsetsLocked(s, offsets) // nothing else runs yet
			}
		}
	}
	if n > 0 {
		last := j.segs[n-1]
		j.next = last.first + last.count
		j.synced = j.next
	}
	if b, err := os.ReadFile(filepath.Join(j.dir, "cursors.json")); err == nil {
		if err := json.Unmarshal(b, &j.cursors); err != nil {
			return fmt.Errorf("journal: cursors: %w", err)
		}
	}
	return j.openActive()
}

// scan reads the last segment's frames, building its offsets; a torn tail
// is cut off.
func (j *Journal) scan(s *segment) error {
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	offsets, end := frames(f)
	size := s.size
	s.offsets, s.count, s.size = offsets, uint64(len(offsets)), end
	if end < size {
		if err := f.Truncate(end); err != nil {
			return fmt.Errorf("journal: cut torn tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// frames reads r's frames front to back and returns the offset of each
// whole one that checks, and where the last ends.
func frames(r io.Reader) (offsets []int64, end int64) {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [8]byte
	buf := make([]byte, maxRecord)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return offsets, end
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n == 0 || n > maxRecord {
			return offsets, end
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return offsets, end
		}
		if crc32.Checksum(buf[:n], castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return offsets, end
		}
		offsets = append(offsets, end)
		end += 8 + int64(n)
	}
}

// index builds a sealed segment's offsets, checking every frame, for the
// count records its place among the segments says it holds. It reads the
// file without the journal's lock: a sealed segment no longer changes.
//
// Damage on disk does not stop the journal: the records it makes
// unreadable are marked lost (offset -1), counted and logged, and readers
// pass over them — the other core holds the same packets, and a reader
// stuck on one bad sector would hold up every record after it. Past a
// damaged stretch, the frames are found again by looking, within
// resyncBytes, for a frame that checks from which whole frames run to the
// end of the file: the last of them is the segment's last record, which
// gives every one of them its index.
func (j *Journal) index(path string, count uint64, size int64) ([]int64, error) {
	f, err := j.open(func() (*os.File, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	offsets, end := frames(f)
	if uint64(len(offsets)) > count {
		return nil, fmt.Errorf("journal: segment %s holds more than the %d records its place allows", path, count)
	}
	if uint64(len(offsets)) == count {
		return offsets, nil
	}
	found := uint64(len(offsets))
	tail, at := resync(f, end, size, count-found)
	for range count - found - uint64(len(tail)) {
		offsets = append(offsets, -1)
	}
	offsets = append(offsets, tail...)
	lost := count - found - uint64(len(tail))
	j.opts.Log.Error("journal: damaged segment, its unreadable records are passed over",
		slog.String("segment", path), slog.Int64("damaged_at", end), slog.Int64("found_again_at", at),
		slog.Uint64("records", count), slog.Uint64("lost", lost))
	return offsets, nil
}

// resyncBytes bounds the search for frames past a damaged stretch.
const resyncBytes = 4 << 20

// resync looks in f from just past the damaged byte from, within
// resyncBytes, for the first offset from which at most max whole frames
// that check run exactly to size, and returns their offsets and where
// they start (-1 and none when there is no such place).
func resync(f *os.File, from, size int64, max uint64) ([]int64, int64) {
	start := from + 1
	if size-start < 8 {
		return nil, -1
	}
	window := make([]byte, min(size-start, resyncBytes))
	if _, err := f.ReadAt(window, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, -1
	}
	for o := range len(window) - 7 {
		at := start + int64(o)
		n := int64(binary.LittleEndian.Uint32(window[o:]))
		if n == 0 || n > maxRecord || at+8+n > size {
			continue
		}
		if int64(o)+8+n <= int64(len(window)) &&
			crc32.Checksum(window[int64(o)+8:int64(o)+8+n], castagnoli) != binary.LittleEndian.Uint32(window[o+4:]) {
			continue
		}
		// A frame that checks here is a candidate; it is the place only if
		// whole frames follow it to the end.
		offsets, end := frames(io.NewSectionReader(f, at, size-at))
		if len(offsets) == 0 || end != size-at || uint64(len(offsets)) > max {
			continue
		}
		for i := range offsets {
			offsets[i] += at
		}
		return offsets, at
	}
	return nil, -1
}

// setOffsets gives s the offsets index built, unless a reader gave it
// them meanwhile, and counts its lost records; j.mu is held.
func (j *Journal) setOffsetsLocked(s *segment, offsets []int64) {
	if s.offsets != nil {
		return
	}
	s.offsets, s.lost = offsets, lostIn(offsets)
	j.lost += s.lost
}

// lostIn counts the records of offsets lost to damage.
func lostIn(offsets []int64) uint64 {
	var n uint64
	for _, o := range offsets {
		if o < 0 {
			n++
		}
	}
	return n
}

// Lost returns how many records were found lost to damage on disk since
// the journal opened.
func (j *Journal) Lost() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

func (j *Journal) openActive() error {
	if n := len(j.segs); n == 0 || j.segs[n-1].size >= j.opts.SegmentBytes {
		j.segs = append(j.segs, j.newSegment())
	}
	f, err := j.openSegment(j.segs[len(j.segs)-1])
	if err != nil {
		return err
	}
	j.active, j.writer = f, bufio.NewWriterSize(f, 1<<20)
	return nil
}

func (j *Journal) newSegment() *segment {
	return &segment{first: j.next, path: filepath.Join(j.dir, fmt.Sprintf("%020d.seg", j.next)), created: j.opts.Now()}
}

// openSegment opens s for appending, its directory entry durable.
func (j *Journal) openSegment(s *segment) (*os.File, error) {
	f, err := j.open(func() (*os.File, error) { return os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) })
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := j.dirFile.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	return f, nil
}

// rotate starts a new segment after a commit filled the active one, and
// reports whether it did: the full one is then the caller's to close once
// synced. The full segment stays active until the new one is open, so a
// failure costs only a longer segment, and the next commit tries again.
func (j *Journal) rotate() bool {
	s := j.newSegment()
	f, err := j.openSegment(s)
	if err != nil {
		j.rotateFailures++
		return false
	}
	j.segs = append(j.segs, s)
	j.active, j.writer = f, bufio.NewWriterSize(f, 1<<20)
	return true
}

// RotateFailures returns how many times a new segment could not be opened
// (and the full one was written on).
func (j *Journal) RotateFailures() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rotateFailures
}

// Append stores payloads durably and returns the index of the first.
func (j *Journal) Append(ctx context.Context, payloads ...[]byte) (uint64, error) {
	p, err := j.Begin(ctx, payloads...)
	if err != nil {
		return 0, err
	}
	return p.Wait()
}

// Pending is an append under way.
type Pending struct {
	j   *Journal
	req *appendReq
}

// Begin queues payloads for the next commit and returns at once, so that a
// caller can go on (reading the next datagrams) while the sync runs; Wait
// tells when they are durable.
func (j *Journal) Begin(ctx context.Context, payloads ...[]byte) (*Pending, error) {
	for _, p := range payloads {
		if len(p) == 0 || len(p) > maxRecord {
			return nil, fmt.Errorf("journal: record of %d bytes", len(p))
		}
	}
	req := &appendReq{payloads: payloads, done: make(chan error, 1)}
	select {
	case j.queue <- req:
		return &Pending{j: j, req: req}, nil
	case <-j.stopped:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Wait returns the index of the first record once all are durable.
func (p *Pending) Wait() (uint64, error) {
	select {
	case err := <-p.req.done:
		return p.req.first, err
	case <-p.j.stopped:
		select {
		case err := <-p.req.done:
			return p.req.first, err
		default:
			return 0, ErrClosed // queued after the writer stopped: never written
		}
	}
}

// commitLoop is the single writer: it takes every queued append and
// writes them, then hands them to syncLoop and takes the next ones while
// their fsync runs.
func (j *Journal) commitLoop() {
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		j.syncLoop()
	}()
	defer func() {
		close(j.syncs)
		<-synced
		close(j.stopped)
	}()
	for {
		var first *appendReq
		select {
		case first = <-j.queue:
		case <-j.quit:
			// Appends still queued were never written.
			for {
				select {
				case r := <-j.queue:
					r.done <- ErrClosed
				default:
					return
				}
			}
		}
		batch := []*appendReq{first}
	more:
		for len(batch) < 4096 {
			select {
			case r := <-j.queue:
				batch = append(batch, r)
			default:
				break more
			}
		}
		j.syncs <- j.write(batch)
	}
}

// syncJob is a written commit waiting for its fsync, or a segment that
// rotation retired, to close once synced.
type syncJob struct {
	batch   []*appendReq
	file    *os.File // to sync
	written uint64   // the journal's end after this commit
	err     error    // the write failed: nothing to sync
	retire  bool     // close file after its last sync
}

// syncLoop fsyncs what commitLoop wrote, in order, everything waiting in
// one fsync per file, and releases the appends.
func (j *Journal) syncLoop() {
	for job := range j.syncs {
		jobs := []syncJob{job}
	more:
		for {
			select {
			case next, ok := <-j.syncs:
				if !ok {
					break more
				}
				jobs = append(jobs, next)
			default:
				break more
			}
		}
		var files []*os.File
		var written uint64
		for _, jb := range jobs {
			if jb.file != nil && !slices.Contains(files, jb.file) {
				files = append(files, jb.file)
			}
			written = max(written, jb.written)
		}
		var err error
		for _, f := range files {
			if e := j.syncFile(f); e != nil && err == nil {
				err = fmt.Errorf("journal: sync: %w", e)
			}
		}
		if err == nil {
			j.mu.Lock()
			j.synced = max(j.synced, written)
			j.mu.Unlock()
		}
		for _, jb := range jobs {
			for _, r := range jb.batch {
				r.done <- cmp.Or(jb.err, err)
			}
			if jb.retire {
				jb.file.Close()
			}
		}
	}
}

// write writes a commit's records and makes them visible to readers; the
// returned job fsyncs them.
func (j *Journal) write(batch []*appendReq) syncJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return syncJob{batch: batch, err: ErrClosed}
	}
	seg := j.segs[len(j.segs)-1]
	var hdr [8]byte
	var added []Entry
	for _, r := range batch {
		r.first = j.next + uint64(len(added))
		for _, p := range r.payloads {
			binary.LittleEndian.PutUint32(hdr[:4], uint32(len(p)))
			binary.LittleEndian.PutUint32(hdr[4:], crc32.Checksum(p, castagnoli))
			// A bufio.Writer keeps its first error and returns it from
			// Flush, which is checked below.
			_, _ = j.writer.Write(hdr[:])
			_, _ = j.writer.Write(p)
			seg.offsets = append(seg.offsets, seg.size)
			seg.size += 8 + int64(len(p))
			added = append(added, Entry{Index: j.next + uint64(len(added)), Payload: p})
		}
	}
	if err := j.writer.Flush(); err != nil {
		return syncJob{batch: batch, err: fmt.Errorf("journal: write: %w", err)}
	}
	// Written, not yet synced: readers see the records now. A record in
	// the page cache outlives a crash of the process; the machine's crash
	// may lose it, but then its append had not returned, so it was never
	// acked, and no cursor is saved past the synced end (SaveCursors), so
	// no consumer skips what takes its index after a restart. Neither the
	// forwarders nor the next commit wait for this one's fsync: under a
	// burst of packets that wait was most of a record's way to
	// svc-waveform and SeedLink.
	seg.count += uint64(len(added))
	j.next += uint64(len(added))
	j.cache = append(j.cache, added...)
	if over := len(j.cache) - j.opts.Cache; over > 0 {
		j.cache = append(j.cache[:0], j.cache[over:]...)
	}
	close(j.grew)
	j.grew = make(chan struct{})
	job := syncJob{batch: batch, file: j.active, written: j.next}
	// The full segment is closed by syncLoop once this commit, its last,
	// is synced.
	job.retire = seg.size >= j.opts.SegmentBytes && j.rotate()
	return job
}

// Next returns the index the next appended record will get.
func (j *Journal) Next() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next
}

// First returns the index of the oldest record kept.
func (j *Journal) First() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.segs[0].first
}

// Read returns up to max records from index from on; fewer (or none) when
// the journal ends there. A from below First starts at First.
func (j *Journal) Read(from uint64, max int) ([]Entry, error) {
	// The sealed segments the read reaches get their offsets first, each
	// built outside the lock so that appends go on meanwhile; the read
	// itself then runs under the one lock that saw them all indexed.
	for {
		j.mu.Lock()
		s := j.unindexed(from, max)
		if s == nil {
			break
		}
		path, count, size := s.path, s.count, s.size
		j.mu.Unlock()
		offsets, err := j.index(path, count, size)
		j.mu.Lock()
		trimmed := s.first < j.segs[0].first
		if err == nil {
			j.setOffsetsLocked(s, offsets)
		}
		j.mu.Unlock()
		if err != nil && !trimmed {
			return nil, err
		}
	}
	defer j.mu.Unlock()
	if from < j.segs[0].first {
		from = j.segs[0].first
	}
	if n := len(j.cache); n > 0 && from >= j.cache[0].Index {
		i := int(from - j.cache[0].Index)
		if i >= n {
			return nil, nil
		}
		out := slices.Clone(j.cache[i:min(n, i+max)])
		return out, nil
	}
	var out []Entry
	for _, s := range j.segs {
		if from >= s.first+s.count || len(out) >= max {
			continue
		}
		if from < s.first {
			from = s.first
		}
		f, err := j.reader(s)
		if err != nil {
			return nil, err
		}
		// The records asked for lie one after another: one read takes
		// them all (a replay reads millions), and their payloads share
		// its buffer.
		lo := from - s.first
		hi := min(s.count, lo+uint64(max-len(out)))
		// From the first record found to where the next found one begins:
		// lost records (offset -1) lie between, and are passed as such.
		base, end := int64(-1), s.size
		for i := lo; i < hi && base < 0; i++ {
			base = s.offsets[i]
		}
		for i := hi; i < s.count; i++ {
			if s.offsets[i] >= 0 {
				end = s.offsets[i]
				break
			}
		}
		var buf []byte
		if base >= 0 {
			buf = make([]byte, end-base)
			if _, err := f.ReadAt(buf, base); err != nil {
				return nil, fmt.Errorf("journal: read %s: %w", s.path, err)
			}
		}
		for i := lo; i < hi; i++ {
			if s.offsets[i] < 0 {
				out = append(out, Entry{Index: s.first + i})
				continue
			}
			at := s.offsets[i] - base
			n := int64(binary.LittleEndian.Uint32(buf[at : at+4]))
			if at+8+n > int64(len(buf)) {
				return nil, fmt.Errorf("journal: read %s: record %d overruns its segment", s.path, s.first+i)
			}
			out = append(out, Entry{Index: s.first + i, Payload: buf[at+8 : at+8+n : at+8+n]})
		}
		from = s.first + hi
	}
	return out, nil
}

// unindexed returns the first segment without offsets that Read(from,
// limit) would read, or nil.
func (j *Journal) unindexed(from uint64, limit int) *segment {
	from = max(from, j.segs[0].first)
	if n := len(j.cache); n > 0 && from >= j.cache[0].Index {
		return nil
	}
	left := uint64(limit)
	for _, s := range j.segs {
		end := s.first + s.count
		if from >= end {
			continue
		}
		if left == 0 {
			return nil
		}
		if s.offsets == nil {
			return s
		}
		from = max(from, s.first)
		take := min(end-from, left)
		left -= take
		from += take
	}
	return nil
}

// Scan calls fn with every record from index from on, to the journal's end
// when Scan was called, reading each segment front to back through one
// buffer. Frames are not checksummed here: its callers look at a few
// fields of millions of records, and checking them tripled a restart's
// reading; what leaves ingest is read through Read, which checks a sealed
// segment as it first indexes it. A restart reads the newest millions of
// records back (replay windows, the sync's index); Read's two preads per
// record made that tens of seconds at a thousand stations. payload is
// valid only during the call. Appends and readers go on meanwhile; a
// segment trimmed before Scan reaches it is skipped, as its records are no
// longer kept.
//
// Records lost to damage on disk are passed over (see index). A sealed
// segment whose frames stop making sense as Scan reads it — a length out
// of bounds, a frame past the segment's end — is indexed there and then,
// and read on record by record, checked, from where Scan was; what a
// damaged stretch gave before that is what Scan's callers tolerate of any
// record (they look for fields, and skip what they do not find).
func (j *Journal) Scan(from uint64, fn func(index uint64, payload []byte)) error {
	type part struct {
		seg   *segment
		count uint64 // of the segment, and its size: as they were
		size  int64
		first uint64 // index of the first record to read
		off   int64
		skip  uint64  // records to pass over from off before first
		found []int64 // offsets of the segment's records, when some are lost
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	var parts []part
	for i, s := range j.segs {
		if from >= s.first+s.count {
			continue
		}
		lo := max(from, s.first)
		p := part{seg: s, count: s.count, size: s.size, first: lo}
		switch {
		case s.lost > 0:
			p.found = s.offsets[:s.count]
		case s.offsets != nil:
			p.off = s.offsets[lo-s.first]
		default:
			// A sealed segment not read at random yet: from its start.
			p.skip = lo - s.first
		}
		if i == len(j.segs)-1 {
			p.size = -1 // still written: no end to check against
		}
		parts = append(parts, p)
	}
	j.mu.Unlock()

	buf := make([]byte, maxRecord)
	for _, p := range parts {
		if p.found == nil {
			read, err := j.scanFrames(p.seg.path, p.off, p.size, p.skip, p.first, p.seg.first+p.count-p.first, buf, fn)
			if err == nil || !errors.Is(err, errDamaged) || p.size < 0 {
				if err != nil {
					return err
				}
				continue
			}
			found, err := j.index(p.seg.path, p.count, p.size)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			j.mu.Lock()
			j.setOffsetsLocked(p.seg, found)
			j.mu.Unlock()
			p.found, p.first = found, p.first+read
		}
		if err := j.scanFound(p.seg.path, p.seg.first, p.found, p.first, buf, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanFrames reads the count records from index first of the segment file
// at path, from the frame at off after passing over skip of them; size,
// when not negative, is where the segment ends. It returns how many it
// passed to fn, and an errDamaged error where framing fails.
func (j *Journal) scanFrames(path string, off, size int64, skip, first, count uint64, buf []byte,
	fn func(index uint64, payload []byte)) (uint64, error) {
	f, err := j.open(func() (*os.File, error) { return os.Open(path) })
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), 1<<20)
	var hdr [8]byte
	at := off
	for i := range skip + count {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return i - min(i, skip), fmt.Errorf("journal: read %s: %w", path, errors.Join(err, errDamaged))
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		at += 8 + int64(n)
		if n == 0 || n > maxRecord || (size >= 0 && at > size) {
			return i - min(i, skip), fmt.Errorf("journal: read %s: frame of %d bytes: %w", path, n, errDamaged)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return i - min(i, skip), fmt.Errorf("journal: read %s: %w", path, errors.Join(err, errDamaged))
		}
		if i >= skip {
			fn(first+i-skip, buf[:n])
		}
	}
	return count, nil
}

// scanFound reads, record by record and checked, the records of the
// segment file at path whose offsets are found (offset -1: lost), from
// index from on; segFirst is the segment's first index.
func (j *Journal) scanFound(path string, segFirst uint64, found []int64, from uint64, buf []byte,
	fn func(index uint64, payload []byte)) error {
	f, err := j.open(func() (*os.File, error) { return os.Open(path) })
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	var hdr [8]byte
	for i := from - segFirst; i < uint64(len(found)); i++ {
		off := found[i]
		if off < 0 {
			continue
		}
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			return fmt.Errorf("journal: read %s: %w", path, err)
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n == 0 || n > maxRecord {
			continue // checked when found: the disk changed since
		}
		if _, err := f.ReadAt(buf[:n], off+8); err != nil {
			return fmt.Errorf("journal: read %s: %w", path, err)
		}
		if crc32.Checksum(buf[:n], castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			continue
		}
		fn(segFirst+i, buf[:n])
	}
	return nil
}

// Search returns the index of the first kept record whose payload after
// accepts, after being false for every record before it and true for every
// one after (the records' receipt times against a time); Next when there
// is none. An unreadable record counts as not after. It reads the first
// record of the segments a binary search visits and then the records of
// one segment, never the whole journal: a restarted receiver's first
// question must not wait for an index of every sealed segment.
func (j *Journal) Search(after func(payload []byte) bool) (uint64, error) {
	// What changes under the lock, taken as it was: the active segment's
	// count, size and offsets grow (the first count of its offsets never
	// change); path and first never do.
	type seg struct {
		*segment
		count   uint64
		size    int64
		offsets []int64
	}
	j.mu.Lock()
	segs := make([]seg, 0, len(j.segs))
	for _, s := range j.segs {
		segs = append(segs, seg{s, s.count, s.size, s.offsets[:min(uint64(len(s.offsets)), s.count)]})
	}
	j.mu.Unlock()

	var failed error
	at := func(s seg, off int64) bool {
		p, err := j.frameAt(s.path, off)
		if errors.Is(err, errDamaged) {
			return false
		}
		if err != nil {
			failed = err
			return false
		}
		return after(p)
	}
	// The first segment whose first record is after: the answer is its
	// first record or lies in the segment before.
	k := sort.Search(len(segs), func(i int) bool { return segs[i].count == 0 || at(segs[i], 0) })
	if failed != nil {
		return 0, failed
	}
	if k == 0 {
		return segs[0].first, nil
	}
	s := segs[k-1]
	if s.offsets == nil {
		offsets, err := j.index(s.path, s.count, s.size)
		if err != nil {
			return 0, err
		}
		j.mu.Lock()
		j.setOffsetsLocked(s.segment, offsets)
		j.mu.Unlock()
		s.offsets = offsets
	}
	i := sort.Search(int(s.count), func(i int) bool { return i > 0 && s.offsets[i] >= 0 && at(s, s.offsets[i]) })
	if failed != nil {
		return 0, failed
	}
	return s.first + uint64(i), nil
}

// short makes a read that ended early a damaged frame: a segment's frames
// never run past its end.
func short(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.Join(err, errDamaged)
	}
	return err
}

// frameAt reads the record whose frame begins at off in the segment file
// at path.
func (j *Journal) frameAt(path string, off int64) ([]byte, error) {
	f, err := j.open(func() (*os.File, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	var hdr [8]byte
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", path, short(err))
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n == 0 || n > maxRecord {
		return nil, fmt.Errorf("journal: read %s: frame of %d bytes: %w", path, n, errDamaged)
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(p, off+8); err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", path, short(err))
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("journal: read %s: the record at byte %d: %w", path, off, errDamaged)
	}
	return p, nil
}

func (j *Journal) reader(s *segment) (*os.File, error) {
	if f, ok := j.readSegs[s.path]; ok {
		return f, nil
	}
	f, err := j.open(func() (*os.File, error) { return os.Open(s.path) })
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.readSegs[s.path] = f
	return f, nil
}

// Wait returns when a record with index ≥ index exists, or ctx ends.
func (j *Journal) Wait(ctx context.Context, index uint64) error {
	for {
		j.mu.Lock()
		if j.next > index || j.closed {
			closed := j.closed
			j.mu.Unlock()
			if closed {
				return ErrClosed
			}
			return nil
		}
		grew := j.grew
		j.mu.Unlock()
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cursor returns the saved position of consumer name: the index of the
// first record it has not finished with (0 for a new consumer).
func (j *Journal) Cursor(name string) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cursors[name]
}

// SetCursor records that consumer name is done with every record below
// index. It is saved by SaveCursors (periodically, and at Close); after a
// crash a consumer may see records again, never miss one.
func (j *Journal) SetCursor(name string, index uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if index > j.cursors[name] {
		j.cursors[name] = index
		j.dirty = true
	}
}

// SaveCursors writes the cursors to disk if they moved.
func (j *Journal) SaveCursors() error {
	j.mu.Lock()
	if !j.dirty {
		j.mu.Unlock()
		return nil
	}
	// Never past what is synced: a machine's crash may lose the rest,
	// and the indexes it held then go to other records.
	// One held back is saved again next time.
	saved := make(map[string]uint64, len(j.cursors))
	j.dirty = false
	for name, c := range j.cursors {
		saved[name] = min(c, j.synced)
		j.dirty = j.dirty || c > j.synced
	}
	b, err := json.Marshal(saved)
	j.mu.Unlock()
	if err != nil {
		return err
	}
	path := filepath.Join(j.dir, "cursors.json")
	tmp := path + ".tmp"
	f, err := j.open(func() (*os.File, error) { return os.Create(tmp) })
	if err != nil {
		return fmt.Errorf("journal: cursors: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("journal: cursors: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: cursors: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("journal: cursors: %w", err)
	}
	return j.dirFile.Sync()
}

// Trim deletes whole segments that every cursor has passed and that are
// older than the retention. It returns how many it removed.
func (j *Journal) Trim() (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	low := j.next
	for _, c := range j.cursors {
		low = min(low, c)
	}
	cutoff := j.opts.Now().Add(-j.opts.Retention)
	removed := 0
	for len(j.segs) > 1 {
		s := j.segs[0]
		if s.first+s.count > low || s.created.After(cutoff) {
			break
		}
		if f, ok := j.readSegs[s.path]; ok {
			f.Close()
			delete(j.readSegs, s.path)
		}
		if err := os.Remove(s.path); err != nil {
			return removed, fmt.Errorf("journal: trim: %w", err)
		}
		j.segs = j.segs[1:]
		removed++
	}
	return removed, nil
}

// Run saves cursors and trims old segments every interval until ctx ends.
func (j *Journal) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return j.SaveCursors()
		case <-t.C:
			// Out of descriptors even with the spares: the cursors are
			// saved at the next tick (a crash meanwhile only repeats
			// records to consumers).
			if err := j.SaveCursors(); err != nil && !outOfDescriptors(err) {
				return err
			}
			if _, err := j.Trim(); err != nil {
				return err
			}
		}
	}
}

// Close stops appending, saves the cursors and closes the files.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	close(j.grew)
	j.mu.Unlock()
	close(j.quit)
	<-j.stopped
	err := j.SaveCursors()
	j.mu.Lock()
	defer j.mu.Unlock()
	err = errors.Join(err, j.active.Close())
	j.closeFiles()
	return err
}

// closeFiles closes the files a journal holds besides the active segment.
func (j *Journal) closeFiles() {
	for _, f := range j.readSegs {
		f.Close()
	}
	j.dirFile.Close()
	j.spareMu.Lock()
	defer j.spareMu.Unlock()
	for _, f := range j.spares {
		f.Close()
	}
	j.spares = nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

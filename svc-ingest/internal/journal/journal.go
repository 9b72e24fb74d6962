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
const maxRecord = 1 << 16

// ErrClosed is returned after Close.
var ErrClosed = errors.New("journal closed")

// Options tune a journal.
type Options struct {
	// SegmentBytes is the size at which a new segment starts.
	SegmentBytes int64
	// Retention is how long records are kept at least, even when every
	// cursor has passed them (the peer's backfill reads them).
	Retention time.Duration
	// Cache is how many recent records are kept in memory for readers.
	Cache int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Entry is one record with its index.
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
	offsets []int64
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
// its stations for most of a minute on a loaded machine. The last segment may end in a torn record (a crash mid-write),
// which is cut off; the one before it is the only sealed segment a
// machine's crash can have left short (its last sync and the next
// segment's start overlap), so it is checked too.
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
		checked := i >= n-2
		if checked {
			if err := j.scan(s, i == n-1); err != nil {
				return err
			}
		} else {
			st, err := os.Stat(s.path)
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			s.size, s.created = st.Size(), st.ModTime()
		}
		if i < n-1 {
			next := j.segs[i+1].first
			if checked && s.first+s.count != next {
				return fmt.Errorf("journal: segment %s holds %d records, the next begins at %d", s.path, s.count, next)
			}
			s.count = next - s.first
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

// scan reads a segment's frames, building its offsets; in the last segment
// a torn tail is cut off.
func (j *Journal) scan(s *segment, last bool) error {
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	s.created = st.ModTime()
	offsets, end := frames(f)
	s.offsets, s.count, s.size = offsets, uint64(len(offsets)), end
	if end < st.Size() {
		if !last {
			return fmt.Errorf("journal: segment %s is damaged at byte %d", s.path, end)
		}
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
		if n > maxRecord {
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

// index builds a sealed segment's offsets, checking that its frames are
// whole and as many as its place among the segments says. It reads the
// file without the journal's lock: a sealed segment no longer changes.
func (j *Journal) index(path string, count uint64, size int64) ([]int64, error) {
	f, err := j.open(func() (*os.File, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	offsets, end := frames(f)
	if uint64(len(offsets)) != count || end != size {
		return nil, fmt.Errorf("journal: segment %s is damaged at byte %d (record %d of %d)", path, end, len(offsets), count)
	}
	return offsets, nil
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
		if len(p) > maxRecord {
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
		if err == nil && s.offsets == nil {
			s.offsets = offsets
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
		end := s.size
		if hi < s.count {
			end = s.offsets[hi]
		}
		base := s.offsets[lo]
		buf := make([]byte, end-base)
		if _, err := f.ReadAt(buf, base); err != nil {
			return nil, fmt.Errorf("journal: read %s: %w", s.path, err)
		}
		for i := lo; i < hi; i++ {
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
// segment as it first indexes it. A restart reads the newest millions of records back (replay
// windows, the sync's index); Read's two preads per record made that tens
// of seconds at a thousand stations. payload is valid only during the
// call. Appends and readers go on meanwhile; a segment trimmed before
// Scan reaches it is skipped, as its records are no longer kept.
func (j *Journal) Scan(from uint64, fn func(index uint64, payload []byte)) error {
	type part struct {
		path  string
		first uint64 // index of the first record to read
		count uint64
		off   int64
		skip  uint64 // records to pass over from off before first
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	var parts []part
	for _, s := range j.segs {
		if from >= s.first+s.count {
			continue
		}
		lo := max(from, s.first)
		p := part{path: s.path, first: lo, count: s.first + s.count - lo}
		if s.offsets != nil {
			p.off = s.offsets[lo-s.first]
		} else {
			// A sealed segment not read at random yet: from its start.
			p.skip = lo - s.first
		}
		parts = append(parts, p)
	}
	j.mu.Unlock()

	buf := make([]byte, maxRecord)
	var hdr [8]byte
	for _, p := range parts {
		f, err := j.open(func() (*os.File, error) { return os.Open(p.path) })
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		r := bufio.NewReaderSize(io.NewSectionReader(f, p.off, 1<<62), 1<<20)
		for i := range p.skip + p.count {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				f.Close()
				return fmt.Errorf("journal: read %s: %w", p.path, err)
			}
			n := binary.LittleEndian.Uint32(hdr[:4])
			if n > maxRecord {
				f.Close()
				return fmt.Errorf("journal: read %s: frame of %d bytes", p.path, n)
			}
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				f.Close()
				return fmt.Errorf("journal: read %s: %w", p.path, err)
			}
			if i >= p.skip {
				fn(p.first+i-p.skip, buf[:n])
			}
		}
		f.Close()
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
		if s.segment.offsets == nil {
			s.segment.offsets = offsets
		}
		j.mu.Unlock()
		s.offsets = offsets
	}
	i := sort.Search(int(s.count), func(i int) bool { return i > 0 && at(s, s.offsets[i]) })
	if failed != nil {
		return 0, failed
	}
	return s.first + uint64(i), nil
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
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n > maxRecord {
		return nil, fmt.Errorf("journal: read %s: frame of %d bytes", path, n)
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(p, off+8); err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("journal: read %s: the record at byte %d is damaged", path, off)
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

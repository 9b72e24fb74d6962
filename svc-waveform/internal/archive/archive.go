// Package archive is svc-waveform's time-series store: every station's
// 50 Hz three-axis counts and its intensity series (one value of
// intensity, PGA and PGV per 500 ms frame), kept for a retention period as
// miniSEED in the SDS layout, crash-safe through a write-ahead log.
//
// # Layout of the data directory
//
//	sds/YEAR/NET/STA/CHAN.D/NET.STA.00.CHAN.D.YEAR.DOY   the archive (SDS)
//	wal/<16 hex digits>.log                             write-ahead log segments
//	stations.jsonl                                      station ID → SEED names, count size
//	checkpoint                                          what the records hold, where replay starts
//	LOCK                                                held (flock) while a process uses the directory
//
// Point any SDS reader (SeisComP, ObsPy's SDS client, slarchive tools) at
// sds/. Records are 1024 bytes: counts in Steim-2 on channels BNZ, BNN and
// BNE, the intensity series as 32-bit floats on MXI, MXA and MXV (see
// kinds), location 00, the network code from the configuration and a
// station code from the ID (seedcode.Station; the choice is kept in
// stations.jsonl).
//
// # Writing
//
// Apply takes a batch of frames. Under one lock it drops samples the
// archive already has (a channel's coverage is a set of spans of sample
// indexes, so a resent batch, a frame that came twice and a frame that
// overlaps one already stored are all stored once), adds the new ones to
// per-channel buffers (runs), and appends the frames that brought anything
// new to the WAL buffer as one entry. It returns a log sequence number;
// WaitDurable returns once the WAL holding it is synced. The commit loop
// (Run) writes and fsyncs whatever batches have gathered since the last
// sync in one go (group commit: at most one fsync per batch, fewer under
// load), and svc-waveform acks a batch only then.
//
// A run becomes a record as soon as it holds enough samples to fill one
// (1561 samples of small differences at most for Steim-2, 240 floats; a
// record of strong motion holds a few hundred samples), at a day
// boundary (records never span UTC midnight, so a day file holds exactly its
// day), and when it has had nothing new for FlushAge (a station that went
// quiet, or a gap) or at shutdown, as a part-filled record. Cut records are
// written to their day files after the WAL entry that led to them is synced.
//
// # Recovery
//
// Every CheckpointEvery the loop starts a new WAL segment, writes every cut
// record, syncs the file system (syncfs) and writes the checkpoint: the
// coverage of the records, the first segment still needed (the oldest one
// a buffered sample came from) and the first segment after the rotation.
// Older segments are deleted. The first time after a checkpoint that a
// record is cut for a day file, the entry records the file's length
// (a marker). After a crash, Open truncates every file with a marker back to
// that length, so the files hold exactly the records of the checkpoint, then
// replays the remaining segments through the same de-duplication: samples
// in the checkpoint's records are skipped, everything else is buffered
// again and cut anew. So what was acked (synced in the WAL) is never lost
// and never stored twice. A clean Close cuts every buffer into records,
// checkpoints and leaves an empty WAL.
//
// # Retention
//
// Frames older than Retention (or more than ten minutes in the future) are
// refused; queries see nothing older than Retention; day files are removed
// once their whole day is older, and coverage below it is forgotten.
package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/seismo/mseed"

	"shindo.dev/lib/atomicfile"
	"shindo.dev/seismo/seedcode"
)

// Domain errors.
var (
	ErrUnknownStation = errors.New("no data for this station")
	ErrWindow         = errors.New("invalid time window")
	ErrChannel        = errors.New("invalid channel")
	ErrClosed         = errors.New("archive closed")
)

// Limits of what the archive accepts.
const (
	maxFutureMs    = 10 * 60 * 1000
	maxFrameLen    = 500 // samples per axis in one sensor frame
	maxStationID   = 128
	fallbackScale  = 0.001
	sensorRateHz   = 50
	defaultNetwork = "SH"
)

// Options configure a Store.
type Options struct {
	// Dir is the data directory; created if missing.
	Dir string
	// Network is the SEED network code of every station (default "SH").
	Network string
	// Retention is how long data is kept (default 168h).
	Retention time.Duration
	// FlushAge is how long a buffer that gets nothing new waits before it
	// is written as a part-filled record (default 60s).
	FlushAge time.Duration
	// CheckpointEvery is the interval of checkpoints (default 10s).
	CheckpointEvery time.Duration
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// Log receives warnings; slog.Default when nil.
	Log *slog.Logger
	// Metrics registers the store's metrics when set.
	Metrics prometheus.Registerer
}

// Outcome is what Apply did with a frame.
type Outcome uint8

// Outcomes.
const (
	Stored    Outcome = iota // brought samples the archive did not have
	Duplicate                // everything in it was stored already
	Expired                  // older than the retention, or in the future
	Malformed                // not a frame the archive can hold
)

var outcomeNames = [...]string{"stored", "duplicate", "expired", "malformed"}

func (o Outcome) String() string { return outcomeNames[o] }

// Frame is one sensor frame (Intensity false: 50 Hz counts from TimeMs,
// the first sample) or one intensity frame (Intensity true: Values are
// intensity, PGA and PGV of the 500 ms ending at TimeMs).
type Frame struct {
	Station string
	// SEED are the station's codes in the registry (ingest's record
	// carries them); zero, as in records journaled before the registry
	// held codes, has the archive choose them from the id as it did then.
	SEED       seedcode.Codes
	Intensity  bool
	TimeMs     int64
	RateHz     uint32
	ScaleGal   float32
	NS, EW, UD []int32
	Values     [3]float32
}

type station struct {
	id            string
	net, sta, loc string
	// conflict is set once a frame named the station otherwise than its
	// files are named (counted, logged once).
	conflict bool
	scale    float32 // gal per count; 0 until the first sensor frame
	ch       [numChannels]channel
}

// dayFile is one channel-day file.
type dayFile struct {
	path      string // relative to the SDS root
	length    int64  // including records cut but not yet written
	written   int64  // what is on disk
	markEpoch uint64 // checkpoint epoch in which a marker was logged
	idx       *fileIndex
}

// pendingRecord is a record cut but not written yet.
type pendingRecord struct {
	f      *dayFile
	c      *channel
	off    int64
	buf    []byte
	lo, hi int64
	lsn    uint64
}

// Store is the archive. Its methods are safe for concurrent use; Run must
// run for batches to become durable.
type Store struct {
	opts   Options
	log    *slog.Logger
	sds    string
	walDir string
	lock   *os.File

	mu        sync.Mutex
	stations  map[string]*station
	codes     map[string]bool // "NET.STA" in use
	order     []*station      // in order of first sight
	walBuf    []byte
	spare     []byte
	entry     entryWriter
	mapBuf    []byte
	appendLSN uint64
	syncedLSN uint64
	durable   chan struct{}
	seg       uint64
	epoch     uint64
	pending   []*pendingRecord
	err       error
	closed    bool
	scratch   []float32
	gapBuf    []span
	expiredTo int64 // day files before this day are gone

	commitMu sync.Mutex // one commit (or a checkpoint's rotation) at a time
	ckptMu   sync.Mutex // one checkpoint at a time
	ckptBusy atomic.Bool
	segFile  *os.File
	mapFile  *os.File
	fds      map[string]*os.File
	kick     chan struct{}

	m *metrics
}

// Open opens (or creates) the archive in opts.Dir, recovering from the WAL
// what a crash left behind.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("archive: no directory")
	}
	if opts.Network == "" {
		opts.Network = defaultNetwork
	}
	if !seedcode.IsCode(opts.Network, 1, seedcode.MaxNetwork) {
		return nil, fmt.Errorf("archive: network code %q: want 1 or 2 upper-case letters or digits", opts.Network)
	}
	if opts.Retention <= 0 {
		opts.Retention = 168 * time.Hour
	}
	if opts.FlushAge <= 0 {
		opts.FlushAge = time.Minute
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Store{
		opts:     opts,
		log:      opts.Log,
		sds:      filepath.Join(opts.Dir, "sds"),
		walDir:   filepath.Join(opts.Dir, "wal"),
		stations: map[string]*station{},
		codes:    map[string]bool{},
		durable:  make(chan struct{}),
		fds:      map[string]*os.File{},
		kick:     make(chan struct{}, 1),
		m:        newMetrics(opts.Metrics),
	}
	for _, d := range []string{opts.Dir, s.sds, s.walDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("archive directory: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(opts.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("archive lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("archive %s is in use by another process: %w", opts.Dir, err)
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Store) release() {
	for _, f := range s.fds {
		f.Close()
	}
	if s.segFile != nil {
		s.segFile.Close()
	}
	if s.mapFile != nil {
		s.mapFile.Close()
	}
	if s.lock != nil {
		s.lock.Close() // releases the flock
	}
}

// recover loads the station map and checkpoint, rolls the day files back
// to the checkpoint and replays the WAL.
func (s *Store) recover() error {
	mapPath := filepath.Join(s.opts.Dir, stationMapName)
	entries, err := loadStationMap(mapPath)
	if err != nil {
		return fmt.Errorf("station map: %w", err)
	}
	for _, e := range entries {
		if st := s.stations[e.ID]; st != nil {
			st.scale = e.ScaleGal // a later line records the count size
			continue
		}
		loc := Location // lines written before stations had their own
		if e.Location != nil {
			loc = *e.Location
		}
		s.addStation(e.ID, seedcode.Codes{Network: e.Network, Station: e.Station, Location: loc}, e.ScaleGal)
	}
	var cp checkpoint
	switch b, err := os.ReadFile(filepath.Join(s.opts.Dir, checkpointName)); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read checkpoint: %w", err)
	default:
		c, err := decodeCheckpoint(b)
		if err != nil {
			return fmt.Errorf("%s: %w (the archive cannot be recovered safely without it)", filepath.Join(s.opts.Dir, checkpointName), err)
		}
		cp = *c
	}
	for id, sets := range cp.stored {
		st := s.stations[id]
		if st == nil {
			s.log.Warn("checkpoint names a station missing from the station map", slog.String("station", id))
			continue
		}
		for c := range sets {
			st.ch[c].stored = sets[c]
			st.ch[c].cov.s = append([]span(nil), sets[c].s...)
		}
	}
	segs, err := listSegments(s.walDir)
	if err != nil {
		return fmt.Errorf("list WAL: %w", err)
	}
	var replay []uint64
	for _, seg := range segs {
		if seg < cp.replayFrom {
			// Left over by an interrupted cleanup.
			os.Remove(filepath.Join(s.walDir, segmentName(seg)))
			continue
		}
		replay = append(replay, seg)
	}
	// Pass 1: roll day files back to the checkpoint.
	rolled := map[string]bool{}
	for _, seg := range replay {
		if seg < cp.rotatedAt {
			continue
		}
		if _, err := readSegment(filepath.Join(s.walDir, segmentName(seg)), func(it *walItem) error {
			if it.tag != tagMarker || rolled[it.path] {
				return nil
			}
			rolled[it.path] = true
			return s.rollBack(it.path, it.length)
		}); err != nil {
			return fmt.Errorf("WAL segment %d: %w", seg, err)
		}
	}
	// Pass 2: buffer again what is not in the checkpoint's records.
	now := s.opts.Now().UnixMilli()
	frames := 0
	for _, seg := range replay {
		s.seg = seg
		ignored, err := readSegment(filepath.Join(s.walDir, segmentName(seg)), func(it *walItem) error {
			var f Frame
			switch it.tag {
			case tagSensor:
				f = Frame{Station: it.id, TimeMs: it.ms, RateHz: sensorRateHz, UD: it.axes[0], NS: it.axes[1], EW: it.axes[2], ScaleGal: fallbackScale}
				// The map line is synced before the entry, so the
				// station and its count size are known.
				if st := s.stations[it.id]; st != nil && st.scale != 0 {
					f.ScaleGal = st.scale
				}
			case tagIntensity:
				f = Frame{Station: it.id, Intensity: true, TimeMs: it.ms, Values: it.values}
			default:
				return nil
			}
			frames++
			s.applyFrame(&f, now, true)
			return nil
		})
		if err != nil {
			return fmt.Errorf("WAL segment %d: %w", seg, err)
		}
		if ignored > 0 {
			s.log.Warn("WAL segment ends in a torn or corrupt entry", slog.Uint64("segment", seg), slog.Int64("bytes_ignored", ignored))
		}
	}
	s.seg = cp.rotatedAt
	if n := len(segs); n > 0 {
		s.seg = max(s.seg, segs[n-1]+1)
	}
	s.epoch = 1
	if s.segFile, err = createSegment(s.walDir, s.seg); err != nil {
		return fmt.Errorf("WAL: %w", err)
	}
	if s.mapFile, err = os.OpenFile(mapPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("station map: %w", err)
	}
	if len(replay) > 0 {
		s.log.Info("archive recovered", slog.Int("segments", len(replay)), slog.Int("frames", frames), slog.Int("files_rolled_back", len(rolled)))
	}
	s.expire(true)
	return nil
}

// rollBack truncates day file path (relative to the SDS root) to length.
func (s *Store) rollBack(path string, length int64) error {
	if !filepath.IsLocal(path) {
		return fmt.Errorf("marker for %q outside the archive", path)
	}
	full := filepath.Join(s.sds, path)
	var err error
	if length == 0 {
		err = os.Remove(full)
	} else {
		err = os.Truncate(full, length)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("roll back %s: %w", path, err)
	}
	return nil
}

// addStation registers a station under the given SEED codes.
func (s *Store) addStation(id string, c seedcode.Codes, scale float32) *station {
	st := &station{id: id, net: c.Network, sta: c.Station, loc: c.Location, scale: scale}
	for i := range st.ch {
		st.ch[i].kind = &kinds[i]
		st.ch[i].files = map[int64]*dayFile{}
	}
	s.stations[id] = st
	s.codes[c.Key()] = true
	s.order = append(s.order, st)
	return st
}

// station returns the station, creating it under its registry codes seed
// and queueing its map line. A station keeps the names it was first
// archived under: its files carry them. Codes that differ from those, or
// that another station's files already carry (archived before the
// registry held codes), are counted and logged, and the archive's names
// kept — never two stations in one file.
func (s *Store) station(id string, scale float32, seed seedcode.Codes) *station {
	st := s.stations[id]
	if st == nil {
		c, conflict := seed, !seed.IsZero() && s.codes[seed.Key()]
		if conflict {
			s.namingConflict(id, c, "another station's files carry these codes")
		}
		if c.IsZero() || conflict {
			c = seedcode.Codes{Network: s.opts.Network, Location: Location}
			c.Station = seedcode.Station(id, func(sta string) bool { return s.codes[c.Network+"."+sta] })
		}
		st = s.addStation(id, c, scale)
		st.conflict = conflict
		s.queueMapLine(st)
		s.m.stations.Inc()
		return st
	}
	if !seed.IsZero() && !st.conflict && (seed != seedcode.Codes{Network: st.net, Station: st.sta, Location: st.loc}) {
		st.conflict = true
		s.namingConflict(id, seed, "archived as "+st.net+"."+st.sta+"."+st.loc+" before")
	}
	if st.scale == 0 && scale != 0 {
		st.scale = scale
		s.queueMapLine(st)
	}
	return st
}

// namingConflict counts and logs registry codes the archive cannot use.
func (s *Store) namingConflict(id string, c seedcode.Codes, why string) {
	s.m.namingConflicts.Inc()
	s.opts.Log.Warn("station archived under other codes than the registry's", slog.String("station", id),
		slog.String("registry", c.String()), slog.String("why", why))
}

func (s *Store) queueMapLine(st *station) {
	loc := st.loc
	line, _ := json.Marshal(mapEntry{ID: st.id, Network: st.net, Station: st.sta, Location: &loc, ScaleGal: st.scale})
	s.mapBuf = append(append(s.mapBuf, line...), '\n')
}

// Apply stores a batch. out receives each frame's outcome (len(out) ≥
// len(frames)). The returned sequence number is durable once WaitDurable
// returns for it; it covers this batch and every one applied before.
func (s *Store) Apply(frames []Frame, out []Outcome) (uint64, error) {
	now := s.opts.Now().UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, ErrClosed
	}
	first := len(s.pending)
	s.entry.begin(s.walBuf)
	for i := range frames {
		o := s.applyFrame(&frames[i], now, false)
		out[i] = o
		kind := 0
		if frames[i].Intensity {
			kind = 1
		}
		s.m.byOutcome[kind][o].Inc()
	}
	s.seal(first)
	return s.appendLSN, nil
}

// seal closes the entry being built; records cut since pending index first
// become durable with it.
func (s *Store) seal(first int) {
	before := s.entry.start
	s.walBuf = s.entry.end()
	if len(s.walBuf) > before {
		s.appendLSN++
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	for _, r := range s.pending[first:] {
		r.lsn = s.appendLSN
	}
}

func validScale(f float32) bool {
	return f > 0 && !math.IsInf(float64(f), 0)
}

// applyFrame stores one frame under s.mu. In replay, nothing is logged or
// cut.
func (s *Store) applyFrame(f *Frame, now int64, replay bool) Outcome {
	if f.Station == "" || len(f.Station) > maxStationID {
		return Malformed
	}
	// Codes name paths only when a station is first archived: checked
	// then, not on every frame of the hot path (a known station's are
	// only compared with its names).
	if !f.SEED.IsZero() && s.stations[f.Station] == nil && f.SEED.Check() != nil {
		return Malformed
	}
	horizon := now - s.opts.Retention.Milliseconds()
	if f.Intensity {
		if f.TimeMs <= 0 || f.TimeMs%500 != 0 {
			return Malformed
		}
		if f.TimeMs < horizon || f.TimeMs > now+maxFutureMs {
			return Expired
		}
		st := s.station(f.Station, 0, f.SEED)
		idx := f.TimeMs / 500
		stored := false
		for c := chI; c <= chV; c++ {
			ch := &st.ch[c]
			if ch.cov.contains(idx) {
				continue
			}
			v := [1]int32{int32(math.Float32bits(f.Values[c-chI]))}
			r := ch.insert(idx, v[:], s.seg, now)
			stored = true
			if !replay {
				s.cutReady(st, ch, r, false)
			}
		}
		if !stored {
			return Duplicate
		}
		if !replay {
			s.entry.intensity(f.Station, f.TimeMs, f.Values)
		}
		return Stored
	}

	n := len(f.UD)
	if f.RateHz != sensorRateHz || f.TimeMs <= 0 || f.TimeMs%20 != 0 || n == 0 || n > maxFrameLen ||
		len(f.NS) != n || len(f.EW) != n || !validScale(f.ScaleGal) {
		return Malformed
	}
	lo := f.TimeMs / 20
	hi := lo + int64(n)
	if hi*20 <= horizon || f.TimeMs > now+maxFutureMs {
		return Expired
	}
	st := s.station(f.Station, f.ScaleGal, f.SEED)
	axes := [3][]int32{f.UD, f.NS, f.EW}
	if f.ScaleGal != st.scale {
		// One count size per station: other frames are converted to it.
		k := float64(f.ScaleGal) / float64(st.scale)
		for a := range axes {
			x := make([]int32, n)
			for i, v := range axes[a] {
				x[i] = int32(max(min(math.Round(float64(v)*k), math.MaxInt32), math.MinInt32))
			}
			axes[a] = x
		}
		s.m.rescaled.Inc()
	}
	from := max(lo, (horizon+19)/20)
	stored := false
	for c := chZ; c <= chE; c++ {
		ch := &st.ch[c]
		s.gapBuf = s.gapBuf[:0]
		ch.cov.gaps(from, hi, func(a, b int64) { s.gapBuf = append(s.gapBuf, span{a, b}) })
		for _, g := range s.gapBuf {
			r := ch.insert(g.lo, axes[c][g.lo-lo:g.hi-lo], s.seg, now)
			stored = true
			if !replay {
				s.cutReady(st, ch, r, false)
			}
		}
	}
	if !stored {
		return Duplicate
	}
	if !replay {
		s.entry.sensor(f.Station, f.TimeMs, &axes)
	}
	return Stored
}

// cutReady cuts records from the head of run r while one can be filled,
// while r reaches into the next UTC day, or (force) while anything is left.
func (s *Store) cutReady(st *station, ch *channel, r *run, force bool) {
	k := ch.kind
	perDay := dayMs / k.periodMs
	for len(r.x) > 0 {
		dayEnd := (dayOf(r.start*k.periodMs) + 1) * perDay
		limit := len(r.x)
		crosses := r.start+int64(limit) > dayEnd
		if crosses {
			limit = int(dayEnd - r.start)
		}
		if !force && !crosses && limit < k.maxPer {
			break
		}
		n := s.cutRecord(st, ch, r, limit)
		r.consume(n)
	}
	if len(r.x) == 0 {
		ch.dropRun(r)
	}
}

// cutRecord encodes one record from the first samples of r (at most
// limit) and queues it for writing; it returns how many samples it took.
func (s *Store) cutRecord(st *station, ch *channel, r *run, limit int) int {
	k := ch.kind
	day := dayOf(r.start * k.periodMs)
	f := s.dayFile(st, ch, day)
	h := mseed.Header{
		SeqNo:   int(f.length/recordLen)%999999 + 1,
		Network: st.net, Station: st.sta, Location: st.loc, Channel: k.code,
		Start:      time.UnixMilli(r.start * k.periodMs).UTC(),
		SampleRate: k.rate,
		Encoding:   k.enc,
	}
	buf := make([]byte, recordLen)
	var n int
	var err error
	if k.enc == mseed.Float32 {
		s.scratch = s.scratch[:0]
		for _, v := range r.x[:limit] {
			s.scratch = append(s.scratch, math.Float32frombits(uint32(v)))
		}
		n, err = mseed.PackFloat32s(buf, h, s.scratch)
	} else {
		n, err = mseed.PackInts(buf, h, r.x[:limit])
	}
	if err != nil || n == 0 {
		// Codes and times are validated on the way in; this is a bug.
		panic(fmt.Sprintf("archive: cannot encode a record for %s: %v", f.path, err))
	}
	if f.markEpoch != s.epoch {
		s.entry.marker(f.path, f.length)
		f.markEpoch = s.epoch
	}
	rec := &pendingRecord{f: f, c: ch, off: f.length, buf: buf, lo: r.start, hi: r.start + int64(n)}
	f.length += recordLen
	ch.stored.add(rec.lo, rec.hi)
	ch.pending = append(ch.pending, rec)
	s.pending = append(s.pending, rec)
	s.m.samplesCut.Add(float64(n))
	return n
}

// dayFile returns the file of a channel-day, learning its length from disk
// the first time.
func (s *Store) dayFile(st *station, ch *channel, day int64) *dayFile {
	if f := ch.files[day]; f != nil {
		return f
	}
	f := &dayFile{path: sdsPath(st.net, st.sta, st.loc, ch.kind.code, day)}
	if fi, err := os.Stat(filepath.Join(s.sds, f.path)); err == nil {
		f.length = fi.Size() / recordLen * recordLen
		f.written = f.length
	}
	ch.files[day] = f
	return f
}

// WaitDurable waits until sequence number lsn (from Apply) is synced.
func (s *Store) WaitDurable(ctx context.Context, lsn uint64) error {
	for {
		s.mu.Lock()
		synced, err, ch := s.syncedLSN, s.err, s.durable
		s.mu.Unlock()
		if synced >= lsn {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Err reports the store's health: nil while it accepts data.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Store) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.durable)
		s.durable = make(chan struct{})
	}
	s.mu.Unlock()
	s.log.Error("archive failed", slog.Any("error", err))
	select {
	case s.kick <- struct{}{}: // so Run sees it
	default:
	}
}

// Run is the commit loop: it syncs batches as they come and starts a
// checkpoint every CheckpointEvery (in the background: commits go on while
// it syncs the archive), until ctx ends (nil) or a write fails (the error;
// the store then refuses data).
func (s *Store) Run(ctx context.Context) error {
	tick := time.NewTicker(s.opts.CheckpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-tick.C:
			if s.ckptBusy.CompareAndSwap(false, true) {
				go func() {
					defer s.ckptBusy.Store(false)
					if err := s.checkpoint(false); err != nil && !errors.Is(err, ErrClosed) {
						s.fail(err)
					}
				}()
			}
		}
		if err := s.Err(); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil
			}
			return err
		}
		s.commitMu.Lock()
		err := s.commit()
		s.commitMu.Unlock()
		if err != nil {
			s.fail(err)
			return err
		}
	}
}

// Checkpoint runs a checkpoint (with retention) now.
func (s *Store) Checkpoint() error {
	err := s.checkpoint(false)
	if err != nil && !errors.Is(err, ErrClosed) {
		s.fail(err)
	}
	return err
}

// Close writes every buffer as records, checkpoints, empties the WAL and
// releases the directory. Data applied after Close is refused.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	failed := s.err
	s.mu.Unlock()
	var err error
	if failed == nil {
		err = s.checkpoint(true)
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	if s.err == nil {
		s.err = ErrClosed
	}
	close(s.durable)
	s.durable = make(chan struct{})
	s.mu.Unlock()
	s.release()
	return err
}

// commit writes the WAL gathered so far and syncs it, then writes the
// records cut before it.
func (s *Store) commit() error {
	s.mu.Lock()
	buf, mapBuf, lsn := s.walBuf, s.mapBuf, s.appendLSN
	s.walBuf, s.mapBuf = s.spare[:0], nil
	s.mu.Unlock()
	if err := s.writeLog(buf, mapBuf, s.segFile); err != nil {
		return err
	}
	s.mu.Lock()
	s.spare = buf
	s.mu.Unlock()
	return s.markSynced(lsn)
}

// writeLog appends station map lines and WAL entries and syncs both.
func (s *Store) writeLog(buf, mapBuf []byte, seg *os.File) error {
	if len(mapBuf) > 0 {
		if _, err := s.mapFile.Write(mapBuf); err != nil {
			return fmt.Errorf("station map: %w", err)
		}
		if err := s.mapFile.Sync(); err != nil {
			return fmt.Errorf("station map: %w", err)
		}
	}
	if len(buf) == 0 {
		return nil
	}
	start := time.Now()
	if _, err := seg.Write(buf); err != nil {
		return fmt.Errorf("WAL write: %w", err)
	}
	if err := seg.Sync(); err != nil {
		return fmt.Errorf("WAL sync: %w", err)
	}
	s.m.syncs.Inc()
	s.m.syncSeconds.Observe(time.Since(start).Seconds())
	s.m.walBytes.Add(float64(len(buf)))
	return nil
}

// markSynced records lsn as durable, wakes the waiters and writes the
// records that were waiting for it.
func (s *Store) markSynced(lsn uint64) error {
	s.mu.Lock()
	if lsn > s.syncedLSN {
		s.syncedLSN = lsn
		close(s.durable)
		s.durable = make(chan struct{})
	}
	k := 0
	for k < len(s.pending) && s.pending[k].lsn <= lsn {
		k++
	}
	recs := append([]*pendingRecord(nil), s.pending[:k]...)
	s.pending = append(s.pending[:0], s.pending[k:]...)
	s.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		if err := s.writeRecord(r); err != nil {
			return err
		}
	}
	s.mu.Lock()
	for _, r := range recs {
		r.f.written = max(r.f.written, r.off+recordLen)
		if r.f.idx != nil {
			r.f.idx.appendRecord(r.off, r.lo, r.hi)
		}
		if len(r.c.pending) > 0 && r.c.pending[0] == r {
			r.c.pending[0] = nil
			r.c.pending = r.c.pending[1:]
		}
	}
	s.mu.Unlock()
	s.m.records.Add(float64(len(recs)))
	return nil
}

// maxOpenFiles bounds the cache of day files open for writing.
const maxOpenFiles = 1024

func (s *Store) writeRecord(r *pendingRecord) error {
	f := s.fds[r.f.path]
	if f == nil {
		if len(s.fds) >= maxOpenFiles {
			s.closeFiles()
		}
		full := filepath.Join(s.sds, r.f.path)
		var err error
		f, err = os.OpenFile(full, os.O_CREATE|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(filepath.Dir(full), 0o755); err == nil {
				f, err = os.OpenFile(full, os.O_CREATE|os.O_WRONLY, 0o644)
			}
		}
		if err != nil {
			return fmt.Errorf("open day file: %w", err)
		}
		s.fds[r.f.path] = f
	}
	if _, err := f.WriteAt(r.buf, r.off); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}

func (s *Store) closeFiles() {
	for p, f := range s.fds {
		closeDayFile(f)
		delete(s.fds, p)
	}
}

// checkpoint flushes stale buffers (all of them when final), starts a new
// WAL segment, writes every record cut before it, syncs the file system,
// saves the checkpoint and deletes the segments no longer needed. It
// applies the retention first.
func (s *Store) checkpoint(final bool) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.commitMu.Lock()
	locked := true
	defer func() {
		if locked {
			s.commitMu.Unlock()
		}
	}()
	if s.segFile == nil {
		return ErrClosed // released
	}
	if err := s.Err(); err != nil && !final {
		return err
	}
	start := time.Now()
	now := s.opts.Now().UnixMilli()
	s.expire(false)

	s.mu.Lock()
	first := len(s.pending)
	s.entry.begin(s.walBuf)
	stale := now - s.opts.FlushAge.Milliseconds()
	for _, st := range s.order {
		for c := range st.ch {
			ch := &st.ch[c]
			for i := 0; i < len(ch.runs); {
				r := ch.runs[i]
				if final || r.last <= stale {
					s.cutReady(st, ch, r, true) // drops r
					continue
				}
				i++
			}
		}
	}
	s.seal(first)
	// Rotate: what is buffered now belongs to the old segment.
	buf, mapBuf, lsn := s.walBuf, s.mapBuf, s.appendLSN
	s.walBuf, s.mapBuf = nil, nil
	oldSeg := s.segFile
	s.seg++
	s.epoch++
	replayFrom := s.seg
	for _, st := range s.order {
		for c := range st.ch {
			for _, r := range st.ch[c].runs {
				replayFrom = min(replayFrom, r.minSeg())
			}
		}
	}
	image := encodeCheckpoint(replayFrom, s.seg, s.order)
	newSeq := s.seg
	s.mu.Unlock()

	if err := s.writeLog(buf, mapBuf, oldSeg); err != nil {
		return err
	}
	if err := oldSeg.Close(); err != nil {
		return fmt.Errorf("WAL close: %w", err)
	}
	s.segFile = nil
	if !final {
		seg, err := createSegment(s.walDir, newSeq)
		if err != nil {
			return fmt.Errorf("WAL: %w", err)
		}
		s.segFile = seg
	}
	if err := s.markSynced(lsn); err != nil {
		return err
	}
	// Everything the checkpoint covers is written; commits may go on while
	// it is synced (on Linux, where syncfs needs no list of files).
	if syncWithoutLock {
		s.commitMu.Unlock()
		locked = false
	}
	if err := syncAll(s.sds, s.fds); err != nil {
		return fmt.Errorf("sync archive: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(s.opts.Dir, checkpointName), image, 0o644); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	segs, err := listSegments(s.walDir)
	if err != nil {
		return fmt.Errorf("list WAL: %w", err)
	}
	for _, seg := range segs {
		if seg < replayFrom {
			if err := os.Remove(filepath.Join(s.walDir, segmentName(seg))); err != nil {
				return fmt.Errorf("remove WAL segment: %w", err)
			}
		}
	}
	s.m.checkpoints.Inc()
	s.m.checkpointSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// expire applies the retention: in memory, data below the horizon is
// forgotten; on disk, day files whose whole day is older are removed. The
// first call (at open) walks the whole tree; later ones remove the days
// that expired since, by name.
func (s *Store) expire(walk bool) {
	now := s.opts.Now().UnixMilli()
	horizon := now - s.opts.Retention.Milliseconds()
	expireDay := dayOf(horizon)

	s.mu.Lock()
	var paths []string
	from := s.expiredTo
	for _, st := range s.order {
		for c := range st.ch {
			ch := &st.ch[c]
			k := ch.kind
			below := (horizon + k.periodMs - 1) / k.periodMs
			ch.cov.trimBelow(below)
			ch.stored.trimBelow(below)
			for i := 0; i < len(ch.runs); {
				r := ch.runs[i]
				if r.start < below {
					r.consume(int(min(below-r.start, int64(len(r.x)))))
				}
				if len(r.x) == 0 {
					ch.runs = append(ch.runs[:i], ch.runs[i+1:]...)
					continue
				}
				i++
			}
			for day := range ch.files {
				if day < expireDay {
					delete(ch.files, day)
				}
			}
			if !walk && from > 0 {
				for day := from; day < expireDay; day++ {
					paths = append(paths, sdsPath(st.net, st.sta, st.loc, k.code, day))
				}
			}
		}
	}
	s.expiredTo = expireDay
	s.mu.Unlock()

	if walk || from == 0 {
		paths = s.expiredFiles(expireDay)
	}
	if len(paths) == 0 {
		return
	}
	s.closeFiles()
	removed := 0
	for _, p := range paths {
		if err := os.Remove(filepath.Join(s.sds, p)); err == nil {
			removed++
		} else if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove expired day file", slog.String("path", p), slog.Any("error", err))
		}
	}
	s.pruneDirs()
	s.m.expiredFiles.Add(float64(removed))
	if removed > 0 {
		s.log.Info("expired day files removed", slog.Int("files", removed))
	}
}

// expiredFiles walks the SDS tree for day files of days before day.
func (s *Store) expiredFiles(day int64) []string {
	var out []string
	// The walk skips what it cannot read, entry by entry: its own result
	// is always nil.
	_ = filepath.WalkDir(s.sds, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fileDay, ok := sdsDay(d.Name()); ok && fileDay < day {
			if rel, err := filepath.Rel(s.sds, path); err == nil {
				out = append(out, rel)
			}
		}
		return nil
	})
	return out
}

// sdsDay parses the day of an SDS file name ending in .YEAR.DOY.
func sdsDay(name string) (int64, bool) {
	parts := strings.Split(name, ".")
	if len(parts) < 3 {
		return 0, false
	}
	var year, doy int
	if _, err := fmt.Sscanf(parts[len(parts)-2]+" "+parts[len(parts)-1], "%d %d", &year, &doy); err != nil || doy < 1 || doy > 366 {
		return 0, false
	}
	t := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, doy-1)
	return dayOf(t.UnixMilli()), true
}

// pruneDirs removes empty directories of the SDS tree (a year, a station
// that stopped reporting).
func (s *Store) pruneDirs() {
	var dirs []string
	_ = filepath.WalkDir(s.sds, func(path string, d fs.DirEntry, err error) error { // skips what it cannot read
		if err == nil && d.IsDir() && path != s.sds {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // fails, harmlessly, unless empty
	}
}

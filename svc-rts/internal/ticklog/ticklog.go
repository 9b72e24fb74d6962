// Package ticklog is svc-rts's archive of the snapshots it sent: every
// tick, kept for the retention (7 days), so that the replay routes of the
// compatible API answer with what the live stream carried at any past tick
// — byte for byte, as both render with lib/compatjson — rather than a
// recomputation.
//
// Snapshots are grouped in blocks of up to 20 consecutive ticks (10 s).
// A block stores the station IDs once, each station's values at the
// precision the compatible JSON prints, as differences from its previous
// tick, and the rest of each snapshot as protobuf; the block is then
// compressed with zstd. Blocks are appended to one file per UTC hour
// (YYYYMMDDHH.ticks), each framed with its length, checksum and first and
// last tick, so a file is indexed by reading the frame headers only and a
// write torn by a crash is cut off when the file is opened again.
//
// The open block lives in memory until it is full: a crash loses at most
// its 10 s, which the other core, computing the same snapshots, still has.
// Appends never block the tick loop; a block the writer cannot take in time
// is dropped and counted.
package ticklog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

const (
	tickMs = 500
	// blockTicks is how many ticks a block holds at most.
	blockTicks = 20
	// maxBlockTicks bounds what a stored block may claim.
	maxBlockTicks = 1 << 16
	hourMs        = 3600_000
	// frameHeader: payload length, CRC-32C of the payload, first tick,
	// last tick, tick count.
	frameHeader = 4 + 4 + 8 + 8 + 4
	// maxPayload bounds a stored block (a block of 20 ticks of 100,000
	// stations compresses to well below it).
	maxPayload = 64 << 20
	// queueBlocks is how many full blocks may wait for the writer.
	queueBlocks = 64
	// cacheBlocks and cacheBytes bound the blocks kept for readers (replay
	// clients ask for consecutive ticks): at most this many, holding at most
	// about this many bytes, but always the newest read. The cache holds
	// payloads with a reader's place in them, not snapshots: a decoded
	// block of 1,000 stations takes 2.6 MB of messages, its payload about
	// a twentieth.
	cacheBlocks = 16
	cacheBytes  = 8 << 20
	// window is the compression window. The encoder's history is twice
	// the window (16 MB at zstd's default of 8 MB); a block of 1,000
	// stations is about 200 kB before compression, so 1 MB loses nothing
	// below 5,000 stations and little above.
	window     = 1 << 20
	fileSuffix = ".ticks"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors of At.
var (
	// ErrNotFound: the tick is not archived (the core was not computing
	// then, or it is older than the retention).
	ErrNotFound = errors.New("tick not archived")
	// ErrFuture: the tick has not been computed yet.
	ErrFuture = errors.New("tick not computed yet")
)

// Log is the archive of one svc-rts. Append is called from the tick loop;
// At from any goroutine.
type Log struct {
	dir       string
	retention time.Duration
	log       *slog.Logger
	enc       *zstd.Encoder
	dec       *zstd.Decoder

	mu     sync.Mutex
	open   []*rtsv1.Snapshot   // the block being filled, in memory
	sealed [][]*rtsv1.Snapshot // full blocks waiting for the writer
	latest int64               // newest tick appended
	files  map[int64]*hourFile
	cache  []*cachedBlock // most recently used last

	queue   chan []*rtsv1.Snapshot
	dropped atomic.Uint64
	written atomic.Uint64 // blocks
	bytes   atomic.Uint64 // bytes of blocks written
}

type hourFile struct {
	hour   int64 // first ms of the hour
	path   string
	size   int64
	blocks []blockRef // in tick order
}

type blockRef struct {
	first, last int64
	off         int64 // of the frame header
	size        int   // payload bytes
}

type cachedBlock struct {
	first, last int64
	mu          sync.Mutex // over br, which keeps its place
	br          *blockReader
}

// Open opens (creating it if needed) the archive in dir, indexing what is
// there and cutting off a block torn by a crash.
func Open(dir string, retention time.Duration, log *slog.Logger) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(window), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(maxPayload*4))
	if err != nil {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	l := &Log{dir: dir, retention: retention, log: log, enc: enc, dec: dec,
		files: map[int64]*hourFile{}, queue: make(chan []*rtsv1.Snapshot, queueBlocks)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	for _, e := range entries {
		hour, ok := parseName(e.Name())
		if !ok {
			continue
		}
		f, err := l.index(filepath.Join(dir, e.Name()), hour)
		if err != nil {
			return nil, err
		}
		l.files[hour] = f
		if n := len(f.blocks); n > 0 {
			l.latest = max(l.latest, f.blocks[n-1].last)
		}
	}
	return l, nil
}

func fileName(hour int64) string {
	return time.UnixMilli(hour).UTC().Format("2006010215") + fileSuffix
}

func parseName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, fileSuffix)
	if !ok {
		return 0, false
	}
	t, err := time.Parse("2006010215", stem)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// index reads the frame headers of a file; a frame that is incomplete or
// fails its checksum, and everything after it, is cut off.
func (l *Log) index(path string, hour int64) (*hourFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	defer f.Close()
	hf := &hourFile{hour: hour, path: path}
	var hdr [frameHeader]byte
	var off int64
	for {
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			break
		}
		size := binary.LittleEndian.Uint32(hdr[0:])
		sum := binary.LittleEndian.Uint32(hdr[4:])
		first := int64(binary.LittleEndian.Uint64(hdr[8:]))
		last := int64(binary.LittleEndian.Uint64(hdr[16:]))
		if size > maxPayload || first > last || first < hour || last >= hour+hourMs {
			break
		}
		payload := make([]byte, size)
		if _, err := f.ReadAt(payload, off+frameHeader); err != nil || crc32.Checksum(payload, crcTable) != sum {
			break
		}
		if n := len(hf.blocks); n > 0 && first <= hf.blocks[n-1].last {
			break
		}
		hf.blocks = append(hf.blocks, blockRef{first: first, last: last, off: off, size: int(size)})
		off += frameHeader + int64(size)
	}
	if st, err := f.Stat(); err == nil && st.Size() > off {
		l.log.Warn("tick archive: cutting off a torn block", slog.String("file", path), slog.Int64("at", off), slog.Int64("size", st.Size()))
		if err := f.Truncate(off); err != nil {
			return nil, fmt.Errorf("tick archive: %w", err)
		}
	}
	hf.size = off
	return hf, nil
}

// Append adds the snapshot of the next tick. Ticks must increase; an
// older or repeated one (a clock stepped back) is ignored. It never
// blocks.
func (l *Log) Append(s *rtsv1.Snapshot) {
	t := s.GetTimeMs()
	if t <= 0 || t%tickMs != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t <= l.latest {
		return
	}
	if n := len(l.open); n > 0 && (n == blockTicks || t/hourMs != l.open[0].GetTimeMs()/hourMs) {
		l.sealLocked()
	}
	l.open = append(l.open, s)
	l.latest = t
}

// sealLocked hands the open block to the writer; l.mu is held.
func (l *Log) sealLocked() {
	select {
	case l.queue <- l.open:
		l.sealed = append(l.sealed, l.open)
	default:
		l.dropped.Add(1)
	}
	l.open = nil
}

// Run writes sealed blocks and removes hours older than the retention until
// ctx ends; then it writes what is queued and the open block.
func (l *Log) Run(ctx context.Context) error {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	l.expire(time.Now())
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			if len(l.open) > 0 {
				l.sealLocked()
			}
			l.mu.Unlock()
			for {
				select {
				case b := <-l.queue:
					l.write(b)
				default:
					return nil
				}
			}
		case b := <-l.queue:
			l.write(b)
		case now := <-sweep.C:
			l.expire(now)
		}
	}
}

// write appends a block to its hour's file.
func (l *Log) write(snaps []*rtsv1.Snapshot) {
	defer func() {
		l.mu.Lock()
		l.sealed = slices.DeleteFunc(l.sealed, func(b []*rtsv1.Snapshot) bool { return &b[0] == &snaps[0] })
		l.mu.Unlock()
	}()
	if err := l.writeBlock(snaps); err != nil {
		l.dropped.Add(1)
		l.log.Error("tick archive: block not written", slog.Int64("first", snaps[0].GetTimeMs()), slog.Any("error", err))
	}
}

func (l *Log) writeBlock(snaps []*rtsv1.Snapshot) error {
	raw, err := encodeBlock(snaps)
	if err != nil {
		return err
	}
	payload := l.enc.EncodeAll(raw, nil)
	first, last := snaps[0].GetTimeMs(), snaps[len(snaps)-1].GetTimeMs()
	hour := first - first%hourMs
	frame := make([]byte, frameHeader, frameHeader+len(payload))
	binary.LittleEndian.PutUint32(frame[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(payload, crcTable))
	binary.LittleEndian.PutUint64(frame[8:], uint64(first))
	binary.LittleEndian.PutUint64(frame[16:], uint64(last))
	binary.LittleEndian.PutUint32(frame[24:], uint32(len(snaps)))
	frame = append(frame, payload...)

	l.mu.Lock()
	hf := l.files[hour]
	l.mu.Unlock()
	if hf == nil {
		hf = &hourFile{hour: hour, path: filepath.Join(l.dir, fileName(hour))}
	}
	if n := len(hf.blocks); n > 0 && first <= hf.blocks[n-1].last {
		return fmt.Errorf("block at %d does not follow %d", first, hf.blocks[n-1].last)
	}
	f, err := os.OpenFile(hf.path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(frame, hf.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	if l.files[hour] == nil {
		l.files[hour] = hf
	}
	hf.blocks = append(hf.blocks, blockRef{first: first, last: last, off: hf.size, size: len(payload)})
	hf.size += int64(len(frame))
	l.mu.Unlock()
	l.written.Add(1)
	l.bytes.Add(uint64(len(frame)))
	return nil
}

// expire removes the hours that ended before the retention.
func (l *Log) expire(now time.Time) {
	cut := now.Add(-l.retention).UnixMilli()
	l.mu.Lock()
	var old []*hourFile
	for hour, hf := range l.files {
		if hour+hourMs <= cut {
			old = append(old, hf)
			delete(l.files, hour)
		}
	}
	l.cache = slices.DeleteFunc(l.cache, func(c *cachedBlock) bool { return c.first < cut })
	l.mu.Unlock()
	for _, hf := range old {
		if err := os.Remove(hf.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("tick archive: old hour not removed", slog.String("file", hf.path), slog.Any("error", err))
		}
	}
}

// At returns the snapshot of the tick at or before ms.
func (l *Log) At(ms int64) (*rtsv1.Snapshot, error) {
	t := ms - ms%tickMs
	l.mu.Lock()
	if t > l.latest {
		l.mu.Unlock()
		return nil, ErrFuture
	}
	if n := len(l.open); n > 0 && t >= l.open[0].GetTimeMs() {
		defer l.mu.Unlock()
		return find(l.open, t)
	}
	for _, b := range l.sealed {
		if t >= b[0].GetTimeMs() && t <= b[len(b)-1].GetTimeMs() {
			defer l.mu.Unlock()
			return find(b, t)
		}
	}
	for _, c := range l.cache {
		if t >= c.first && t <= c.last {
			l.touchLocked(c)
			l.mu.Unlock()
			return c.at(t)
		}
	}
	hf := l.files[t-t%hourMs]
	var ref blockRef
	var found bool
	var path string
	if hf != nil {
		i, _ := slices.BinarySearchFunc(hf.blocks, t, func(b blockRef, t int64) int {
			switch {
			case b.last < t:
				return -1
			case b.first > t:
				return 1
			}
			return 0
		})
		if i < len(hf.blocks) && hf.blocks[i].first <= t && t <= hf.blocks[i].last {
			ref, found, path = hf.blocks[i], true, hf.path
		}
	}
	l.mu.Unlock()
	if !found {
		return nil, ErrNotFound
	}
	raw, err := l.read(path, ref)
	if err != nil {
		return nil, err
	}
	br, err := newBlockReader(raw, ref.first)
	if err != nil {
		return nil, fmt.Errorf("tick archive: block at %d: %w", ref.first, err)
	}
	c := &cachedBlock{first: ref.first, last: ref.last, br: br}
	l.mu.Lock()
	l.cache = append(l.cache, c)
	held := 0
	for _, c := range l.cache {
		held += c.br.size()
	}
	for len(l.cache) > 1 && (len(l.cache) > cacheBlocks || held > cacheBytes) {
		held -= l.cache[0].br.size()
		l.cache = l.cache[1:]
	}
	l.mu.Unlock()
	return c.at(t)
}

// at builds the snapshot of tick t from a cached block.
func (c *cachedBlock) at(t int64) (*rtsv1.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.br.at(t)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("tick archive: block at %d: %w", c.first, err)
	}
	return s, err
}

func (l *Log) touchLocked(c *cachedBlock) {
	i := slices.Index(l.cache, c)
	l.cache = append(slices.Delete(l.cache, i, i+1), c)
}

func find(snaps []*rtsv1.Snapshot, t int64) (*rtsv1.Snapshot, error) {
	i, ok := slices.BinarySearchFunc(snaps, t, func(s *rtsv1.Snapshot, t int64) int {
		switch {
		case s.GetTimeMs() < t:
			return -1
		case s.GetTimeMs() > t:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, ErrNotFound
	}
	return snaps[i], nil
}

// read returns the decompressed payload of one stored block.
func (l *Log) read(path string, ref blockRef) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotFound // expired meanwhile
		}
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	defer f.Close()
	buf := make([]byte, ref.size)
	if _, err := f.ReadAt(buf, ref.off+frameHeader); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("tick archive: %w", err)
	}
	raw, err := l.dec.DecodeAll(buf, nil)
	if err != nil {
		return nil, fmt.Errorf("tick archive: block at %d: %w", ref.first, err)
	}
	return raw, nil
}

// Stats are the archive's counters.
type Stats struct {
	Blocks, Bytes, Dropped uint64
}

// Stats returns the blocks and bytes written and the blocks dropped.
func (l *Log) Stats() Stats {
	return Stats{Blocks: l.written.Load(), Bytes: l.bytes.Load(), Dropped: l.dropped.Load()}
}

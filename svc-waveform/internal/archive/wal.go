package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"shindo.dev/lib/atomicfile"
)

// The write-ahead log is a sequence of segment files wal/<16 hex digits>.log,
// numbered upwards. A segment starts with an 8-byte magic and holds
// entries; an entry is
//
//	uint32 length | uint32 CRC-32C of the payload | payload
//
// (big-endian) and the payload a sequence of items, each a tag byte:
//
//	1 sensor frame:    id, varint first_sample_ms, uvarint n, then n
//	                   zigzag deltas per axis (Z, N, E), each axis from 0
//	2 intensity frame: id, varint window_end_ms, 3 × uint32 float bits
//	3 file marker:     path, uvarint length
//
// with strings as uvarint length and bytes. One Ingest batch is one entry,
// holding the frames that brought new samples; the group commit writes the
// entries of all batches since the last fsync and syncs once. A marker
// records the length a day file had the first time a record was cut for it
// after a checkpoint: recovery truncates the file back to it and redoes the
// records from the log (see Store).
//
// A torn or corrupt entry ends the replay of its segment.

var walMagic = [8]byte{'S', 'H', 'W', 'A', 'L', '0', '0', '1'}

const (
	tagSensor    = 1
	tagIntensity = 2
	tagMarker    = 3
	// maxEntry bounds an entry read back: far above any batch.
	maxEntry = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(seq uint64) string { return fmt.Sprintf("%016x.log", seq) }

// listSegments returns the segment numbers in dir, ascending.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 16 {
			continue
		}
		if n, err := strconv.ParseUint(name, 16, 64); err == nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// entryWriter builds one entry in place at the end of a buffer.
type entryWriter struct {
	buf   []byte
	start int
}

func (w *entryWriter) begin(buf []byte) {
	w.start = len(buf)
	w.buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
}

// end finishes the entry; an entry without items is dropped.
func (w *entryWriter) end() []byte {
	payload := w.buf[w.start+8:]
	if len(payload) == 0 {
		return w.buf[:w.start]
	}
	binary.BigEndian.PutUint32(w.buf[w.start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(w.buf[w.start+4:], crc32.Checksum(payload, castagnoli))
	return w.buf
}

func (w *entryWriter) str(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *entryWriter) sensor(id string, firstMs int64, axes *[3][]int32) {
	w.buf = append(w.buf, tagSensor)
	w.str(id)
	w.buf = binary.AppendVarint(w.buf, firstMs)
	n := len(axes[0])
	w.buf = binary.AppendUvarint(w.buf, uint64(n))
	for _, x := range axes {
		var prev int32
		for _, v := range x[:n] {
			w.buf = binary.AppendVarint(w.buf, int64(v)-int64(prev))
			prev = v
		}
	}
}

func (w *entryWriter) intensity(id string, endMs int64, v [3]float32) {
	w.buf = append(w.buf, tagIntensity)
	w.str(id)
	w.buf = binary.AppendVarint(w.buf, endMs)
	for _, f := range v {
		w.buf = binary.BigEndian.AppendUint32(w.buf, math.Float32bits(f))
	}
}

func (w *entryWriter) marker(path string, length int64) {
	w.buf = append(w.buf, tagMarker)
	w.str(path)
	w.buf = binary.AppendUvarint(w.buf, uint64(length))
}

// walItem is one decoded item of an entry.
type walItem struct {
	tag     byte
	id      string
	ms      int64
	axes    [3][]int32
	values  [3]float32
	path    string
	length  int64
	samples []int32 // backing store of axes, reused
}

var errCorrupt = errors.New("corrupt WAL entry")

type itemReader struct{ b []byte }

func (r *itemReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, errCorrupt
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *itemReader) varint() (int64, error) {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		return 0, errCorrupt
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *itemReader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)) {
		return "", errCorrupt
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s, nil
}

// next decodes the next item into it.
func (r *itemReader) next(it *walItem) error {
	if len(r.b) == 0 {
		return io.EOF
	}
	it.tag = r.b[0]
	r.b = r.b[1:]
	var err error
	switch it.tag {
	case tagSensor:
		if it.id, err = r.str(); err != nil {
			return err
		}
		if it.ms, err = r.varint(); err != nil {
			return err
		}
		n, err := r.uvarint()
		if err != nil || n > uint64(len(r.b)) {
			return errCorrupt
		}
		it.samples = it.samples[:0]
		for range 3 * n {
			d, err := r.varint()
			if err != nil {
				return err
			}
			it.samples = append(it.samples, int32(d))
		}
		for a := range 3 {
			x := it.samples[a*int(n) : (a+1)*int(n)]
			for i := 1; i < len(x); i++ {
				x[i] += x[i-1]
			}
			it.axes[a] = x
		}
	case tagIntensity:
		if it.id, err = r.str(); err != nil {
			return err
		}
		if it.ms, err = r.varint(); err != nil {
			return err
		}
		if len(r.b) < 12 {
			return errCorrupt
		}
		for i := range 3 {
			it.values[i] = math.Float32frombits(binary.BigEndian.Uint32(r.b[4*i:]))
		}
		r.b = r.b[12:]
	case tagMarker:
		if it.path, err = r.str(); err != nil {
			return err
		}
		l, err := r.uvarint()
		if err != nil || l > math.MaxInt64 {
			return errCorrupt
		}
		it.length = int64(l)
	default:
		return errCorrupt
	}
	return nil
}

// readSegment calls fn for every item of segment file path, in order. It
// stops quietly at a torn or corrupt entry (reported in the count of bytes
// ignored) and returns an error only when the file cannot be read.
func readSegment(path string, fn func(*walItem) error) (ignored int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) < len(walMagic) || [8]byte(b[:8]) != walMagic {
		return int64(len(b)), nil
	}
	b = b[8:]
	var it walItem
	for len(b) > 0 {
		if len(b) < 8 {
			return int64(len(b)), nil
		}
		n := binary.BigEndian.Uint32(b)
		if n == 0 || n > maxEntry || int(n) > len(b)-8 {
			return int64(len(b)), nil
		}
		payload := b[8 : 8+n]
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
			return int64(len(b)), nil
		}
		r := itemReader{payload}
		for {
			err := r.next(&it)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return int64(len(b)), nil
			}
			if err := fn(&it); err != nil {
				return 0, err
			}
		}
		b = b[8+n:]
	}
	return 0, nil
}

// createSegment makes a new, empty segment and syncs it and its directory.
func createSegment(dir string, seq uint64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentName(seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(walMagic[:]); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

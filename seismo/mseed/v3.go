package mseed

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"
)

// miniSEED 3 (FDSN miniSEED 3.0, "Record definition"): a 40-byte fixed
// header in little-endian order, the source identifier, extra headers
// in JSON and the data payload, with no padding, so a record holds
// exactly its samples. A CRC-32C of the whole record guards it.
const (
	// FixedHeader3Len is the length of a miniSEED 3 record's fixed header.
	FixedHeader3Len = 40
	// MaxRecord3Len bounds the records Parse3 accepts: the format allows
	// payloads up to 4 GiB, a reader of outside input does not.
	MaxRecord3Len = 1 << 20
	// sourcePrefix starts an FDSN source identifier.
	sourcePrefix = "FDSN:"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SourceID is the FDSN source identifier of a series with SEED codes:
// FDSN:NET_STA_LOC_B_S_SS, the channel's band, source and subsource
// letters split apart.
func SourceID(network, station, location, channel string) string {
	if len(channel) == 3 {
		channel = channel[0:1] + "_" + channel[1:2] + "_" + channel[2:3]
	}
	return sourcePrefix + network + "_" + station + "_" + location + "_" + channel
}

// parseSourceID splits an FDSN source identifier into SEED codes; a
// channel of single-letter band, source and subsource comes back as its
// three-letter SEED code, any other as B_S_SS.
func parseSourceID(id string) (network, station, location, channel string, err error) {
	rest, ok := strings.CutPrefix(id, sourcePrefix)
	parts := strings.Split(rest, "_")
	if !ok || len(parts) != 6 {
		return "", "", "", "", fmt.Errorf("%w: source identifier %q is not FDSN:NET_STA_LOC_B_S_SS", ErrHeader, id)
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			if c := p[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "", "", "", "", fmt.Errorf("%w: source identifier %q: want upper-case letters, digits and '-'", ErrHeader, id)
			}
		}
	}
	channel = parts[3] + "_" + parts[4] + "_" + parts[5]
	if len(parts[3]) == 1 && len(parts[4]) == 1 && len(parts[5]) == 1 {
		channel = parts[3] + parts[4] + parts[5]
	}
	return parts[0], parts[1], parts[2], channel, nil
}

// pubVersion maps a miniSEED 2 quality indicator to a publication version
// as the miniSEED 3 specification's appendix on 2.4 suggests (R 1, D 2,
// Q 3, M 4), so a series reads the same in both formats.
func pubVersion(q byte) byte {
	switch q {
	case 'R':
		return 1
	case 'Q':
		return 3
	case 'M':
		return 4
	}
	return 2
}

func qualityOf(v byte) byte {
	switch v {
	case 1:
		return 'R'
	case 3:
		return 'Q'
	case 4:
		return 'M'
	}
	return 'D'
}

// AppendInts3 appends to dst one miniSEED 3 record of all of x and returns
// the extended slice. h.Encoding chooses Steim2 (the default when zero)
// or Int32; a Steim-2 record has as many frames as x needs, and a series
// with a difference Steim-2 cannot hold is written as Int32 instead.
// h.SeqNo, h.NumSamples and h.RecordLen are ignored.
func AppendInts3(dst []byte, h Header, x []int32) ([]byte, error) {
	enc := h.Encoding
	if enc == 0 {
		enc = Steim2
	}
	var payload []byte
	switch enc {
	case Steim2:
		// At least one difference per word, fifteen words a frame after
		// the first frame's two constants.
		buf := make([]byte, ((len(x)+2+14)/15+1)*FrameLen)
		if n := EncodeSteim2(buf, x); n == len(x) {
			payload = buf[:usedFrames(buf)*FrameLen]
			break
		}
		enc = Int32
		fallthrough
	case Int32:
		payload = make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(payload[4*i:], uint32(v))
		}
	default:
		return dst, fmt.Errorf("%w: cannot write %s", ErrEncoding, enc)
	}
	return appendRecord3(dst, &h, enc, len(x), payload)
}

// usedFrames counts the frames of a Steim buffer that hold data: each
// has a control word with at least one data nibble, unused ones are zero.
func usedFrames(buf []byte) int {
	n := 0
	for f := 0; f*FrameLen < len(buf); f++ {
		if binary.BigEndian.Uint32(buf[f*FrameLen:]) != 0 {
			n = f + 1
		}
	}
	return max(n, 1)
}

// AppendFloat32s3 appends one FLOAT32 miniSEED 3 record of all of x.
func AppendFloat32s3(dst []byte, h Header, x []float32) ([]byte, error) {
	payload := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(payload[4*i:], math.Float32bits(v))
	}
	return appendRecord3(dst, &h, Float32, len(x), payload)
}

func appendRecord3(dst []byte, h *Header, enc Encoding, n int, payload []byte) ([]byte, error) {
	if h.Network == "" || h.Station == "" || len(h.Channel) != 3 && strings.Count(h.Channel, "_") != 2 {
		return dst, fmt.Errorf("%w: codes %q %q %q %q", ErrArgument, h.Network, h.Station, h.Location, h.Channel)
	}
	id := SourceID(h.Network, h.Station, h.Location, h.Channel)
	if len(id) > math.MaxUint8 {
		return dst, fmt.Errorf("%w: source identifier %q longer than 255", ErrArgument, id)
	}
	if _, _, _, _, err := parseSourceID(id); err != nil { // the reader's rules
		return dst, fmt.Errorf("%w: %w", ErrArgument, err)
	}
	t := h.Start.UTC()
	if t.Year() < 1900 || t.Year() > 2100 {
		return dst, fmt.Errorf("%w: start time %v outside 1900–2100", ErrArgument, t)
	}
	rate := h.SampleRate
	switch {
	case rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0):
		return dst, fmt.Errorf("%w: sample rate %v Hz", ErrArgument, rate)
	case rate > 0 && rate < 1:
		rate = -1 / rate // a period keeps the resolution of slow rates
	}
	start := len(dst)
	dst = append(dst, make([]byte, FixedHeader3Len)...)
	b := dst[start:]
	le := binary.LittleEndian
	copy(b, "MS")
	b[2] = 3
	b[3] = 0 // flags
	le.PutUint32(b[4:], uint32(t.Nanosecond()))
	le.PutUint16(b[8:], uint16(t.Year()))
	le.PutUint16(b[10:], uint16(t.YearDay()))
	b[12], b[13], b[14] = byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	b[15] = byte(enc)
	le.PutUint64(b[16:], math.Float64bits(rate))
	le.PutUint32(b[24:], uint32(n))
	b[32] = pubVersion(h.Quality)
	b[33] = byte(len(id))
	le.PutUint16(b[34:], 0) // no extra headers
	le.PutUint32(b[36:], uint32(len(payload)))
	dst = append(dst, id...)
	dst = append(dst, payload...)
	le.PutUint32(dst[start+28:], crc32.Checksum(dst[start:], castagnoli))
	return dst, nil
}

// IsRecord3 tells whether b starts like a miniSEED 3 record.
func IsRecord3(b []byte) bool {
	return len(b) >= 3 && b[0] == 'M' && b[1] == 'S' && b[2] == 3
}

// Parse3 decodes the miniSEED 3 record at the start of b, checking its
// CRC. Header.RecordLen is the record's length; a source identifier that
// is not FDSN:NET_STA_LOC_B_S_SS is an error.
func Parse3(b []byte) (*Record, error) {
	if len(b) < FixedHeader3Len {
		return nil, fmt.Errorf("%w: %d bytes", ErrHeader, len(b))
	}
	if !IsRecord3(b) {
		return nil, fmt.Errorf("%w: not a miniSEED 3 record", ErrHeader)
	}
	le := binary.LittleEndian
	idLen, extraLen, dataLen := int(b[33]), int(le.Uint16(b[34:])), int64(le.Uint32(b[36:]))
	total := int64(FixedHeader3Len+idLen+extraLen) + dataLen
	if total > MaxRecord3Len {
		return nil, fmt.Errorf("%w: record of %d bytes, at most %d read", ErrHeader, total, MaxRecord3Len)
	}
	if int64(len(b)) < total {
		return nil, fmt.Errorf("%w: record of %d bytes, have %d", ErrHeader, total, len(b))
	}
	rec := b[:total]
	want := le.Uint32(rec[28:])
	crc := crc32.Update(0, castagnoli, rec[:28])
	crc = crc32.Update(crc, castagnoli, []byte{0, 0, 0, 0})
	crc = crc32.Update(crc, castagnoli, rec[32:])
	if crc != want {
		return nil, fmt.Errorf("%w: CRC %08x, record says %08x", ErrData, crc, want)
	}
	var h Header
	year, doy := int(le.Uint16(rec[8:])), int(le.Uint16(rec[10:]))
	ns, hour, minute, sec := int(le.Uint32(rec[4:])), int(rec[12]), int(rec[13]), int(rec[14])
	if doy < 1 || doy > 366 || hour > 23 || minute > 59 || sec > 60 || ns > 999_999_999 {
		return nil, fmt.Errorf("%w: start time %d,%d,%d:%d:%d.%09d", ErrHeader, year, doy, hour, minute, sec, ns)
	}
	h.Start = time.Date(year, 1, 1, hour, minute, sec, ns, time.UTC).AddDate(0, 0, doy-1)
	h.Encoding = Encoding(rec[15])
	switch rate := math.Float64frombits(le.Uint64(rec[16:])); {
	case math.IsNaN(rate) || math.IsInf(rate, 0):
		return nil, fmt.Errorf("%w: sample rate %v", ErrHeader, rate)
	case rate < 0:
		h.SampleRate = -1 / rate
	default:
		h.SampleRate = rate
	}
	n := int64(le.Uint32(rec[24:]))
	h.Quality = qualityOf(rec[32])
	var err error
	h.Network, h.Station, h.Location, h.Channel, err = parseSourceID(string(rec[FixedHeader3Len : FixedHeader3Len+idLen]))
	if err != nil {
		return nil, err
	}
	h.RecordLen = int(total)
	h.DataOffset = FixedHeader3Len + idLen + extraLen
	h.LittleEndian = true
	r := &Record{Header: h}
	if n == 0 {
		return r, nil
	}
	// No encoding packs more than two samples a byte (Steim-2 at most
	// seven a word): a larger count is a lie that would allocate.
	if n > 2*dataLen {
		return nil, fmt.Errorf("%w: %d samples in %d bytes", ErrData, n, dataLen)
	}
	r.NumSamples = int(n)
	var order binary.ByteOrder = binary.LittleEndian
	if h.Encoding == Steim1 || h.Encoding == Steim2 {
		order = binary.BigEndian // Steim frames keep SEED's word order
	}
	r.Ints, r.Floats, err = decodeSamples(h.Encoding, rec[h.DataOffset:], r.NumSamples, order)
	if err != nil {
		return nil, err
	}
	return r, nil
}

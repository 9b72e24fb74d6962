package mseed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Encoding is the format of a record's data section (blockette 1000,
// field 3).
type Encoding uint8

// Encodings this package decodes; it writes Int32, Float32 and Steim2.
const (
	Int16   Encoding = 1
	Int32   Encoding = 3
	Float32 Encoding = 4
	Float64 Encoding = 5
	Steim1  Encoding = 10
	Steim2  Encoding = 11
)

func (e Encoding) String() string {
	switch e {
	case Int16:
		return "INT16"
	case Int32:
		return "INT32"
	case Float32:
		return "FLOAT32"
	case Float64:
		return "FLOAT64"
	case Steim1:
		return "STEIM1"
	case Steim2:
		return "STEIM2"
	}
	return fmt.Sprintf("encoding %d", uint8(e))
}

func (e Encoding) isFloat() bool { return e == Float32 || e == Float64 }

// Sizes of the parts of a record as this package writes it.
const (
	// FixedHeaderLen is the length of the fixed section of the data header.
	FixedHeaderLen = 48
	// DataOffset is where the data section starts in written records: the
	// fixed header and blockette 1000, rounded up to a Steim frame.
	DataOffset = 64
	// FrameLen is the length of a Steim frame.
	FrameLen = 64
	// MinRecordLen and MaxRecordLen bound the record lengths read.
	MinRecordLen = 128
	MaxRecordLen = 65536
)

// Errors of the decoders; they are wrapped with detail.
var (
	ErrHeader    = errors.New("mseed: bad fixed header")
	ErrBlockette = errors.New("mseed: bad blockette")
	ErrNoB1000   = errors.New("mseed: no blockette 1000")
	ErrEncoding  = errors.New("mseed: unsupported encoding")
	ErrData      = errors.New("mseed: corrupt data section")
	ErrIntegrity = errors.New("mseed: last sample differs from the reverse integration constant")
	ErrArgument  = errors.New("mseed: bad argument")
)

// Header is the part of a data record's header that matters for time
// series: identification, timing and layout.
type Header struct {
	// SeqNo is the record's sequence number, 0–999999.
	SeqNo int
	// Quality is the data quality indicator: 'D', 'R', 'Q' or 'M'.
	Quality byte
	// Network, Station, Location and Channel identify the series; at most 2,
	// 5, 2 and 3 characters.
	Network, Station, Location, Channel string
	// Start is the time of the first sample (0.1 ms resolution, or 1 µs with
	// blockette 1001), UTC.
	Start time.Time
	// SampleRate is in Hz; 0 for records without samples.
	SampleRate float64
	// NumSamples is the number of samples in the record.
	NumSamples int
	// Encoding is the data format.
	Encoding Encoding
	// RecordLen is the record length in bytes, a power of two.
	RecordLen int
	// LittleEndian is true for records in little-endian word order (read
	// only; written records are big-endian).
	LittleEndian bool
	// DataOffset is where the data section begins (read only).
	DataOffset int
}

// SamplePeriod is the time between samples, 0 without a rate.
func (h *Header) SamplePeriod() time.Duration {
	if h.SampleRate <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(time.Second) / h.SampleRate))
}

// End is the time just after the last sample: Start + NumSamples periods.
func (h *Header) End() time.Time {
	return h.Start.Add(time.Duration(h.NumSamples) * h.SamplePeriod())
}

// SourceName is NET_STA_LOC_CHAN, as libmseed names series.
func (h *Header) SourceName() string {
	return h.Network + "_" + h.Station + "_" + h.Location + "_" + h.Channel
}

// Record is a decoded data record. Integer encodings fill Ints, float
// encodings fill Floats.
type Record struct {
	Header
	Ints   []int32
	Floats []float64
}

// recordLenExp returns n such that 1<<n == length, or an error.
func recordLenExp(length int) (uint8, error) {
	for n := 7; n <= 16; n++ {
		if length == 1<<n {
			return uint8(n), nil
		}
	}
	return 0, fmt.Errorf("%w: record length %d is not a power of two from %d to %d", ErrArgument, length, MinRecordLen, MaxRecordLen)
}

// rateFactors encodes a sample rate as the header's factor and multiplier:
// integer rates up to 32767 Hz, or periods of a whole number of seconds.
func rateFactors(rate float64) (int16, int16, error) {
	switch {
	case rate == 0:
		return 0, 0, nil
	case rate >= 1 && rate <= math.MaxInt16 && rate == math.Trunc(rate):
		return int16(rate), 1, nil
	case rate > 0 && rate < 1:
		period := 1 / rate
		if p := math.Round(period); math.Abs(p-period) < 1e-9 && p <= math.MaxInt16 {
			return -int16(p), 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: sample rate %v Hz cannot be written as a factor and multiplier", ErrArgument, rate)
}

// rateFromFactors is the SEED rule for factor f and multiplier m.
func rateFromFactors(f, m int16) float64 {
	switch {
	case f == 0 || m == 0:
		return 0
	case f > 0 && m > 0:
		return float64(f) * float64(m)
	case f > 0 && m < 0:
		return -float64(f) / float64(m)
	case f < 0 && m > 0:
		return -float64(m) / float64(f)
	default:
		return 1 / (float64(f) * float64(m))
	}
}

// putCode writes s left-justified and space-padded into dst.
func putCode(dst []byte, s string) {
	n := copy(dst, s)
	for i := n; i < len(dst); i++ {
		dst[i] = ' '
	}
}

func checkCode(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%w: %s %q longer than %d", ErrArgument, what, s, max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ') {
			return fmt.Errorf("%w: %s %q: want upper-case letters and digits", ErrArgument, what, s)
		}
	}
	return nil
}

// putHeader writes the fixed header and blockette 1000 for h into buf,
// whose length is the record length; n is the number of samples.
func putHeader(buf []byte, h *Header, enc Encoding, n int) error {
	exp, err := recordLenExp(len(buf))
	if err != nil {
		return err
	}
	for _, c := range []struct {
		what, s string
		max     int
	}{{"network", h.Network, 2}, {"station", h.Station, 5}, {"location", h.Location, 2}, {"channel", h.Channel, 3}} {
		if err := checkCode(c.what, c.s, c.max); err != nil {
			return err
		}
	}
	if h.SeqNo < 0 || h.SeqNo > 999999 {
		return fmt.Errorf("%w: sequence number %d", ErrArgument, h.SeqNo)
	}
	f, m, err := rateFactors(h.SampleRate)
	if err != nil {
		return err
	}
	t := h.Start.UTC()
	if t.Year() < 1900 || t.Year() > 2100 {
		return fmt.Errorf("%w: start time %v outside 1900–2100", ErrArgument, t)
	}
	if t.Nanosecond()%100_000 != 0 {
		return fmt.Errorf("%w: start time %v finer than 0.1 ms", ErrArgument, t)
	}
	q := h.Quality
	if q == 0 {
		q = 'D'
	}
	be := binary.BigEndian
	copy(buf[0:6], fmt.Sprintf("%06d", h.SeqNo))
	buf[6] = q
	buf[7] = ' '
	putCode(buf[8:13], h.Station)
	putCode(buf[13:15], h.Location)
	putCode(buf[15:18], h.Channel)
	putCode(buf[18:20], h.Network)
	be.PutUint16(buf[20:], uint16(t.Year()))
	be.PutUint16(buf[22:], uint16(t.YearDay()))
	buf[24] = byte(t.Hour())
	buf[25] = byte(t.Minute())
	buf[26] = byte(t.Second())
	buf[27] = 0
	be.PutUint16(buf[28:], uint16(t.Nanosecond()/100_000))
	be.PutUint16(buf[30:], uint16(n))
	be.PutUint16(buf[32:], uint16(f))
	be.PutUint16(buf[34:], uint16(m))
	buf[36], buf[37], buf[38] = 0, 0, 0 // activity, I/O and quality flags
	buf[39] = 1                         // one blockette follows
	be.PutUint32(buf[40:], 0)           // time correction
	be.PutUint16(buf[44:], DataOffset)
	be.PutUint16(buf[46:], FixedHeaderLen)
	// Blockette 1000.
	be.PutUint16(buf[48:], 1000)
	be.PutUint16(buf[50:], 0) // no next blockette
	buf[52] = byte(enc)
	buf[53] = 1 // big-endian
	buf[54] = exp
	buf[55] = 0
	clear(buf[56:DataOffset])
	return nil
}

// PackInts writes one record into buf (its length is the record length: a
// power of two from 128 to 65536) holding as many leading samples of x as
// fit, and returns how many it took. h.Encoding chooses Steim2 (the
// default when zero) or Int32; h.NumSamples and h.RecordLen are ignored.
// Unused space is zeroed. With Steim-2, a difference between samples that
// needs more than 30 bits ends the record before it.
func PackInts(buf []byte, h Header, x []int32) (int, error) {
	enc := h.Encoding
	if enc == 0 {
		enc = Steim2
	}
	if len(buf) < MinRecordLen {
		return 0, fmt.Errorf("%w: record length %d", ErrArgument, len(buf))
	}
	data := buf[DataOffset:]
	var n int
	switch enc {
	case Steim2:
		n = EncodeSteim2(data, x)
	case Int32:
		n = min(len(x), len(data)/4)
		for i := range n {
			binary.BigEndian.PutUint32(data[4*i:], uint32(x[i]))
		}
		clear(data[4*n:])
	default:
		return 0, fmt.Errorf("%w: cannot write %s", ErrEncoding, enc)
	}
	if err := putHeader(buf, &h, enc, n); err != nil {
		return 0, err
	}
	return n, nil
}

// PackFloat32s writes one FLOAT32 record of the leading samples of x into
// buf, like PackInts, and returns how many it took.
func PackFloat32s(buf []byte, h Header, x []float32) (int, error) {
	if len(buf) < MinRecordLen {
		return 0, fmt.Errorf("%w: record length %d", ErrArgument, len(buf))
	}
	data := buf[DataOffset:]
	n := min(len(x), len(data)/4)
	for i := range n {
		binary.BigEndian.PutUint32(data[4*i:], math.Float32bits(x[i]))
	}
	clear(data[4*n:])
	if err := putHeader(buf, &h, Float32, n); err != nil {
		return 0, err
	}
	return n, nil
}

// PackText writes one ASCII record (encoding 0, a log record such as
// SeedLink's INFO replies) of the leading bytes of text into buf, like
// PackInts, and returns how many it took. h.SampleRate should be 0.
func PackText(buf []byte, h Header, text []byte) (int, error) {
	if len(buf) < MinRecordLen {
		return 0, fmt.Errorf("%w: record length %d", ErrArgument, len(buf))
	}
	data := buf[DataOffset:]
	n := copy(data, text)
	clear(data[n:])
	if err := putHeader(buf, &h, 0, n); err != nil {
		return 0, err
	}
	return n, nil
}

// MaxSamples returns the most samples a record of recordLen bytes written
// by this package can hold: 4 bytes each for Int32 and Float32, and for
// Steim2 seven per data word (two words of the first frame hold the
// integration constants).
func MaxSamples(recordLen int, enc Encoding) int {
	data := recordLen - DataOffset
	switch enc {
	case Steim2:
		return 7 * (data/FrameLen*15 - 2)
	case Steim1:
		return 4 * (data/FrameLen*15 - 2)
	default:
		return data / 4
	}
}

// byteOrder guesses the record's byte order from its start year, as
// libmseed does: the year read big-endian must be a plausible one.
func byteOrder(b []byte) (binary.ByteOrder, bool) {
	if y := binary.BigEndian.Uint16(b[20:]); y >= 1900 && y <= 2100 {
		return binary.BigEndian, true
	}
	if y := binary.LittleEndian.Uint16(b[20:]); y >= 1900 && y <= 2100 {
		return binary.LittleEndian, true
	}
	return nil, false
}

func trimCode(b []byte) string { return strings.TrimRight(string(b), " \x00") }

// ParseHeader reads the header and blockettes of the record at the start of
// b without decoding its data. b must hold at least the fixed header and
// the blockettes; the record length comes from blockette 1000.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < FixedHeaderLen {
		return h, fmt.Errorf("%w: %d bytes", ErrHeader, len(b))
	}
	for i := range 6 {
		if c := b[i]; !(c >= '0' && c <= '9' || c == ' ' || c == 0) {
			return h, fmt.Errorf("%w: sequence number %q", ErrHeader, b[:6])
		}
	}
	switch b[6] {
	case 'D', 'R', 'Q', 'M':
	default:
		return h, fmt.Errorf("%w: quality indicator %q", ErrHeader, b[6])
	}
	order, ok := byteOrder(b)
	if !ok {
		return h, fmt.Errorf("%w: implausible start year", ErrHeader)
	}
	for i := range 6 {
		if c := b[i]; c >= '0' && c <= '9' {
			h.SeqNo = h.SeqNo*10 + int(c-'0')
		}
	}
	h.Quality = b[6]
	h.LittleEndian = order == binary.LittleEndian
	h.Station = trimCode(b[8:13])
	h.Location = trimCode(b[13:15])
	h.Channel = trimCode(b[15:18])
	h.Network = trimCode(b[18:20])

	year, doy := int(order.Uint16(b[20:])), int(order.Uint16(b[22:]))
	hour, minute, sec, fract := int(b[24]), int(b[25]), int(b[26]), int(order.Uint16(b[28:]))
	if doy < 1 || doy > 366 || hour > 23 || minute > 59 || sec > 60 || fract > 9999 {
		return h, fmt.Errorf("%w: start time %d,%d,%d:%d:%d.%04d", ErrHeader, year, doy, hour, minute, sec, fract)
	}
	h.Start = time.Date(year, 1, 1, hour, minute, sec, fract*100_000, time.UTC).AddDate(0, 0, doy-1)
	h.NumSamples = int(order.Uint16(b[30:]))
	h.SampleRate = rateFromFactors(int16(order.Uint16(b[32:])), int16(order.Uint16(b[34:])))
	activity := b[36]
	nblk := int(b[39])
	correction := int32(order.Uint32(b[40:]))
	h.DataOffset = int(order.Uint16(b[44:]))
	next := int(order.Uint16(b[46:]))

	var micros int
	found := false
	// Follow the blockette chain; offsets must increase, so it ends.
	for i := 0; next != 0 && i < 64; i++ {
		if found && (i >= nblk || next+8 > len(b)) {
			// The count says the chain is done, or the caller gave only
			// the start of the record (Reader): B1000 is what it needs.
			break
		}
		if next < FixedHeaderLen || next+4 > len(b) {
			return h, fmt.Errorf("%w: offset %d outside the record", ErrBlockette, next)
		}
		typ := int(order.Uint16(b[next:]))
		following := int(order.Uint16(b[next+2:]))
		if following != 0 && following <= next {
			return h, fmt.Errorf("%w: chain goes back from %d to %d", ErrBlockette, next, following)
		}
		switch typ {
		case 1000:
			if next+8 > len(b) {
				return h, fmt.Errorf("%w: blockette 1000 cut short", ErrBlockette)
			}
			h.Encoding = Encoding(b[next+4])
			exp := int(b[next+6])
			if exp < 7 || exp > 16 {
				return h, fmt.Errorf("%w: record length 2^%d", ErrBlockette, exp)
			}
			h.RecordLen = 1 << exp
			found = true
		case 100:
			if next+8 > len(b) {
				return h, fmt.Errorf("%w: blockette 100 cut short", ErrBlockette)
			}
			if r := math.Float32frombits(order.Uint32(b[next+4:])); r > 0 && !math.IsInf(float64(r), 0) {
				h.SampleRate = float64(r)
			}
		case 1001:
			if next+8 > len(b) {
				return h, fmt.Errorf("%w: blockette 1001 cut short", ErrBlockette)
			}
			micros = int(int8(b[next+5]))
		}
		next = following
	}
	if !found {
		return h, ErrNoB1000
	}
	if h.RecordLen < FixedHeaderLen+8 {
		return h, fmt.Errorf("%w: record length %d", ErrBlockette, h.RecordLen)
	}
	if h.NumSamples > 0 && (h.DataOffset < FixedHeaderLen || h.DataOffset >= h.RecordLen) {
		return h, fmt.Errorf("%w: data offset %d in a record of %d bytes", ErrHeader, h.DataOffset, h.RecordLen)
	}
	h.Start = h.Start.Add(time.Duration(micros) * time.Microsecond)
	// Bit 1 of the activity flags says the correction is already applied.
	if activity&0x02 == 0 && correction != 0 {
		h.Start = h.Start.Add(time.Duration(correction) * 100 * time.Microsecond)
	}
	return h, nil
}

// Parse decodes the record at the start of b, which must hold the whole
// record (its length comes from blockette 1000).
func Parse(b []byte) (*Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if len(b) < h.RecordLen {
		return nil, fmt.Errorf("%w: record of %d bytes, have %d", ErrHeader, h.RecordLen, len(b))
	}
	r := &Record{Header: h}
	if h.NumSamples == 0 {
		return r, nil
	}
	var order binary.ByteOrder = binary.BigEndian
	if h.LittleEndian {
		order = binary.LittleEndian
	}
	r.Ints, r.Floats, err = decodeSamples(h.Encoding, b[h.DataOffset:h.RecordLen], h.NumSamples, order)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// decodeSamples decodes n samples of data in the given encoding and word
// order: integers into ints, floats into floats.
func decodeSamples(enc Encoding, data []byte, n int, order binary.ByteOrder) (ints []int32, floats []float64, err error) {
	switch enc {
	case Int16, Int32, Float32, Float64:
		size := map[Encoding]int{Int16: 2, Int32: 4, Float32: 4, Float64: 8}[enc]
		if n*size > len(data) {
			return nil, nil, fmt.Errorf("%w: %d %s samples need %d bytes, have %d", ErrData, n, enc, n*size, len(data))
		}
		if enc.isFloat() {
			floats = make([]float64, n)
		} else {
			ints = make([]int32, n)
		}
		for i := range n {
			switch enc {
			case Int16:
				ints[i] = int32(int16(order.Uint16(data[2*i:])))
			case Int32:
				ints[i] = int32(order.Uint32(data[4*i:]))
			case Float32:
				floats[i] = float64(math.Float32frombits(order.Uint32(data[4*i:])))
			case Float64:
				floats[i] = math.Float64frombits(order.Uint64(data[8*i:]))
			}
		}
	case Steim1:
		ints, err = DecodeSteim1(data, n, order)
	case Steim2:
		ints, err = DecodeSteim2(data, n, order)
	default:
		err = fmt.Errorf("%w: %s", ErrEncoding, enc)
	}
	if err != nil {
		return nil, nil, err
	}
	return ints, floats, nil
}

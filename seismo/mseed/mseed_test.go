package mseed

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func testHeader() Header {
	return Header{
		SeqNo: 1, Network: "SH", Station: "00042", Location: "00", Channel: "BNZ",
		Start:      time.Date(2024, 3, 1, 12, 34, 56, 789_000_000, time.UTC),
		SampleRate: 50,
	}
}

// TestHeaderLayout checks every byte of the header and blockette 1000
// against the SEED 2.4 layout, worked out by hand.
func TestHeaderLayout(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 512)
	n, err := PackInts(buf, testHeader(), []int32{5, 6, 4})
	if err != nil || n != 3 {
		t.Fatalf("PackInts = %d, %v", n, err)
	}
	want := strings.Join([]string{
		"303030303031",            // sequence number "000001"
		"44",                      // quality 'D'
		"20",                      // reserved
		"3030303432",              // station "00042"
		"3030",                    // location "00"
		"424e5a",                  // channel "BNZ"
		"5348",                    // network "SH"
		"07e8" + "003d",           // 2024, day 61 (1 March, a leap year)
		"0c" + "22" + "38",        // 12:34:56
		"00",                      // unused
		"1ed2",                    // 7890 × 0.0001 s = .789
		"0003",                    // 3 samples
		"0032" + "0001",           // rate factor 50, multiplier 1
		"000000",                  // activity, I/O, quality flags
		"01",                      // one blockette
		"00000000",                // time correction
		"0040",                    // data at 64
		"0030",                    // first blockette at 48
		"03e8" + "0000",           // blockette 1000, no next
		"0b" + "01" + "09" + "00", // Steim-2, big-endian, 2^9 = 512 bytes, reserved
		"0000000000000000",        // padding to 64
	}, "")
	if got := hex.EncodeToString(buf[:64]); got != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
	// First frame: nibbles, X0 = 5, Xn = 4, then one 7×4 word holding the
	// differences 0 (ignored), +1, -2 and four zero pads.
	frame := binary.BigEndian
	if c := frame.Uint32(buf[64:]); c != 0x3<<(30-2*3) {
		t.Errorf("control word %08x, want nibble 11 for word 3", c)
	}
	if x0, xn := frame.Uint32(buf[68:]), frame.Uint32(buf[72:]); x0 != 5 || xn != 4 {
		t.Errorf("X0 %d Xn %d, want 5 and 4", x0, xn)
	}
	// dnib 10, then 4-bit fields from bit 27: 0, 1, e (-2), 0, 0, 0, 0.
	if w := frame.Uint32(buf[76:]); w != 0x801e0000 {
		t.Errorf("data word %08x, want 801e0000", w)
	}
	if !bytes.Equal(buf[80:], make([]byte, 512-80)) {
		t.Error("unused space not zeroed")
	}
}

// TestSteim2Packings drives each of Steim-2's seven packings with
// differences of exactly its width and checks the word's nibble, dnib and
// bit layout.
func TestSteim2Packings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		diffs  []int32 // after the ignored first difference
		nibble uint32
		word   uint32 // the first data word (holds d0 = 0 and the first diffs)
	}{
		// 7×4: dnib 10, fields at bits 24, 20, …, 0 (bits 29–28 unused).
		{"7x4", []int32{7, -8, 1, -1, 2, -2}, 3, 2<<30 | 0<<24 | 7<<20 | 8<<16 | 1<<12 | 0xf<<8 | 2<<4 | 0xe},
		// 6×5: dnib 01, fields at 25, 20, …, 0.
		{"6x5", []int32{15, -16, 8, -9, 1}, 3, 1<<30 | 0<<25 | 15<<20 | 16<<15 | 8<<10 | 0x17<<5 | 1},
		// 5×6: dnib 00, fields at 24, 18, …, 0.
		{"5x6", []int32{31, -32, 16, -17}, 3, 0<<30 | 0<<24 | 31<<18 | 32<<12 | 16<<6 | 0x2f},
		// 4×8: nibble 01, one byte each, no dnib.
		{"4x8", []int32{127, -128, 100}, 1, 0<<24 | 127<<16 | 0x80<<8 | 100},
		// 3×10: dnib 11, fields at 20, 10, 0.
		{"3x10", []int32{511, -512}, 2, 3<<30 | 0<<20 | 511<<10 | 0x200},
		// 2×15: dnib 10, fields at 15, 0.
		{"2x15", []int32{16383}, 2, 2<<30 | 0<<15 | 16383},
		// 1×30: dnib 01; d0 alone fills the word, the big one comes next.
		{"1x30", []int32{-(1 << 29)}, 2, 1 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := []int32{1000}
			for _, d := range tt.diffs {
				x = append(x, x[len(x)-1]+d)
			}
			buf := make([]byte, 512)
			n, err := PackInts(buf, testHeader(), x)
			if err != nil || n != len(x) {
				t.Fatalf("PackInts = %d, %v", n, err)
			}
			data := buf[DataOffset:]
			ctrl := binary.BigEndian.Uint32(data)
			if nib := ctrl >> (30 - 2*3) & 3; nib != tt.nibble {
				t.Errorf("nibble %02b, want %02b", nib, tt.nibble)
			}
			if w := binary.BigEndian.Uint32(data[12:]); w != tt.word {
				t.Errorf("word %08x, want %08x", w, tt.word)
			}
			if x0, xn := int32(binary.BigEndian.Uint32(data[4:])), int32(binary.BigEndian.Uint32(data[8:])); x0 != x[0] || xn != x[len(x)-1] {
				t.Errorf("X0 %d Xn %d, want %d and %d", x0, xn, x[0], x[len(x)-1])
			}
			rec, err := Parse(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Ints, x) {
				t.Errorf("decoded %v, want %v", rec.Ints, x)
			}
		})
	}
}

// TestSteim2Capacity: a 512-byte record holds 7 frames, 103 data words,
// 721 samples of small differences; wider differences hold fewer.
func TestSteim2Capacity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		step int32
		want int
	}{
		{"4-bit", 3, 721},
		{"8-bit", 100, 4 * 103}, // d0 shares the first word with three others
		{"15-bit", 10000, 2 * 103},
		{"30-bit", 1 << 28, 1 + 102}, // d0 cannot share a word with a 30-bit one
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := make([]int32, 2000)
			for i := 1; i < len(x); i++ {
				if i%2 == 1 {
					x[i] = x[i-1] + tt.step
				} else {
					x[i] = x[i-1] - tt.step
				}
			}
			buf := make([]byte, 512)
			n, err := PackInts(buf, testHeader(), x)
			if err != nil {
				t.Fatal(err)
			}
			if want := MaxSamples(512, Steim2); tt.want > want {
				t.Fatalf("want %d above MaxSamples %d", tt.want, want)
			}
			rec, err := Parse(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Ints, x[:n]) {
				t.Fatal("round trip differs")
			}
			if n != tt.want {
				t.Errorf("took %d samples, want %d", n, tt.want)
			}
		})
	}
}

// TestSteim2OutOfRange: a difference beyond 30 bits ends the record; the
// next one starts at that sample, and the series comes back whole.
func TestSteim2OutOfRange(t *testing.T) {
	t.Parallel()
	x := []int32{0, 5, math.MaxInt32, math.MinInt32, math.MinInt32 + 3, 1 << 29, -(1 << 29), 7}
	got := roundTrip(t, x, 512)
	if !slices.Equal(got.samples, x) {
		t.Fatalf("got %v, want %v", got.samples, x)
	}
	// Steim-2 differences span -2^29 … 2^29-1. The records break before
	// MaxInt32 (+2^31-6), MinInt32 (-2^32+1), 1<<29 (about +2^31),
	// -(1<<29) (-2^30) and 7 (+2^29+7).
	if got.records != 6 {
		t.Errorf("%d records, want 6", got.records)
	}
}

type trip struct {
	samples []int32
	records int
	stream  []byte
}

// roundTrip packs x into records of recLen bytes and reads them back.
func roundTrip(t *testing.T, x []int32, recLen int) trip {
	t.Helper()
	var out trip
	h := testHeader()
	period := 20 * time.Millisecond
	start := h.Start
	for done := 0; done < len(x); {
		buf := make([]byte, recLen)
		h.SeqNo = out.records + 1
		h.Start = start.Add(time.Duration(done) * period)
		n, err := PackInts(buf, h, x[done:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("no progress at sample %d", done)
		}
		done += n
		out.records++
		out.stream = append(out.stream, buf...)
	}
	recs, err := ReadAll(bytes.NewReader(out.stream))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if want := start.Add(time.Duration(len(out.samples)) * period); !r.Start.Equal(want) {
			t.Fatalf("record %d starts %v, want %v", i, r.Start, want)
		}
		out.samples = append(out.samples, r.Ints...)
	}
	return out
}

func TestSteim2RoundTripRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, amp := range []int64{0, 1, 7, 100, 5000, 1 << 20, 1 << 29, math.MaxInt32} {
		for _, recLen := range []int{128, 512, 4096} {
			x := make([]int32, 5000)
			var v int64
			for i := range x {
				v += r.Int64N(2*amp+1) - amp
				v = max(min(v, math.MaxInt32), math.MinInt32)
				x[i] = int32(v)
			}
			if got := roundTrip(t, x, recLen); !slices.Equal(got.samples, x) {
				t.Fatalf("amplitude %d, %d-byte records: round trip differs", amp, recLen)
			}
		}
	}
}

func TestInt32AndFloat32Records(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 512)
	h := testHeader()
	h.Encoding = Int32
	x := []int32{math.MinInt32, -1, 0, 1, math.MaxInt32}
	if n, err := PackInts(buf, h, x); err != nil || n != 5 {
		t.Fatalf("PackInts INT32 = %d, %v", n, err)
	}
	rec, err := Parse(buf)
	if err != nil || rec.Encoding != Int32 || !slices.Equal(rec.Ints, x) {
		t.Fatalf("INT32: %v %v", rec, err)
	}

	h = testHeader()
	h.Channel, h.SampleRate = "MXI", 2
	f := []float32{0, -1.5, 3.25, float32(math.Inf(1)), 1e-30}
	if n, err := PackFloat32s(buf, h, f); err != nil || n != 5 {
		t.Fatalf("PackFloat32s = %d, %v", n, err)
	}
	if got := hex.EncodeToString(buf[32:36]); got != "00020001" {
		t.Errorf("2 Hz written as %s", got)
	}
	if buf[52] != byte(Float32) {
		t.Errorf("encoding %d", buf[52])
	}
	rec, err = Parse(buf)
	if err != nil || rec.SampleRate != 2 || len(rec.Floats) != 5 {
		t.Fatalf("FLOAT32: %v %v", rec, err)
	}
	for i := range f {
		if float32(rec.Floats[i]) != f[i] {
			t.Errorf("sample %d: %v, want %v", i, rec.Floats[i], f[i])
		}
	}
	if max := MaxSamples(512, Float32); max != 112 {
		t.Errorf("MaxSamples FLOAT32 = %d", max)
	}
}

// TestSteim1Decode decodes a Steim-1 frame assembled by hand: one word of
// each packing.
func TestSteim1Decode(t *testing.T) {
	t.Parallel()
	be := binary.BigEndian
	data := make([]byte, 64)
	// Words 3, 4, 5: nibbles 01 (4×8), 10 (2×16), 11 (1×32).
	be.PutUint32(data[0:], 1<<(30-6)|2<<(30-8)|3<<(30-10))
	be.PutUint32(data[4:], uint32(100)) // X0
	// 4×8: 0 (ignored), -1, 127, -128.
	be.PutUint32(data[12:], 0x00_ff_7f_80)
	// 2×16: 30000, -32768.
	be.PutUint32(data[16:], uint32(uint16(30000))<<16|uint32(uint16(0x8000)))
	// 1×32: 1000000.
	be.PutUint32(data[20:], 1000000)
	want := []int32{100, 99, 226, 98, 30098, 30098 - 32768, 30098 - 32768 + 1000000}
	be.PutUint32(data[8:], uint32(want[len(want)-1])) // Xn
	got, err := DecodeSteim1(data, len(want), binary.BigEndian)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	// The wrong Xn is caught.
	be.PutUint32(data[8:], 7)
	if _, err := DecodeSteim1(data, len(want), binary.BigEndian); !errors.Is(err, ErrIntegrity) {
		t.Errorf("bad Xn: %v", err)
	}
	// More samples than the frames hold.
	if _, err := DecodeSteim1(data, 50, binary.BigEndian); !errors.Is(err, ErrData) {
		t.Errorf("short data: %v", err)
	}
}

// TestLittleEndianRecord reads a record written in little-endian word
// order, as some older dataloggers do.
func TestLittleEndianRecord(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 256)
	h := testHeader()
	h.Encoding = Int32
	x := []int32{1, -2, 3}
	if _, err := PackInts(buf, h, x); err != nil {
		t.Fatal(err)
	}
	// Swap every multi-byte field by hand.
	swap := func(off, size int) { slices.Reverse(buf[off : off+size]) }
	for _, f := range [][2]int{{20, 2}, {22, 2}, {28, 2}, {30, 2}, {32, 2}, {34, 2}, {40, 4}, {44, 2}, {46, 2}, {48, 2}, {50, 2}} {
		swap(f[0], f[1])
	}
	buf[53] = 0
	for i := range 3 {
		swap(64+4*i, 4)
	}
	rec, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.LittleEndian || !rec.Start.Equal(h.Start) || rec.SampleRate != 50 || !slices.Equal(rec.Ints, x) {
		t.Fatalf("got %+v", rec)
	}
}

func TestHeaderTiming(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 512)
	h := testHeader()
	if _, err := PackInts(buf, h, []int32{1}); err != nil {
		t.Fatal(err)
	}
	// A time correction of +1.5 ms not yet applied, and blockette 1001
	// adding 20 µs.
	binary.BigEndian.PutUint32(buf[40:], 15)
	buf[39] = 2
	binary.BigEndian.PutUint16(buf[50:], 56)
	binary.BigEndian.PutUint16(buf[56:], 1001)
	buf[61] = 20
	got, err := ParseHeader(buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.Start.Add(1500*time.Microsecond + 20*time.Microsecond); !got.Start.Equal(want) {
		t.Errorf("start %v, want %v", got.Start, want)
	}
	// With the "correction applied" activity flag, only B1001 counts.
	buf[36] = 0x02
	if got, _ = ParseHeader(buf); !got.Start.Equal(h.Start.Add(20 * time.Microsecond)) {
		t.Errorf("applied correction counted again: %v", got.Start)
	}
	if p := got.SamplePeriod(); p != 20*time.Millisecond {
		t.Errorf("period %v", p)
	}
	if e := got.End(); !e.Equal(got.Start.Add(20 * time.Millisecond)) {
		t.Errorf("end %v", e)
	}
}

func TestRateFactors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		f, m int16
		rate float64
	}{{50, 1, 50}, {2, 1, 2}, {-10, 1, 0.1}, {1, -10, 0.1}, {-1, -10, 0.1}, {10, 10, 100}, {0, 1, 0}} {
		if got := rateFromFactors(tt.f, tt.m); math.Abs(got-tt.rate) > 1e-12 {
			t.Errorf("rate(%d, %d) = %v, want %v", tt.f, tt.m, got, tt.rate)
		}
	}
	for _, rate := range []float64{50, 2, 0.1, 1} {
		f, m, err := rateFactors(rate)
		if err != nil || rateFromFactors(f, m) != rate {
			t.Errorf("rateFactors(%v) = %d, %d, %v", rate, f, m, err)
		}
	}
	if _, _, err := rateFactors(33.3); err == nil {
		t.Error("33.3 Hz accepted")
	}
}

// TestPackText: an ASCII log record (SeedLink's INFO replies) reads back
// with its text as the samples, and a longer text is cut at the record.
func TestPackText(t *testing.T) {
	t.Parallel()
	text := []byte(strings.Repeat("<seedlink/>", 50))
	buf := make([]byte, 512)
	n, err := PackText(buf, Header{Network: "SL", Station: "INFO", Channel: "LOG", Start: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}, text)
	if err != nil {
		t.Fatal(err)
	}
	if n != 512-DataOffset {
		t.Fatalf("took %d bytes, want %d", n, 512-DataOffset)
	}
	h, err := ParseHeader(buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Encoding != 0 || h.NumSamples != n || h.Channel != "LOG" || !bytes.Equal(buf[h.DataOffset:h.DataOffset+n], text[:n]) {
		t.Fatalf("header %+v", h)
	}
}

func TestPackErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		len  int
		edit func(*Header)
	}{
		{"record length", 500, nil},
		{"too short", 64, nil},
		{"station", 512, func(h *Header) { h.Station = "TOOLONG" }},
		{"lower case", 512, func(h *Header) { h.Network = "sh" }},
		{"year", 512, func(h *Header) { h.Start = time.Unix(0, 0).AddDate(-100, 0, 0) }},
		{"sub-0.1 ms", 512, func(h *Header) { h.Start = h.Start.Add(time.Microsecond) }},
		{"encoding", 512, func(h *Header) { h.Encoding = Steim1 }},
		{"seq", 512, func(h *Header) { h.SeqNo = 1_000_000 }},
	} {
		h := testHeader()
		if tt.edit != nil {
			tt.edit(&h)
		}
		if _, err := PackInts(make([]byte, tt.len), h, []int32{1, 2}); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	good := make([]byte, 512)
	if _, err := PackInts(good, testHeader(), []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:40] }, ErrHeader},
		{"quality", func(b []byte) []byte { b[6] = 'X'; return b }, ErrHeader},
		{"year", func(b []byte) []byte { b[20], b[21] = 0, 0; return b }, ErrHeader},
		{"day", func(b []byte) []byte { b[22], b[23] = 1, 0x70; return b }, ErrHeader},
		{"no B1000", func(b []byte) []byte { b[46], b[47] = 0, 0; return b }, ErrNoB1000},
		{"chain loops", func(b []byte) []byte { b[50], b[51] = 0, 48; return b }, ErrBlockette},
		{"chain outside", func(b []byte) []byte { b[46], b[47] = 0xff, 0xf0; return b }, ErrBlockette},
		{"record length", func(b []byte) []byte { b[54] = 30; return b }, ErrBlockette},
		{"encoding", func(b []byte) []byte { b[52] = 99; return b }, ErrEncoding},
		{"cut record", func(b []byte) []byte { return b[:300] }, ErrHeader},
		{"data offset", func(b []byte) []byte { b[44], b[45] = 0x10, 0; return b }, ErrHeader},
		{"dnib", func(b []byte) []byte { b[64+12] = 0x00; b[64] = 0x02; return b }, ErrData},
		{"integrity", func(b []byte) []byte { b[64+11]++; return b }, ErrIntegrity},
		{"too many samples", func(b []byte) []byte { b[30], b[31] = 0x10, 0; return b }, ErrData},
	} {
		b := tt.edit(slices.Clone(good))
		if _, err := Parse(b); !errors.Is(err, tt.want) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	x := make([]int32, 3000)
	for i := range x {
		x[i] = int32(i * i % 1000)
	}
	trip := roundTrip(t, x, 512)
	rd := NewReader(bytes.NewReader(trip.stream))
	for i := 0; ; i++ {
		_, h, err := rd.Next()
		if errors.Is(err, io.EOF) {
			if i != trip.records {
				t.Fatalf("%d records, want %d", i, trip.records)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.SeqNo != i+1 || h.RecordLen != 512 {
			t.Fatalf("record %d: %+v", i, h)
		}
	}
	// A stream cut inside a record.
	_, err := ReadAll(bytes.NewReader(trip.stream[:700]))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream: %v", err)
	}
}

// TestGolden compares the encoder's output with a checked-in file, so any
// change to the bytes it writes is seen in review (go test -update
// rewrites it).
func TestGolden(t *testing.T) {
	t.Parallel()
	// A chirp that sweeps through every packing.
	x := make([]int32, 1500)
	for i := range x {
		a := math.Pow(2, float64(i)/1500*30)
		x[i] = int32(a * math.Sin(float64(i)*float64(i)/3000))
	}
	got := roundTrip(t, x, 512)
	if !slices.Equal(got.samples, x) {
		t.Fatal("round trip differs")
	}
	path := filepath.Join("testdata", "chirp.mseed")
	if *update {
		if err := os.WriteFile(path, got.stream, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got.stream, want) {
		t.Errorf("encoder output differs from %s (run go test -update after checking the change)", path)
	}
}

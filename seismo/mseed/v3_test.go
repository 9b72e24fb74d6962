package mseed

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRecord3Layout checks every field of a miniSEED 3 record against the
// specification's table ("Record definition"), worked out by hand: a
// little-endian fixed header, the identifier right after it, no extra
// headers, a payload of exactly the frames the samples need.
func TestRecord3Layout(t *testing.T) {
	t.Parallel()
	h := testHeader()
	h.Start = time.Date(2024, 3, 1, 12, 34, 56, 789_123_456, time.UTC)
	b, err := AppendInts3([]byte("prefix"), h, []int32{5, 6, 4})
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "prefix" {
		t.Fatalf("dst's bytes were overwritten: %q", b[:6])
	}
	b = b[6:]
	const id = "FDSN:SH_00042_00_B_N_Z"
	le := binary.LittleEndian
	for _, f := range []struct {
		what      string
		got, want uint64
	}{
		{"format version", uint64(b[2]), 3},
		{"flags", uint64(b[3]), 0},
		{"nanosecond", uint64(le.Uint32(b[4:])), 789_123_456},
		{"year", uint64(le.Uint16(b[8:])), 2024},
		{"day of year", uint64(le.Uint16(b[10:])), 31 + 29 + 1},
		{"hour", uint64(b[12]), 12},
		{"minute", uint64(b[13]), 34},
		{"second", uint64(b[14]), 56},
		{"encoding", uint64(b[15]), 11},
		{"sample rate", le.Uint64(b[16:]), math.Float64bits(50)},
		{"samples", uint64(le.Uint32(b[24:])), 3},
		{"publication version (quality D)", uint64(b[32]), 2},
		{"identifier length", uint64(b[33]), uint64(len(id))},
		{"extra headers length", uint64(le.Uint16(b[34:])), 0},
		{"payload length", uint64(le.Uint32(b[36:])), 64},
		{"record length", uint64(len(b)), 40 + uint64(len(id)) + 64},
	} {
		if f.got != f.want {
			t.Errorf("%s: %d, want %d", f.what, f.got, f.want)
		}
	}
	if string(b[:2]) != "MS" || string(b[40:40+len(id)]) != id {
		t.Errorf("indicator %q, identifier %q", b[:2], b[40:40+len(id)])
	}
	// The CRC-32C of the record with its CRC field zeroed.
	z := slices.Clone(b)
	clear(z[28:32])
	if got, want := le.Uint32(b[28:]), crc32.Checksum(z, crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Errorf("CRC %08x, want %08x", got, want)
	}
	// One Steim-2 frame, big-endian as in SEED: X0 5, Xn 4, differences
	// 0 (the first, see EncodeSteim2), +1, -2 in the first three nibbles
	// of a 7×4 word (dnib 10; the rest is padding the count excludes).
	p := b[40+len(id):]
	be := binary.BigEndian
	if x0, xn := int32(be.Uint32(p[4:])), int32(be.Uint32(p[8:])); x0 != 5 || xn != 4 {
		t.Errorf("X0 %d, Xn %d", x0, xn)
	}
	if w := be.Uint32(p[12:]); w != 0x801E0000 {
		t.Errorf("first data word %08x, want 801e0000", w)
	}
	rec, err := Parse3(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Ints, []int32{5, 6, 4}) || !rec.Start.Equal(h.Start) || rec.SourceName() != "SH_00042_00_BNZ" ||
		rec.SampleRate != 50 || rec.RecordLen != len(b) || rec.Quality != 'D' {
		t.Errorf("read back %+v", rec)
	}
}

// TestRecord3RoundTrip: integer series of any size come back exactly, in
// as few Steim-2 frames as they need, or as INT32 when a difference does
// not fit 30 bits; floats come back as FLOAT32.
func TestRecord3RoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{0, 1, 25, 26, 105, 1000} {
		for _, scale := range []float64{10, 1e4, 1e9} {
			x := make([]int32, n)
			for i := range x {
				x[i] = int32(scale * math.Sin(float64(i)/5) * r.Float64())
			}
			b, err := AppendInts3(nil, testHeader(), x)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := Parse3(b)
			if err != nil {
				t.Fatalf("%d samples ×%g: %v", n, scale, err)
			}
			if !slices.Equal(rec.Ints, x) && !(n == 0 && rec.Ints == nil) {
				t.Fatalf("%d samples ×%g: read back differ", n, scale)
			}
			if rec.Encoding != Steim2 {
				continue
			}
			// The frames the samples need and no more: one less would not
			// hold them.
			frames := (len(b) - rec.DataOffset) / FrameLen
			if frames > 1 && EncodeSteim2(make([]byte, (frames-1)*FrameLen), x) == len(x) {
				t.Errorf("%d samples ×%g in %d frames, fewer would do", n, scale, frames)
			}
		}
	}
	wide := []int32{math.MaxInt32, math.MinInt32, 0}
	b, err := AppendInts3(nil, testHeader(), wide)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Parse3(b)
	if err != nil || rec.Encoding != Int32 || !slices.Equal(rec.Ints, wide) {
		t.Fatalf("differences beyond 30 bits: %v, %+v", err, rec)
	}
	h := testHeader()
	h.Channel, h.SampleRate = "MXI", 0.5
	b, err = AppendFloat32s3(nil, h, []float32{1.5, -2.25})
	if err != nil {
		t.Fatal(err)
	}
	if rate := math.Float64frombits(binary.LittleEndian.Uint64(b[16:])); rate != -2 {
		t.Errorf("0.5 Hz written as %v, want the period -2", rate)
	}
	rec, err = Parse3(b)
	if err != nil || rec.Encoding != Float32 || !slices.Equal(rec.Floats, []float64{1.5, -2.25}) || rec.SampleRate != 0.5 {
		t.Fatalf("floats: %v, %+v", err, rec)
	}
}

// TestParse3Errors: damaged or hostile records are errors, not panics or
// huge allocations.
func TestParse3Errors(t *testing.T) {
	t.Parallel()
	good, err := AppendInts3(nil, testHeader(), []int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte)) []byte {
		b := slices.Clone(good)
		f(b)
		return b
	}
	recrc := func(b []byte) {
		clear(b[28:32])
		binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b, castagnoli))
	}
	for name, b := range map[string][]byte{
		"short":               good[:30],
		"cut":                 good[:len(good)-1],
		"miniSEED 2":          make([]byte, 512),
		"one bit flipped":     edit(func(b []byte) { b[len(b)-1] ^= 1 }),
		"huge payload":        edit(func(b []byte) { binary.LittleEndian.PutUint32(b[36:], 1<<31); recrc(b) }),
		"samples beyond data": edit(func(b []byte) { binary.LittleEndian.PutUint32(b[24:], 1<<30); recrc(b) }),
		"day 400":             edit(func(b []byte) { binary.LittleEndian.PutUint16(b[10:], 400); recrc(b) }),
		"bad identifier":      edit(func(b []byte) { b[44] = '_'; recrc(b) }),
		"NaN rate":            edit(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], math.Float64bits(math.NaN())); recrc(b) }),
	} {
		if _, err := Parse3(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse3(edit(func(b []byte) { b[len(b)-1] ^= 1 })); !errors.Is(err, ErrData) {
		t.Errorf("a damaged record: %v, want ErrData (CRC)", err)
	}
	for name, h := range map[string]Header{
		"underscore in station": {Network: "SH", Station: "A_B", Channel: "BNZ", Start: testHeader().Start, SampleRate: 1},
		"no network":            {Station: "A", Channel: "BNZ", Start: testHeader().Start, SampleRate: 1},
		"lower case":            {Network: "sh", Station: "A", Channel: "BNZ", Start: testHeader().Start, SampleRate: 1},
		"negative rate":         {Network: "SH", Station: "A", Channel: "BNZ", Start: testHeader().Start, SampleRate: -1},
	} {
		if _, err := AppendInts3(nil, h, []int32{1}); !errors.Is(err, ErrArgument) {
			t.Errorf("%s: %v, want ErrArgument", name, err)
		}
	}
}

// seedRecords3 are the miniSEED 3 fuzzer's seeds: each encoding written.
func seedRecords3(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	x := make([]int32, 300)
	for i := range x {
		x[i] = int32(3000 * math.Sin(float64(i)/7))
	}
	h := testHeader()
	for _, enc := range []Encoding{Steim2, Int32} {
		h.Encoding = enc
		b, err := AppendInts3(nil, h, x)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	b, err := AppendFloat32s3(nil, testHeader(), []float32{1.5, -2, 3e9})
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, b)
}

// FuzzParse3: no input may crash the decoder; what it accepts is
// consistent and is written back byte for byte when it is what this
// package writes.
func FuzzParse3(f *testing.F) {
	for _, b := range seedRecords3(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Parse3(b)
		if err != nil {
			return
		}
		if rec.RecordLen > len(b) || rec.RecordLen > MaxRecord3Len || rec.DataOffset > rec.RecordLen {
			t.Fatalf("record of %d bytes, data at %d, from %d bytes", rec.RecordLen, rec.DataOffset, len(b))
		}
		if n := len(rec.Ints) + len(rec.Floats); n != rec.NumSamples {
			t.Fatalf("%d samples decoded, header says %d", n, rec.NumSamples)
		}
	})
}

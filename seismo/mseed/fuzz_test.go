package mseed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// seedRecords are realistic records for the fuzzers' corpora: every
// encoding this package reads, both byte orders, extra blockettes.
func seedRecords(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	add := func(b []byte) { out = append(out, b) }
	x := make([]int32, 800)
	for i := range x {
		x[i] = int32(math.Round(3000 * math.Sin(float64(i)/7) * math.Exp(float64(i%200)/60)))
	}
	for _, n := range []int{128, 512} {
		b := make([]byte, n)
		if _, err := PackInts(b, testHeader(), x); err != nil {
			tb.Fatal(err)
		}
		add(b)
	}
	h := testHeader()
	h.Encoding = Int32
	b := make([]byte, 256)
	if _, err := PackInts(b, h, x); err != nil {
		tb.Fatal(err)
	}
	add(b)
	b = make([]byte, 256)
	if _, err := PackFloat32s(b, testHeader(), []float32{1.5, -2, 3e9}); err != nil {
		tb.Fatal(err)
	}
	add(b)
	// A Steim-1 record, an INT16 and a FLOAT64 one made by editing headers.
	s1 := make([]byte, 128)
	if _, err := PackInts(s1, testHeader(), []int32{0}); err != nil {
		tb.Fatal(err)
	}
	s1[52] = byte(Steim1)
	be := binary.BigEndian
	be.PutUint16(s1[30:], 3)
	be.PutUint32(s1[64:], 1<<(30-6))
	be.PutUint32(s1[68:], 10)
	be.PutUint32(s1[72:], 13)
	be.PutUint32(s1[76:], 0x00010200)
	add(s1)
	i16 := slices.Clone(s1)
	i16[52] = byte(Int16)
	add(i16)
	f64 := slices.Clone(s1)
	f64[52] = byte(Float64)
	add(f64)
	// Blockettes 100 and 1001 after 1000.
	bl := make([]byte, 512)
	if _, err := PackInts(bl, testHeader(), x[:50]); err != nil {
		tb.Fatal(err)
	}
	bl[39] = 2
	be.PutUint16(bl[50:], 56)
	be.PutUint16(bl[56:], 1001)
	bl[61] = 7
	add(bl)
	return out
}

// FuzzParse: no input may crash the decoder, and what it accepts must be
// consistent and survive a re-encoding.
func FuzzParse(f *testing.F) {
	for _, b := range seedRecords(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Parse(b)
		if err != nil {
			return
		}
		if rec.RecordLen < MinRecordLen || rec.RecordLen > MaxRecordLen || rec.RecordLen > len(b) {
			t.Fatalf("record length %d from %d bytes", rec.RecordLen, len(b))
		}
		if n := len(rec.Ints) + len(rec.Floats); rec.NumSamples > 0 && n != rec.NumSamples {
			t.Fatalf("%d samples decoded, header says %d", n, rec.NumSamples)
		}
		if len(rec.Ints) == 0 || rec.Start.Year() < 1900 || rec.Start.Year() > 2100 {
			return
		}
		// Integers decoded from any encoding come back the same from
		// Steim-2.
		got := roundTripFuzz(t, rec.Ints)
		if !slices.Equal(got, rec.Ints) {
			t.Fatalf("re-encoded samples differ")
		}
	})
}

func roundTripFuzz(t *testing.T, x []int32) []int32 {
	t.Helper()
	var out []int32
	buf := make([]byte, 512)
	for done := 0; done < len(x); {
		n, err := PackInts(buf, testHeader(), x[done:])
		if err != nil || n == 0 {
			t.Fatalf("PackInts at %d: %d, %v", done, n, err)
		}
		rec, err := Parse(buf)
		if err != nil {
			t.Fatalf("own record: %v", err)
		}
		out = append(out, rec.Ints...)
		done += n
	}
	return out
}

// FuzzReader: a stream of arbitrary bytes ends in an error or EOF, never a
// panic or a loop.
func FuzzReader(f *testing.F) {
	recs := seedRecords(f)
	f.Add(bytes.Join(recs, nil))
	f.Add(recs[1][:300])
	f.Add(append(slices.Clone(recs[0]), recs[3][:130]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReader(bytes.NewReader(b))
		for i := 0; ; i++ {
			if i > len(b)/MinRecordLen {
				t.Fatal("more records than bytes allow")
			}
			if _, err := rd.Read(); err != nil {
				if rd.Offset() > int64(len(b)) {
					t.Fatalf("offset %d past %d bytes", rd.Offset(), len(b))
				}
				// A clean end only where a record ended.
				if errors.Is(err, io.EOF) && rd.Offset() != int64(len(b)) && len(b)-int(rd.Offset()) >= MinRecordLen {
					t.Fatalf("EOF at %d of %d bytes", rd.Offset(), len(b))
				}
				return
			}
		}
	})
}

// FuzzDecodeSteim2 feeds arbitrary frames and counts to the decoder, in
// both word orders.
func FuzzDecodeSteim2(f *testing.F) {
	for _, b := range seedRecords(f)[:2] {
		h, _ := ParseHeader(b)
		f.Add(b[DataOffset:], uint16(h.NumSamples), false)
	}
	f.Add(make([]byte, 64), uint16(1), true)
	f.Fuzz(func(t *testing.T, data []byte, n uint16, little bool) {
		var order binary.ByteOrder = binary.BigEndian
		if little {
			order = binary.LittleEndian
		}
		x, err := DecodeSteim2(data, int(n), order)
		if err == nil && len(x) != int(n) {
			t.Fatalf("%d samples, want %d", len(x), n)
		}
	})
}

// FuzzDecodeSteim1 is FuzzDecodeSteim2 for Steim-1.
func FuzzDecodeSteim1(f *testing.F) {
	s1 := seedRecords(f)[4]
	f.Add(s1[DataOffset:], uint16(3), false)
	f.Add(make([]byte, 128), uint16(40), true)
	f.Fuzz(func(t *testing.T, data []byte, n uint16, little bool) {
		var order binary.ByteOrder = binary.BigEndian
		if little {
			order = binary.LittleEndian
		}
		x, err := DecodeSteim1(data, int(n), order)
		if err == nil && len(x) != int(n) {
			t.Fatalf("%d samples, want %d", len(x), n)
		}
	})
}

// FuzzSteim2RoundTrip: any int32 sequence survives encoding and decoding.
func FuzzSteim2RoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x80, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := make([]int32, len(b)/4)
		for i := range x {
			x[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
		}
		if got := roundTripFuzz(t, x); !slices.Equal(got, x) {
			t.Fatalf("got %v, want %v", got, x)
		}
	})
}

// TestWriteFuzzCorpus writes the seed corpora into testdata/fuzz with
// -update, so they are checked in beside the f.Add seeds.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	write := func(fuzzer, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&buf, "[]byte(%q)\n", v)
			case uint16:
				fmt.Fprintf(&buf, "uint16(%d)\n", v)
			case bool:
				fmt.Fprintf(&buf, "bool(%v)\n", v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"steim2-128", "steim2-512", "int32", "float32", "steim1", "int16", "float64", "b1001"}
	recs := seedRecords(t)
	for i, b := range recs {
		write("FuzzParse", names[i], b)
	}
	write("FuzzReader", "stream", bytes.Join(recs, nil))
	write("FuzzReader", "cut", recs[1][:300])
	for i, b := range recs[:2] {
		h, _ := ParseHeader(b)
		write("FuzzDecodeSteim2", names[i], b[DataOffset:], uint16(h.NumSamples), false)
	}
	write("FuzzDecodeSteim1", "frame", recs[4][DataOffset:], uint16(3), false)
	for i, b := range seedRecords3(t) {
		write("FuzzParse3", []string{"steim2", "int32", "float32"}[i], b)
	}
	write("FuzzSteim2RoundTrip", "extremes", []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x80, 0, 0, 0})
}

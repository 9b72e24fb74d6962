package mseed

import (
	"encoding/binary"
	"math"
	"testing"
)

func benchSamples() []int32 {
	x := make([]int32, 1<<16)
	for i := range x {
		x[i] = int32(2000*math.Sin(float64(i)/25) + 30*math.Sin(float64(i)*1.7))
	}
	return x
}

// BenchmarkEncodeSteim2 packs a wave of a few thousand counts into
// 1024-byte records.
func BenchmarkEncodeSteim2(b *testing.B) {
	x := benchSamples()
	buf := make([]byte, 1024)
	h := testHeader()
	n := 0
	for b.Loop() {
		for done := 0; done < len(x); {
			k, err := PackInts(buf, h, x[done:])
			if err != nil {
				b.Fatal(err)
			}
			done += k
		}
		n += len(x)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkDecodeSteim2 unpacks the same records.
func BenchmarkDecodeSteim2(b *testing.B) {
	x := benchSamples()
	var recs [][]byte
	h := testHeader()
	for done := 0; done < len(x); {
		buf := make([]byte, 1024)
		k, _ := PackInts(buf, h, x[done:])
		recs = append(recs, buf)
		done += k
	}
	n := 0
	for b.Loop() {
		for _, r := range recs {
			hh, _ := ParseHeader(r)
			if _, err := DecodeSteim2(r[DataOffset:], hh.NumSamples, binary.BigEndian); err != nil {
				b.Fatal(err)
			}
			n += hh.NumSamples
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
}

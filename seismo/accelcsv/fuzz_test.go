package accelcsv

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// checkRecord holds every reader to the same contract on any input: either a
// record with equal-length, finite components and a positive rate, or an
// error that names a cause.
func checkRecord(t *testing.T, rec *Record, err error) {
	t.Helper()
	if err != nil {
		if rec != nil {
			t.Fatalf("error %v with a non-nil record", err)
		}
		var pe *ParseError
		if !errors.As(err, &pe) && err.Error() == "" {
			t.Fatalf("unhelpful error %#v", err)
		}
		return
	}
	if rec.Len() == 0 || len(rec.EW) != rec.Len() || len(rec.UD) != rec.Len() {
		t.Fatalf("component lengths %d/%d/%d", len(rec.NS), len(rec.EW), len(rec.UD))
	}
	if !(rec.RateHz > 0) || math.IsInf(rec.RateHz, 0) {
		t.Fatalf("rate %v", rec.RateHz)
	}
	for i := range rec.NS {
		for _, v := range []float64{rec.NS[i], rec.EW[i], rec.UD[i]} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("sample %d is %v", i, v)
			}
		}
	}
}

func FuzzReadJMA(f *testing.F) {
	f.Add([]byte(jmaSample))
	f.Add([]byte(" SAMPLING RATE= 50Hz\n UNIT = gal(cm/s/s)\n NS,EW,UD\n1,2,3\n"))
	f.Add([]byte(" SAMPLING RATE= 100Hz\n NS,EW,UD\n1,2\n"))
	f.Add([]byte(" SAMPLING RATE= 1e309Hz\n NS,EW,UD\n1,2,3\n"))
	f.Add([]byte(" SAMPLING RATE= 100Hz\r\n UNIT = m/s/s\r\nINITIAL TIME = 2016 04 16 01 45 50\r\n NS,EW,UD\r\n0x1p-2,1e3,-0\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ReadJMA(bytes.NewReader(data))
		checkRecord(t, rec, err)
	})
}

func FuzzReadPlain(f *testing.F) {
	f.Add([]byte("1,2,3\n4,5,6\n"), 50.0, false)
	f.Add([]byte("ns\tew\tud\n0.1\t-0.2\t9.8\n"), 100.0, true)
	f.Add([]byte("# c\n 1 2 3\n1 2\n"), 50.0, false)
	f.Add([]byte("1;2;Inf\n"), 20.0, false)
	f.Add([]byte("1,2,3\n"), 0.0, false)
	f.Fuzz(func(t *testing.T, data []byte, rate float64, ms2 bool) {
		unit := Gal
		if ms2 {
			unit = MS2
		}
		rec, err := ReadPlain(bytes.NewReader(data), PlainOptions{RateHz: rate, Unit: unit})
		checkRecord(t, rec, err)
		// Detection must never misroute a plain file that has no JMA header.
		if !IsJMA(data) {
			rec2, err2 := Read(bytes.NewReader(data), PlainOptions{RateHz: rate, Unit: unit})
			if (err == nil) != (err2 == nil) || (err == nil && rec2.Len() != rec.Len()) {
				t.Fatalf("Read and ReadPlain disagree: %v vs %v", err, err2)
			}
		}
	})
}

package jma

import (
	"errors"
	"math"
	"testing"

	"shindo.dev/seismo/internal/jmatest"
)

func TestWeightMatchesTable(t *testing.T) {
	t.Parallel()
	// JMA.md §4.
	tests := []struct{ f, want float64 }{
		{0.1, 0.282268}, {0.5, 1.123410}, {1, 0.996369}, {2, 0.697360}, {5, 0.410051}, {10, 0.223503},
	}
	for _, tt := range tests {
		if got := Weight(tt.f); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("Weight(%g) = %.6f, want %.6f", tt.f, got, tt.want)
		}
		if Weight(-tt.f) != Weight(tt.f) {
			t.Errorf("Weight(%g) is not even", tt.f)
		}
	}
	if Weight(0) != 0 {
		t.Errorf("Weight(0) = %v, want 0", Weight(0))
	}
}

// TestCircularSinusoid checks JMA.md §4: x = A·cos, y = A·sin, z = 0 has a
// constant filtered composite A·H(f), so I is known exactly.
func TestCircularSinusoid(t *testing.T) {
	t.Parallel()
	const rate, n = 100.0, 6000 // 60 s; every f below is on a bin (1/60 Hz)
	tableI := map[float64]float64{0.1: 3.8413, 0.5: 5.0411, 1: 4.9368, 2: 4.6269, 5: 4.1657, 10: 3.6386}
	for _, f := range []float64{0.1, 0.5, 1, 2, 5, 10, 20} {
		for _, amp := range []float64{1, 100, 980} {
			ns, ew, ud := make([]float64, n), make([]float64, n), make([]float64, n)
			for i := range ns {
				s, c := math.Sincos(2 * math.Pi * f * float64(i) / rate)
				ns[i], ew[i] = amp*c, amp*s
			}
			res, err := InstrumentalWith(Options{Padding: PadNone}, rate, ns, ew, ud)
			if err != nil {
				t.Fatal(err)
			}
			want := 2*math.Log10(amp*Weight(f)) + 0.94
			if math.Abs(res.I-want) > 0.001 {
				t.Errorf("f=%g A=%g: I = %.5f, want %.5f", f, amp, res.I, want)
			}
			if ti, ok := tableI[f]; ok && amp == 100 && math.Abs(res.I-ti) > 0.001 {
				t.Errorf("f=%g A=100: I = %.5f, JMA.md table says %.4f", f, res.I, ti)
			}
		}
	}
}

// TestCircularSinusoidOddLength runs the same check on a length with a large
// prime factor (5995 = 5·11·109), which takes the odd-length and Bluestein
// paths.
func TestCircularSinusoidOddLength(t *testing.T) {
	t.Parallel()
	const rate, n, bin = 100.0, 5995, 60
	f := bin * rate / n
	ns, ew, ud := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range ns {
		s, c := math.Sincos(2 * math.Pi * bin * float64(i) / n)
		ns[i], ew[i] = 100*c, 100*s
	}
	res, err := InstrumentalWith(Options{Padding: PadNone}, rate, ns, ew, ud)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*math.Log10(100*Weight(f)) + 0.94; math.Abs(res.I-want) > 0.001 {
		t.Errorf("f=%.4f Hz: I = %.5f, want %.5f", f, res.I, want)
	}
}

func TestRecordsReproduceReference(t *testing.T) {
	t.Parallel()
	for _, ref := range jmatest.References {
		t.Run(ref.File, func(t *testing.T) {
			t.Parallel()
			rec := jmatest.Load(t, ref.File)
			res, err := Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
			if err != nil {
				t.Fatal(err)
			}
			if rel := math.Abs(res.A0-ref.A0) / ref.A0; rel > 0.001 {
				t.Errorf("a0 = %.3f gal, want %.2f (off by %.3f %%)", res.A0, ref.A0, 100*rel)
			}
			if res.Reported() != ref.Reported {
				t.Errorf("reported = %.1f, want %.1f (I = %.4f)", res.Reported(), ref.Reported, res.I)
			}
			if got := res.Class().String(); got != ref.Class {
				t.Errorf("class = %s, want %s", got, ref.Class)
			}
			t.Logf("a0 %.3f gal, I %.4f, reported %.1f, class %s", res.A0, res.I, res.Reported(), res.Class())
		})
	}
}

func TestRemoveMeanDoesNotMoveRealRecords(t *testing.T) {
	t.Parallel()
	for _, ref := range jmatest.References {
		rec := jmatest.Load(t, ref.File)
		plain, err := Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
		if err != nil {
			t.Fatal(err)
		}
		demeaned, err := InstrumentalWith(Options{RemoveMean: true}, rec.RateHz, rec.NS, rec.EW, rec.UD)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(plain.I - demeaned.I); d > 0.002 {
			t.Errorf("%s: mean removal moves I by %.4f", ref.File, d)
		}
	}
}

func TestReportedAndClass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		i        float64
		reported float64
		class    string
		level    int
	}{
		{5.195, 5.2, "5+", 6},
		{5.194, 5.1, "5+", 6},
		{4.991, 4.9, "5-", 5},
		{4.995, 5.0, "5+", 6},
		{-1.2, -1.2, "0", 0},
		{0.449, 0.4, "0", 0},
		{0.495, 0.5, "1", 1},
		{1.449, 1.4, "1", 1},
		{1.5, 1.5, "2", 2},
		{2.45, 2.4, "2", 2}, // truncation, not rounding, to one decimal
		{2.5, 2.5, "3", 3},
		{3.4, 3.4, "3", 3},
		{3.5, 3.5, "4", 4},
		{4.494, 4.4, "4", 4},
		{4.5, 4.5, "5-", 5},
		{5.0, 5.0, "5+", 6},
		{5.5, 5.5, "6-", 7},
		{5.999, 6.0, "6+", 8},
		{6.449, 6.4, "6+", 8},
		{6.5, 6.5, "7", 9},
		{7.3, 7.3, "7", 9},
	}
	for _, tt := range tests {
		if got := Reported(tt.i); got != tt.reported {
			t.Errorf("Reported(%v) = %v, want %v", tt.i, got, tt.reported)
		}
		c := ClassOf(tt.i)
		if c.String() != tt.class || c.Level() != tt.level {
			t.Errorf("ClassOf(%v) = %s (level %d), want %s (level %d)", tt.i, c, c.Level(), tt.class, tt.level)
		}
		if p, ok := ParseClass(tt.class); !ok || p != c {
			t.Errorf("ParseClass(%q) = %v, %v", tt.class, p, ok)
		}
	}
}

func TestExceedanceSamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate float64
		want int
	}{{100, 30}, {50, 15}, {20, 6}, {200, 60}, {1, 1}, {62.5, 19}, {33.3, 10}, {10, 3}}
	for _, tt := range tests {
		got, err := ExceedanceSamples(tt.rate)
		if err != nil || got != tt.want {
			t.Errorf("ExceedanceSamples(%v) = %d, %v; want %d", tt.rate, got, err, tt.want)
		}
	}
	for _, bad := range []float64{0, -50, math.NaN(), math.Inf(1), 1e-6} {
		if _, err := ExceedanceSamples(bad); !errors.Is(err, ErrRate) {
			t.Errorf("ExceedanceSamples(%v) err = %v, want ErrRate", bad, err)
		}
	}
}

func TestInstrumentalRejectsBadInput(t *testing.T) {
	t.Parallel()
	ok := make([]float64, 100)
	if _, err := Instrumental(100, ok, ok, ok[:99]); !errors.Is(err, ErrLength) {
		t.Errorf("ragged components: err = %v", err)
	}
	if _, err := Instrumental(100, ok[:29], ok[:29], ok[:29]); !errors.Is(err, ErrTooShort) {
		t.Errorf("29 samples at 100 Hz: err = %v", err)
	}
	if _, err := Instrumental(0, ok, ok, ok); !errors.Is(err, ErrRate) {
		t.Errorf("rate 0: err = %v", err)
	}
	res, err := Instrumental(100, ok, ok, ok)
	if err != nil || res.I != MinIntensity || math.IsInf(res.I, 0) {
		t.Errorf("silent record: %+v, %v; want finite MinIntensity", res, err)
	}
}

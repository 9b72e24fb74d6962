package accelcsv

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const jmaSample = "SITE CODE= EA0\x95\xc4\x8eq,35.2733,133.3483,  9,7.3\r\n" +
	" LAT.=    0.0000\r\n LON.=    0.0000\r\n SAMPLING RATE= 100Hz \r\n UNIT  = gal(cm/s/s) \r\n" +
	"INITIAL TIME = 2000 10 06 13 30 10\r\n NS,EW,UD\r\n" +
	"-0.018,0.000,-0.017\r\n-0.035,0.011,-0.018\r\n0.5,-1.25,2\r\n"

func TestReadJMA(t *testing.T) {
	t.Parallel()
	rec, err := Read(strings.NewReader(jmaSample), PlainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Format != FormatJMA || rec.RateHz != 100 || rec.Len() != 3 {
		t.Fatalf("got format %q rate %v len %d, want jma 100 3", rec.Format, rec.RateHz, rec.Len())
	}
	if rec.NS[2] != 0.5 || rec.EW[2] != -1.25 || rec.UD[2] != 2 {
		t.Errorf("row 3 = %v %v %v", rec.NS[2], rec.EW[2], rec.UD[2])
	}
	want := time.Date(2000, 10, 6, 4, 30, 10, 0, time.UTC)
	if !rec.Start.Equal(want) {
		t.Errorf("Start = %v, want %v", rec.Start, want)
	}
}

func TestReadPlain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		unit  Unit
		wantN int
		want0 [3]float64
	}{
		{"comma", "1,2,3\n4,5,6\n", Gal, 2, [3]float64{1, 2, 3}},
		{"tab with header", "ns\tew\tud\n1\t2\t3\n", Gal, 1, [3]float64{1, 2, 3}},
		{"spaces and comments", "# recorded by x\n\n  1   2  3\n4 5 6\n", Gal, 2, [3]float64{1, 2, 3}},
		{"semicolon", "1;2;3\r\n", Gal, 1, [3]float64{1, 2, 3}},
		{"m/s2 to gal", "0.01,0.02,-0.5\n", MS2, 1, [3]float64{1, 2, -50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, err := Read(strings.NewReader(tt.in), PlainOptions{RateHz: 50, Unit: tt.unit})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Format != FormatPlain || rec.Len() != tt.wantN || rec.RateHz != 50 {
				t.Fatalf("got %q len %d rate %v", rec.Format, rec.Len(), rec.RateHz)
			}
			got := [3]float64{rec.NS[0], rec.EW[0], rec.UD[0]}
			for i := range got {
				if d := got[i] - tt.want0[i]; d > 1e-12 || d < -1e-12 {
					t.Errorf("first row = %v, want %v", got, tt.want0)
				}
			}
		})
	}
}

func TestReadErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	jmaHead := " SAMPLING RATE= 100Hz\n UNIT = gal(cm/s/s)\n NS,EW,UD\n"
	tests := []struct {
		name     string
		in       string
		opts     PlainOptions
		wantErr  error
		wantLine int
	}{
		{"plain ragged", "1,2,3\n4,5\n", PlainOptions{RateHz: 50}, ErrRagged, 2},
		{"plain too wide", "1,2,3,4\n", PlainOptions{RateHz: 50}, ErrRagged, 1},
		{"plain non-numeric", "1,2,3\n1,x,3\n", PlainOptions{RateHz: 50}, ErrNumber, 2},
		{"plain NaN", "1,2,NaN\n", PlainOptions{RateHz: 50}, ErrNumber, 1},
		{"plain header after data", "1,2,3\nns,ew,ud\n", PlainOptions{RateHz: 50}, ErrNumber, 2},
		{"plain no rate", "1,2,3\n", PlainOptions{}, ErrNoRate, 0},
		{"plain empty", "# nothing\n", PlainOptions{RateHz: 50}, ErrNoSamples, 1},
		{"jma ragged", jmaHead + "1,2,3\n1,2\n", PlainOptions{}, ErrRagged, 5},
		{"jma non-numeric", jmaHead + "1,2,3\n1,2,abc\n", PlainOptions{}, ErrNumber, 5},
		{"jma bad rate", " SAMPLING RATE= fastHz\n NS,EW,UD\n1,2,3\n", PlainOptions{}, ErrNoRate, 1},
		{"jma zero rate", " SAMPLING RATE= 0Hz\n NS,EW,UD\n1,2,3\n", PlainOptions{}, ErrNoRate, 1},
		{"jma bad unit", " SAMPLING RATE= 100Hz\n UNIT = furlong\n NS,EW,UD\n1,2,3\n", PlainOptions{}, ErrUnit, 2},
		{"jma no columns", " SAMPLING RATE= 100Hz\n1,2,3\n", PlainOptions{}, ErrNoHeader, 0},
		{"jma no samples", jmaHead, PlainOptions{}, ErrNoSamples, 3},
		{"jma line too long", jmaHead + strings.Repeat("1", maxLine+1) + "\n", PlainOptions{}, ErrLineLong, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(strings.NewReader(tt.in), tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err %T is not a *ParseError", err)
			}
			if pe.Line != tt.wantLine {
				t.Errorf("line = %d, want %d (%v)", pe.Line, tt.wantLine, err)
			}
		})
	}
}

func TestParseUnit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Unit{"gal": Gal, "GAL": Gal, "ms2": MS2, "m/s/s": MS2} {
		got, err := ParseUnit(in)
		if err != nil || got != want {
			t.Errorf("ParseUnit(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseUnit("g"); !errors.Is(err, ErrUnit) {
		t.Errorf("ParseUnit(g) err = %v, want ErrUnit", err)
	}
}

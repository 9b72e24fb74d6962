package measure

import (
	"errors"
	"math"
	"testing"
	"time"

	"shindo.dev/seismo/internal/jmatest"
	"shindo.dev/seismo/jma"
	"shindo.dev/seismo/lpgm"
	"shindo.dev/seismo/pwave"
	"shindo.dev/seismo/resample"
	"shindo.dev/seismo/synth"
)

func TestPipelineOnJMARecords(t *testing.T) {
	t.Parallel()
	for _, ref := range jmatest.References {
		t.Run(ref.File, func(t *testing.T) {
			t.Parallel()
			rec := jmatest.Load(t, ref.File)
			official, err := jma.Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
			if err != nil {
				t.Fatal(err)
			}
			ns, ew, ud := resample.Halve(rec.NS), resample.Halve(rec.EW), resample.Halve(rec.UD)
			const start = int64(1_700_000_000_000)
			p, err := New(Config{StartMs: start})
			if err != nil {
				t.Fatal(err)
			}
			var frames int
			var maxI, maxPGA, maxPGV float64
			qns, qew, qud := make([]float64, 0, len(ns)), make([]float64, 0, len(ns)), make([]float64, 0, len(ns))
			for i := range ns {
				if !p.Add(ns[i], ew[i], ud[i]) {
					continue
				}
				in, se := p.Intensity(), p.Sensor()
				first := start + int64(frames)*FrameMs
				if se.FirstSampleMs != first || in.WindowEndMs != first+FrameMs {
					t.Fatalf("frame %d: first %d end %d, want %d %d", frames, se.FirstSampleMs, in.WindowEndMs, first, first+FrameMs)
				}
				if se.RateHz != RateHz || len(se.NS) != FrameSamples || len(se.EW) != FrameSamples || len(se.UD) != FrameSamples {
					t.Fatalf("frame %d: rate %d, %d/%d/%d samples", frames, se.RateHz, len(se.NS), len(se.EW), len(se.UD))
				}
				for j := 0; j < FrameSamples; j++ {
					k := frames*FrameSamples + j
					g := float64(se.NS[j]) * float64(se.ScaleGal)
					if math.Abs(g-ns[k]) > 0.5*float64(se.ScaleGal)+1e-9 {
						t.Fatalf("sample %d: %d counts × %g = %g gal, want %g", k, se.NS[j], se.ScaleGal, g, ns[k])
					}
					qns = append(qns, g)
					qew = append(qew, float64(se.EW[j])*float64(se.ScaleGal))
					qud = append(qud, float64(se.UD[j])*float64(se.ScaleGal))
				}
				maxI = math.Max(maxI, float64(in.Intensity))
				maxPGA = math.Max(maxPGA, float64(in.PGAGal))
				maxPGV = math.Max(maxPGV, float64(in.PGVCms))
				frames++
			}
			if want := len(ns) / FrameSamples; frames != want {
				t.Fatalf("%d frames, want %d", frames, want)
			}
			if d := maxI - official.I; math.Abs(d) > 0.05 {
				t.Errorf("max frame intensity %.4f, official %.4f (diff %+.4f)", maxI, official.I, d)
			}
			if d := p.MaxIntensity() - maxI; math.Abs(d) > 1e-6 {
				t.Errorf("MaxIntensity %.4f, max over frames %.4f", p.MaxIntensity(), maxI)
			}
			// The frames' peaks are the record's peaks, from the quantised samples.
			if want := jma.PGA(qns, qew, qud); math.Abs(maxPGA-want) > 1e-3*want {
				t.Errorf("max PGA %.4f, want %.4f", maxPGA, want)
			}
			if want := jma.PGV(RateHz, qns, qew, qud); math.Abs(maxPGV-want) > 1e-3*want {
				t.Errorf("max PGV %.4f, want %.4f", maxPGV, want)
			}
			t.Logf("official %.3f, real-time max %.3f, PGA %.1f gal, PGV %.2f cm/s", official.I, maxI, maxPGA, maxPGV)
		})
	}
}

// TestPipelineLongPeriodClass runs the JMA records, decimated to 50 Hz,
// through the pipeline: the running maximum of the frames' SvaCms must give
// each record's long-period ground-motion class (JMA.md §6), and each
// frame's value must be what an lpgm.Tracker makes of the frame's quantised
// samples.
func TestPipelineLongPeriodClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file  string
		class int // JMA.md §6: Sva 42.2, 67.4, 4.4, 7.3 cm/s
	}{
		{"AA06EA01.csv", 2},
		{"Q4149CF2.csv", 3},
		{"Q4169D2004.csv", 0},
		{"Q416EED018.csv", 1},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			rec := jmatest.Load(t, tc.file)
			ns, ew, ud := resample.Halve(rec.NS), resample.Halve(rec.EW), resample.Halve(rec.UD)
			p, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := lpgm.NewTracker(RateHz, lpgm.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var frames int
			var maxSva float64
			for i := range ns {
				if !p.Add(ns[i], ew[i], ud[i]) {
					continue
				}
				se := p.Sensor()
				for j := range FrameSamples {
					ref.Add(float64(se.NS[j])*float64(se.ScaleGal), float64(se.EW[j])*float64(se.ScaleGal))
				}
				got, want := p.Intensity().SvaCms, float32(ref.TakePeak())
				if got != want {
					t.Fatalf("frame %d: SvaCms %v, tracker on the frame's samples %v", frames, got, want)
				}
				maxSva = max(maxSva, float64(got))
				frames++
			}
			if c := lpgm.Class(maxSva); c != tc.class {
				t.Errorf("running max SvaCms %.3f cm/s: class %d, want %d", maxSva, c, tc.class)
			}
			t.Logf("running max SvaCms %.3f cm/s over %d frames, class %d", maxSva, frames, lpgm.Class(maxSva))
		})
	}
}

func TestPipelineQuantisationSaturates(t *testing.T) {
	t.Parallel()
	p, err := New(Config{ScaleGal: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < FrameSamples; i++ {
		p.Add(1e6, -1e6, math.NaN())
	}
	s := p.Sensor()
	if s.NS[0] != math.MaxInt32 || s.EW[0] != math.MinInt32 || s.UD[0] != 0 {
		t.Errorf("counts %d %d %d, want saturation and 0 for NaN", s.NS[0], s.EW[0], s.UD[0])
	}
	if math.IsNaN(float64(p.Intensity().Intensity)) || math.IsInf(float64(p.Intensity().Intensity), 0) {
		t.Errorf("intensity %v, want finite", p.Intensity().Intensity)
	}
	if sva := float64(p.Intensity().SvaCms); math.IsNaN(sva) || math.IsInf(sva, 0) {
		t.Errorf("SvaCms %v, want finite", sva)
	}
}

func TestNewRejectsBadScale(t *testing.T) {
	t.Parallel()
	for _, s := range []float64{-1, math.Inf(1), math.NaN(), 1e-50} {
		if _, err := New(Config{ScaleGal: s}); !errors.Is(err, ErrScale) {
			t.Errorf("scale %v: err = %v, want ErrScale", s, err)
		}
	}
}

func TestNextSampleMsAndClone(t *testing.T) {
	t.Parallel()
	p, err := New(Config{StartMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		p.Add(float64(i), 0, 0)
	}
	if got := p.NextSampleMs(); got != 1000+30*20 {
		t.Errorf("NextSampleMs = %d, want %d", got, 1000+30*20)
	}
	c := p.Sensor().Clone()
	for i := 0; i < 25; i++ {
		p.Add(-1, 0, 0)
	}
	if c.NS[3] != 3000 {
		t.Errorf("clone changed with the pipeline: %d", c.NS[3])
	}
}

func TestPipelineDoesNotAllocate(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(50, func() {
		for j := 0; j < FrameSamples; j++ {
			x := float64(i)
			p.Add(math.Sin(x), math.Cos(x), 0.1)
			i++
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame, want 0", allocs)
	}
}

// BenchmarkFrame is one station's work per 500 ms: 25 samples in, one pair
// of frames out.
func BenchmarkFrame(b *testing.B) {
	p, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	x := 0.0
	for i := 0; i < 60*RateHz; i++ {
		x += 0.37
		p.Add(10*math.Sin(x), 10*math.Cos(x), math.Sin(3*x))
	}
	b.ReportAllocs()
	for b.Loop() {
		for j := 0; j < FrameSamples; j++ {
			x += 0.37
			p.Add(10*math.Sin(x), 10*math.Cos(x), math.Sin(3*x))
		}
	}
}

// TestPipelineOnSyntheticStation runs a simulated station through the
// pipeline, as the station simulator does: 25 samples at a time from the
// generator, one frame each.
func TestPipelineOnSyntheticStation(t *testing.T) {
	t.Parallel()
	ev, err := synth.Scenario("hualien")
	if err != nil {
		t.Fatal(err)
	}
	start := ev.Origin.Add(-10 * time.Second)
	gen := synth.New(synth.Position{Lat: 23.98, Lon: 121.60}, start, synth.Config{Seed: 3})
	gen.AddEvent(ev)
	p, err := New(Config{StartMs: start.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	var all [3][]float64
	ns, ew, ud := make([]float64, FrameSamples), make([]float64, FrameSamples), make([]float64, FrameSamples)
	var maxI float64
	var pick pwave.Measurement // the P wave as the last frame carried it
	for range 2 * 90 {         // 90 s
		gen.Read(ns, ew, ud)
		for i := range ns {
			if p.Add(ns[i], ew[i], ud[i]) {
				f := p.Intensity()
				maxI = math.Max(maxI, float64(f.Intensity))
				if pick.Picked() && f.P.Picked() && f.P.OnsetMs != pick.OnsetMs {
					t.Fatalf("frame ending %d: pick %+v after %+v", f.WindowEndMs, f.P, pick)
				}
				if f.P.Picked() {
					pick = f.P
				}
			}
		}
		all[0], all[1], all[2] = append(all[0], ns...), append(all[1], ew...), append(all[2], ud...)
	}
	official, err := jma.Instrumental(RateHz, all[0], all[1], all[2])
	if err != nil {
		t.Fatal(err)
	}
	if d := maxI - official.I; math.Abs(d) > 0.05 {
		t.Errorf("max frame intensity %.3f, official %.3f of the same samples", maxI, official.I)
	}
	// The frames carry the station's P pick, at the P arrival, and the
	// first 3 s of it.
	arrival := ev.Origin.Add(time.Duration(ev.HypocentralKm(synth.Position{Lat: 23.98, Lon: 121.60}) / synth.DefaultModel().AlphaKmS * float64(time.Second)))
	if d := pick.OnsetMs - arrival.UnixMilli(); d < -200 || d > 1000 {
		t.Errorf("P picked %+d ms from its arrival (%+v)", d, pick)
	}
	if pick.WindowMs != pwave.WindowMs || !(pick.TauCS > 0) || !(pick.PdCm > 0) {
		t.Errorf("P measurement %+v, want a 3 s window with Pd and τc", pick)
	}
	if official.Class() < jma.Class5Lower {
		t.Errorf("Hualien city in the M7.4 scenario: intensity %.2f, want 5- or more", official.I)
	}
}

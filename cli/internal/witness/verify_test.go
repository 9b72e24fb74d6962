package witness

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

const testStation = "WIT00001"

// testBase is the end of the first round of the synthetic runs.
const testBase = int64(1_764_607_200_000)

// sentStation is a station that sent rounds 0…n-1 (intensity frame ending
// at testBase+r·500, sensor frame starting 500 ms before), every packet
// acked on the primary, except the rounds in skip (not sent at all).
func sentStation(n int, skip ...int) *station {
	st := &station{id: testStation}
	for r := range n {
		if containsInt(skip, r) {
			continue
		}
		end := testBase + int64(r)*frameMs
		st.sent = append(st.sent, &packet{kind: intensity, ms: end, ackedBy: 1}, &packet{kind: sensor, ms: end - frameMs, ackedBy: 1})
	}
	return st
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// sensorAt returns the station's sensor packet of round r.
func sensorAt(st *station, r int) *packet {
	for _, p := range st.sent {
		if p.kind == sensor && p.ms == testBase+int64(r-1)*frameMs {
			return p
		}
	}
	panic(fmt.Sprintf("no round %d", r))
}

func TestCheckFindsEachKindOfFault(t *testing.T) {
	t.Parallel()
	first := func(r int) int64 { return testBase + int64(r-1)*frameMs }
	for _, c := range []struct {
		name string
		skip []int
		// change alters what was acked and what the archive holds;
		// answer, the archive's answer.
		change func(st *station, a *archive)
		answer func(resp *waveformv1.QueryResponse)
		want   CoreReport // Examples: substrings of the first example
	}{
		{name: "all stored", want: CoreReport{Checked: 40}},
		{
			name: "acked sensor frame missing",
			change: func(st *station, a *archive) {
				for i := range frameSamples {
					delete(a.samples[testStation], first(5)+int64(i)*samplePeriod)
				}
			},
			want: CoreReport{Checked: 40, Missing: 1, Examples: []string{fmt.Sprintf("sensor first_sample_ms=%d", first(5)), "missing; acked on primary"}},
		},
		{
			name: "acked intensity frame missing",
			change: func(st *station, a *archive) {
				delete(a.intensity[testStation], testBase+3*frameMs)
				st.sent[6].ackedBy = 3
			},
			want: CoreReport{Checked: 40, Missing: 1, Examples: []string{fmt.Sprintf("intensity window_end_ms=%d", testBase+3*frameMs), "acked on primary and backup"}},
		},
		{
			name: "unacked frame missing",
			change: func(st *station, a *archive) {
				sensorAt(st, 5).ackedBy = 0
				for i := range frameSamples {
					delete(a.samples[testStation], first(5)+int64(i)*samplePeriod)
				}
			},
			want: CoreReport{Checked: 39},
		},
		{
			name:   "unacked frame found",
			change: func(st *station, a *archive) { sensorAt(st, 5).ackedBy = 0 },
			want:   CoreReport{Checked: 39, FoundUnacked: 1},
		},
		{
			name: "part of a frame missing",
			change: func(st *station, a *archive) {
				for i := 3; i < 6; i++ {
					delete(a.samples[testStation], first(7)+int64(i)*samplePeriod)
				}
			},
			want: CoreReport{Checked: 40, Missing: 1, Examples: []string{"only 22 of 25 samples"}},
		},
		{
			name: "a chunk repeated",
			answer: func(resp *waveformv1.QueryResponse) {
				resp.Chunks = append(resp.Chunks, proto.Clone(resp.Chunks[0]).(*waveformv1.Chunk))
			},
			want: CoreReport{Checked: 40, Duplicated: 20, Examples: []string{"25 samples in the answer twice"}},
		},
		{
			name: "chunks overlapping by one sample",
			answer: func(resp *waveformv1.QueryResponse) {
				c := resp.Chunks[0]
				n := len(c.Ns)
				resp.Chunks = []*waveformv1.Chunk{
					{StationId: testStation, FirstSampleMs: c.FirstSampleMs, RateHz: 50, ScaleGal: scaleGal, Ns: c.Ns[:101], Ew: c.Ew[:101], Ud: c.Ud[:101]},
					{StationId: testStation, FirstSampleMs: c.FirstSampleMs + 100*samplePeriod, RateHz: 50, ScaleGal: scaleGal, Ns: c.Ns[100:n], Ew: c.Ew[100:n], Ud: c.Ud[100:n]},
				}
			},
			want: CoreReport{Checked: 40, Duplicated: 1, Examples: []string{fmt.Sprintf("first_sample_ms=%d", first(4)), "1 samples in the answer twice"}},
		},
		{
			name: "an intensity frame listed twice",
			answer: func(resp *waveformv1.QueryResponse) {
				resp.Intensity = append(resp.Intensity, proto.Clone(resp.Intensity[4]).(*waveformv1.IntensitySample))
			},
			want: CoreReport{Checked: 40, Duplicated: 1, Examples: []string{"in the answer 2 times"}},
		},
		{
			name: "one value changed",
			answer: func(resp *waveformv1.QueryResponse) {
				resp.Chunks[0].Ud[60]++ // round 2's sensor frame, sample 10
			},
			want: CoreReport{Checked: 40, Corrupt: 1, Examples: []string{fmt.Sprintf("first_sample_ms=%d", first(2)), "values other than those sent"}},
		},
		{
			name: "a frame copied where none was sent",
			skip: []int{10},
			change: func(st *station, a *archive) {
				ns, ew, ud := sensorSamples(testStation, first(2))
				a.putSensor(testStation, first(10), ns, ew, ud)
			},
			want: CoreReport{Checked: 38, Duplicated: 1, Examples: []string{
				fmt.Sprintf("first_sample_ms=%d", first(10)), fmt.Sprintf("holds the samples of the frame at first_sample_ms=%d again", first(2))}},
		},
		{
			name: "a frame stored in another's place",
			change: func(st *station, a *archive) {
				for i := range frameSamples {
					delete(a.samples[testStation], first(3)+int64(i)*samplePeriod)
				}
				ns, ew, ud := sensorSamples(testStation, first(2))
				a.putSensor(testStation, first(3), ns, ew, ud)
			},
			want: CoreReport{Checked: 40, Corrupt: 1, Examples: []string{fmt.Sprintf("holds the samples of the frame at first_sample_ms=%d instead", first(2))}},
		},
		{
			name: "another station's samples where nothing was sent",
			skip: []int{10},
			change: func(st *station, a *archive) {
				ns, ew, ud := sensorSamples("WIT00002", first(10))
				a.putSensor(testStation, first(10), ns, ew, ud)
			},
			want: CoreReport{Checked: 38, Corrupt: 1, Examples: []string{"25 samples where no frame was sent"}},
		},
		{
			name:   "another count size",
			change: func(st *station, a *archive) { a.scale = 0.001 },
			want:   CoreReport{Checked: 40, Corrupt: 20, Examples: []string{"scale 0.001 gal, sent 1e-06"}},
		},
		{
			name: "an intensity value changed",
			answer: func(resp *waveformv1.QueryResponse) {
				resp.Intensity[2].PgaGal += 0.5
			},
			want: CoreReport{Checked: 40, Corrupt: 1, Examples: []string{fmt.Sprintf("window_end_ms=%d", testBase+2*frameMs), "PGA"}},
		},
		{
			name: "an intensity frame where none was sent",
			skip: []int{10},
			change: func(st *station, a *archive) {
				a.putIntensity(testStation, testBase+10*frameMs, -2, 0, 0)
			},
			want: CoreReport{Checked: 38, Corrupt: 1, Examples: []string{"a frame where none was sent"}},
		},
		{
			name: "samples outside the window asked",
			answer: func(resp *waveformv1.QueryResponse) {
				ns, ew, ud := sensorSamples("WIT00002", first(30))
				resp.Chunks = append(resp.Chunks, &waveformv1.Chunk{FirstSampleMs: first(30), RateHz: 50, ScaleGal: scaleGal, Ns: ns, Ew: ew, Ud: ud})
			},
			want: CoreReport{Checked: 40},
		},
		{
			name: "the run before's last frames at the window's start",
			change: func(st *station, a *archive) {
				a.putFrame(testStation, intensity, testBase-frameMs)
				a.putFrame(testStation, sensor, testBase-2*frameMs)
			},
			want: CoreReport{Checked: 40},
		},
		{
			name: "the run after's first sample at the window's end",
			change: func(st *station, a *archive) {
				a.putFrame(testStation, sensor, testBase+19*frameMs)
			},
			want: CoreReport{Checked: 40},
		},
		{
			name:   "nothing stored",
			change: func(st *station, a *archive) { *a = *newArchive() },
			want:   CoreReport{Checked: 40, Missing: 40},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := sentStation(20, c.skip...)
			a := newArchive()
			for _, p := range st.sent {
				a.putFrame(testStation, p.kind, p.ms)
			}
			if c.change != nil {
				c.change(st, a)
			}
			plan := planStation(st)
			if len(plan) != 1 {
				t.Fatalf("%d windows for 10 s", len(plan))
			}
			resp := a.query(testStation, plan[0].start, plan[0].end)
			if c.answer != nil {
				c.answer(resp)
			}
			got := check(plan[0], resp)
			if got.Checked != c.want.Checked || got.Missing != c.want.Missing || got.Duplicated != c.want.Duplicated ||
				got.Corrupt != c.want.Corrupt || got.FoundUnacked != c.want.FoundUnacked {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			if len(c.want.Examples) > 0 && len(got.Examples) == 0 {
				t.Fatalf("no evidence; want %q", c.want.Examples)
			}
			for _, s := range c.want.Examples {
				if !strings.Contains(got.Examples[0], s) {
					t.Errorf("evidence %q lacks %q", got.Examples[0], s)
				}
			}
			if c.want.Missing+c.want.Duplicated+c.want.Corrupt == 0 && len(got.Examples) > 0 {
				t.Errorf("evidence of nothing: %q", got.Examples)
			}
		})
	}
}

func TestPlanSplitsLongRunsIntoWindows(t *testing.T) {
	t.Parallel()
	st := sentStation(2*40*60 + 7) // 40 min and 3.5 s
	plan := planStation(st)
	if len(plan) != 3 {
		t.Fatalf("%d windows, want 3", len(plan))
	}
	seen := 0
	for i, e := range plan {
		if e.end-e.start > queryWindow || e.start%frameMs != 0 {
			t.Errorf("window %d: [%d, %d)", i, e.start, e.end)
		}
		if i > 0 && e.start != plan[i-1].end {
			t.Errorf("window %d starts at %d, the one before ends at %d", i, e.start, plan[i-1].end)
		}
		for ms := range e.sensor {
			if ms < e.start || ms+frameMs > e.end {
				t.Errorf("sensor frame %d outside its window [%d, %d)", ms, e.start, e.end)
			}
		}
		for ms := range e.intensity {
			if ms < e.start || ms >= e.end {
				t.Errorf("intensity frame %d outside its window [%d, %d)", ms, e.start, e.end)
			}
		}
		seen += len(e.sensor) + len(e.intensity)
	}
	if seen != len(st.sent) {
		t.Fatalf("%d frames in the windows, %d sent", seen, len(st.sent))
	}
	if plan[0].start != testBase-frameMs || plan[2].end != testBase+int64(2*40*60+6)*frameMs+1 {
		t.Fatalf("windows span [%d, %d)", plan[0].start, plan[2].end)
	}
}

func TestViolations(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		r    Report
		want []string
	}{
		{"clean", Report{Acked: 10, Cores: map[string]CoreReport{"TNN-1": {Checked: 10}, "TYO-1": {Checked: 10}}}, nil},
		{"nothing acked", Report{Sent: 10, Cores: map[string]CoreReport{"TNN-1": {}}}, []string{"nothing is proven"}},
		{"no archive", Report{Acked: 10}, []string{"no archive was checked"}},
		{"findings", Report{Acked: 10, Cores: map[string]CoreReport{
			"TYO-1": {Checked: 10, Missing: 2, Corrupt: 1, Examples: []string{"WIT00001 sensor …"}},
			"TNN-1": {Checked: 10, Duplicated: 1, Err: "query: unavailable"},
		}}, []string{
			"TNN-1: archive not fully read: query: unavailable",
			"TNN-1: 1 packets stored more than once",
			"TYO-1: 2 of 10 acked packets missing; e.g. WIT00001 sensor …",
			"TYO-1: 1 packets stored with wrong values",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := c.r.Violations()
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want %q", got, c.want)
			}
			for i := range got {
				if !strings.Contains(got[i], c.want[i]) {
					t.Errorf("violation %d: %q lacks %q", i, got[i], c.want[i])
				}
			}
		})
	}
}

// FuzzCheck feeds check answers of any shape: it must not fail, and it
// must count no more missing packets than it checked.
func FuzzCheck(f *testing.F) {
	f.Add(int64(0), uint32(50), int32(0), 25, 3, false)
	f.Add(int64(-480), uint32(50), int32(7), 60, 0, true)
	f.Add(int64(13), uint32(0), int32(-1), 1000, 2, false)
	f.Add(int64(1<<40), uint32(1000), int32(1<<30), 0, 1, true)
	f.Fuzz(func(t *testing.T, offset int64, rate uint32, delta int32, n, axesShort int, twice bool) {
		st := sentStation(8)
		plan := planStation(st)[0]
		n = min(max(n, 0), 5000)
		c := &waveformv1.Chunk{FirstSampleMs: plan.start + offset, RateHz: rate, ScaleGal: scaleGal}
		for i := range n {
			ns, ew, ud := sample(stationTag(testStation), frameIndex(plan.start)+int64(i/frameSamples), i%frameSamples)
			c.Ns, c.Ew, c.Ud = append(c.Ns, ns+delta), append(c.Ew, ew), append(c.Ud, ud)
		}
		if axesShort > 0 && len(c.Ud) > 0 {
			c.Ud = c.Ud[:len(c.Ud)-min(axesShort, len(c.Ud))]
		}
		resp := &waveformv1.QueryResponse{Chunks: []*waveformv1.Chunk{c},
			Intensity: []*waveformv1.IntensitySample{{WindowEndMs: plan.start + offset, Intensity: float32(delta)}}}
		if twice {
			resp.Chunks = append(resp.Chunks, c)
		}
		r := check(plan, resp)
		if r.Missing > r.Checked || r.Checked != 16 || len(r.Examples) > maxExamples {
			t.Fatalf("report %+v", r)
		}
	})
}

package archive

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestAvailability: the spans are the channel's stretches without a gap,
// cut to the window, from records and from samples not yet in one alike;
// an intensity channel counts its frames; the budget bounds the answer.
func TestAvailability(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := openTest(t, t.TempDir(), &clock{t: now}, nil)
	base := now.Add(-time.Hour).UnixMilli()
	// Sensor frames 0–9 and 15–19 (a gap of 2.5 s), intensity 0–9.
	var frames []Frame
	for i := int64(0); i < 20; i++ {
		if i >= 10 && i < 15 {
			continue
		}
		frames = append(frames, sensorFrame(1, base+500*i))
		if i < 10 {
			frames = append(frames, intensityFrame(1, base+500*i+500))
		}
	}
	s.apply(frames...)
	all := 100
	_, got, err := s.Availability(stationID(1), []int{chZ, chI}, base-60_000, base+60_000, &all)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChannelSpans{
		{Channel: "BNZ", RateHz: 50, Spans: []Span{{base, base + 5000}, {base + 7500, base + 10_000}}},
		{Channel: "MXI", RateHz: 2, Spans: []Span{{base + 500, base + 5500}}},
	}
	if !slices.EqualFunc(got, want, func(a, b ChannelSpans) bool {
		return a.Channel == b.Channel && a.RateHz == b.RateHz && slices.Equal(a.Spans, b.Spans)
	}) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	if all != 97 {
		t.Errorf("budget left %d, want 97", all)
	}
	// A window inside the first stretch and across the gap.
	n := 100
	_, got, _ = s.Availability(stationID(1), []int{chZ}, base+1000, base+8000, &n)
	if len(got) != 1 || !slices.Equal(got[0].Spans, []Span{{base + 1000, base + 5000}, {base + 7500, base + 8000}}) {
		t.Errorf("cut to the window: %+v", got)
	}
	// Nothing in the window: no channel.
	if _, got, _ = s.Availability(stationID(1), []int{chZ}, base+5000, base+7500, &n); len(got) != 0 {
		t.Errorf("in the gap: %+v", got)
	}
	one := 1
	if _, _, err := s.Availability(stationID(1), []int{chZ}, base, base+60_000, &one); !errors.Is(err, ErrTooManySpans) {
		t.Errorf("over the budget: %v", err)
	}
	if _, _, err := s.Availability("nobody", []int{chZ}, base, base+60_000, &n); !errors.Is(err, ErrUnknownStation) {
		t.Errorf("unknown station: %v", err)
	}
	if _, _, err := s.Availability(stationID(1), []int{chZ}, base, base, &n); !errors.Is(err, ErrWindow) {
		t.Errorf("empty window: %v", err)
	}
}

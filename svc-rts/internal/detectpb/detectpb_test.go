package detectpb

import (
	"testing"

	"google.golang.org/protobuf/proto"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/svc-rts/internal/detect"
)

const t0 = 1_800_000_000_000

// saved is a state with an open detection holding a flash and a
// long-period station, and a final one.
func saved(tb testing.TB) detect.Saved {
	tb.Helper()
	s := detect.New(detect.Config{})
	near := []detect.Trigger{
		{Station: "A", Lat: 23.99, Lon: 121.61, Box: 18, InBox: true, Code: 970, Intensity: 4.1,
			P: detect.PWave{OnsetMs: t0 + 23*500 - 160, WindowMs: 3000, PdCm: 0.84, TauCS: 1.7}},
		{Station: "B", Lat: 23.96, Lon: 121.57, Box: 18, InBox: true, Code: 973, Intensity: 3.2},
		{Station: "C", Lat: 23.86, Lon: 121.51, Box: 18, InBox: true, Code: 974, Intensity: 2.7},
	}
	south := []detect.Trigger{
		{Station: "S1", Lat: 22.0, Lon: 120.7, Intensity: 2}, {Station: "S2", Lat: 22.05, Lon: 120.75, Intensity: 2},
		{Station: "S3", Lat: 22.1, Lon: 120.7, Intensity: 2},
	}
	s.Step(t0, south, nil, nil)
	for k := int64(1); k < 25; k++ { // the southern one ends
		s.Step(t0+k*500, nil, nil, nil)
	}
	s.Step(t0+25*500, near, []detect.LongPeriod{{Station: "A", Lat: 23.99, Lon: 121.61, SvaCms: 17.3}}, nil)
	v := s.Save()
	if len(v.Events) != 2 || !v.Events[0].Pub.Final || v.Events[1].Pub.Flash == nil || v.Events[1].Members[0].P.OnsetMs == 0 {
		tb.Fatalf("setup: %+v", v)
	}
	return v
}

// TestRoundTrip: a state through its message comes back whole.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	v := saved(t)
	pb := State(v)
	b, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	var back rtsv1.DetectorState
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := FromState(&back)
	if !proto.Equal(State(got), pb) {
		t.Fatalf("round trip changed the state:\n%v\n%v", State(got), pb)
	}
	if _, err := detect.Restore(detect.Config{}, got); err != nil {
		t.Fatalf("round-tripped state refused: %v", err)
	}
}

// FuzzPeerState: whatever the peer core sends, the state is refused with
// an error or restored, and a restored state steps on.
func FuzzPeerState(f *testing.F) {
	seed := func(m *natsbusv1.DetectorSync) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	v := saved(f)
	seed(&natsbusv1.DetectorSync{TickMs: t0 + 12_500, ContinuousSinceMs: t0 - 60_000, State: State(v)})
	seed(&natsbusv1.DetectorSync{TickMs: t0, ContinuousSinceMs: t0})
	bad := State(v)
	bad.Picks[0].DetectionId = "nowhere"
	bad.Events[1].Members = append(bad.Events[1].Members, bad.Events[1].Members[0])
	seed(&natsbusv1.DetectorSync{State: bad})
	f.Add([]byte{0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m natsbusv1.DetectorSync
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		s, err := detect.Restore(detect.Config{}, FromState(m.GetState()))
		if err != nil {
			return
		}
		s.Step(t0+13_000, []detect.Trigger{{Station: "A", Lat: 23.99, Lon: 121.61, Intensity: 3}}, nil, nil)
		s.Detections()
	})
}

package verify

import (
	"bytes"
	"math"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/stationwire"
)

const keyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

var (
	key   = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}
	epoch = time.UnixMilli(1_800_000_000_000)
)

func testGate(t testing.TB) *Gate {
	set, err := registry.Parse([]byte(`[
		{"id":"S1","key_id":1,"key_hex":"` + keyHex + `"},
		{"id":"RETIRED","key_id":1,"key_hex":"` + keyHex + `","active":false}]`))
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultLimits()
	limits.Window = 1024
	g := New("TNN-1", set, limits)
	g.now = func() time.Time { return epoch }
	return g
}

func packet(station string, seq uint64, sentAt time.Time) *stationv1.Packet {
	return &stationv1.Packet{StationId: station, Seq: seq, SentAtMs: sentAt.UnixMilli(),
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: sentAt.UnixMilli(), Intensity: 2}}}
}

func seal(t testing.TB, k []byte, keyID uint32, m proto.Message) []byte {
	b, err := stationwire.Seal(k, keyID, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// check runs the gate as ingest does: a new packet is committed (made
// durable) unless record is false.
func check(g *Gate, b []byte, record bool) Outcome {
	o := g.Check(b)
	if o.Result == Accepted && record {
		g.Commit(&o)
	}
	return o
}

func TestCheck(t *testing.T) {
	t.Parallel()
	g := testGate(t)
	good := seal(t, key, 1, packet("S1", 5, epoch))
	tests := []struct {
		name    string
		b       []byte
		record  bool
		want    Result
		wantAck bool
	}{
		{"accepted", good, true, Accepted, true},
		{"retransmission re-acked", good, true, Duplicate, true},
		{"oversize", make([]byte, 1300), true, Oversize, false},
		{"garbage", []byte("hello"), true, Malformed, false},
		{"unknown station", seal(t, key, 1, packet("S9", 1, epoch)), true, UnknownStation, false},
		{"retired station", seal(t, key, 1, packet("RETIRED", 1, epoch)), true, UnknownStation, false},
		{"wrong key", seal(t, bytes.Repeat([]byte{7}, 32), 1, packet("S1", 6, epoch)), true, BadMAC, false},
		{"unknown key id", seal(t, key, 2, packet("S1", 6, epoch)), true, BadMAC, false},
		{"no body", seal(t, key, 1, &stationv1.Packet{StationId: "S1", Seq: 6, SentAtMs: epoch.UnixMilli()}), true, Malformed, false},
		{"stale past", seal(t, key, 1, packet("S1", 7, epoch.Add(-31*time.Second))), true, Stale, false},
		{"stale future", seal(t, key, 1, packet("S1", 8, epoch.Add(31*time.Second))), true, Stale, false},
		{"fresh edge", seal(t, key, 1, packet("S1", 9, epoch.Add(-30*time.Second))), true, Accepted, true},
		{"not recorded, no ack", seal(t, key, 1, packet("S1", 10, epoch)), false, Accepted, false},
		{"retried after that", seal(t, key, 1, packet("S1", 10, epoch)), true, Accepted, true},
		{"jump ahead", seal(t, key, 1, packet("S1", 5000, epoch)), true, Accepted, true},
		{"below window", seal(t, key, 1, packet("S1", 11, epoch)), true, Replayed, false},
	}
	for _, tt := range tests { // sequential: the cases share the replay window
		out := check(g, tt.b, tt.record)
		if out.Result != tt.want || (out.Ack != nil) != tt.wantAck {
			t.Fatalf("%s: result %v ack %v; want %v ack %v", tt.name, out.Result, out.Ack != nil, tt.want, tt.wantAck)
		}
		if out.Ack != nil {
			ack, err := stationwire.OpenAck(key, out.Ack)
			if err != nil {
				t.Fatalf("%s: ack does not verify: %v", tt.name, err)
			}
			if ack.GetSite() != "TNN-1" || ack.GetStationId() != out.Packet.GetStationId() || ack.GetSeq() != out.Packet.GetSeq() || ack.GetRecvAtMs() != epoch.UnixMilli() {
				t.Fatalf("%s: ack %v", tt.name, ack)
			}
		}
	}
}

func TestRecordedOncePerSeq(t *testing.T) {
	t.Parallel()
	g := testGate(t)
	b := seal(t, key, 1, packet("S1", 1, epoch))
	recorded := 0
	for range 5 {
		if check(g, b, true).Result == Accepted {
			recorded++
		}
	}
	if recorded != 1 {
		t.Fatalf("recorded %d times", recorded)
	}
	// A copy that came from the peer core first makes the direct one a
	// duplicate.
	if !g.Record("S1", 2, epoch.UnixMilli()) || g.Record("S1", 2, epoch.UnixMilli()) {
		t.Fatal("Record")
	}
	if o := check(g, seal(t, key, 1, packet("S1", 2, epoch)), true); o.Result != Duplicate || o.Ack == nil {
		t.Fatalf("direct copy after the peer's: %v", o.Result)
	}
}

func FuzzCheck(f *testing.F) {
	g := testGate(f)
	f.Add(seal(f, key, 1, packet("S1", 5, epoch)))
	f.Add(seal(f, key, 1, &stationv1.Packet{StationId: "S1"}))
	f.Add([]byte{0x0a, 0x00, 0x12, 0x20})
	picked := packet("S1", 6, epoch)
	picked.GetIntensity().PWave = &stationv1.PWave{OnsetMs: picked.GetIntensity().GetWindowEndMs() - 1500, WindowMs: 1500, PdCm: 0.3, TaucS: 1.1}
	f.Add(seal(f, key, 1, picked))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := check(g, b, true)
		if out.Result == Accepted && out.Packet.GetStationId() != "S1" {
			t.Fatalf("accepted a packet of %q", out.Packet.GetStationId())
		}
		if w := out.Packet.GetIntensity().GetPWave(); out.Result == Accepted && w != nil && !pBounded(w, out.Packet.GetIntensity().GetWindowEndMs(), func(v float32, lo, hi float64) bool {
			return float64(v) >= lo && float64(v) <= hi
		}) {
			t.Fatalf("accepted a P-wave measurement out of bounds: %v", w)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	g := testGate(b)
	datagrams := make([][]byte, 4096)
	for i := range datagrams {
		datagrams[i] = seal(b, key, 1, packet("S1", uint64(i+1), epoch))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		check(g, datagrams[i%len(datagrams)], true)
		i++
	}
}

// TestSignedContentBounded: what a valid key signs is bounded before it is
// trusted. A frame dated far from its send time, values no ground motion
// has, a seq leaping past the jump bound are refused — and the station's
// next honest packets are accepted, so one bad packet cannot take it off
// the network. A station sending past its budget is dropped and counted.
func TestSignedContentBounded(t *testing.T) {
	t.Parallel()
	g := testGate(t)
	seq := uint64(100)
	honest := func() Result {
		t.Helper()
		seq++
		return check(g, seal(t, key, 1, packet("S1", seq, epoch)), true).Result
	}
	if r := honest(); r != Accepted {
		t.Fatalf("first packet: %v", r)
	}
	farFuture := packet("S1", 200, epoch)
	farFuture.GetIntensity().WindowEndMs = 253402300799000 // the year 9999
	nan := packet("S1", 201, epoch)
	nan.GetIntensity().Intensity = float32(math.NaN())
	huge := packet("S1", 202, epoch)
	huge.GetIntensity().PgaGal = 1e9
	sensor := func(mod func(*stationv1.SensorFrame)) *stationv1.Packet {
		f := &stationv1.SensorFrame{FirstSampleMs: epoch.UnixMilli() - 500, RateHz: 50, ScaleGal: 0.001,
			Ns: make([]int32, 25), Ew: make([]int32, 25), Ud: make([]int32, 25)}
		mod(f)
		return &stationv1.Packet{StationId: "S1", Seq: 203, SentAtMs: epoch.UnixMilli(), Body: &stationv1.Packet_Sensor{Sensor: f}}
	}
	withP := func(seq uint64, w *stationv1.PWave) *stationv1.Packet {
		p := packet("S1", seq, epoch)
		w.OnsetMs += p.GetIntensity().GetWindowEndMs()
		p.GetIntensity().PWave = w
		return p
	}
	jump := packet("S1", math.MaxInt64, epoch)
	for _, tc := range []struct {
		name string
		p    *stationv1.Packet
	}{
		{"a window end in the year 9999", farFuture},
		{"NaN intensity", nan},
		{"a PGA of a million g", huge},
		{"samples from an hour ago", sensor(func(f *stationv1.SensorFrame) { f.FirstSampleMs -= 3600_000 })},
		{"a sample rate of 0", sensor(func(f *stationv1.SensorFrame) { f.RateHz = 0 })},
		{"a negative scale", sensor(func(f *stationv1.SensorFrame) { f.ScaleGal = -1 })},
		{"axes of different lengths", sensor(func(f *stationv1.SensorFrame) { f.Ud = f.Ud[:3] })},
		{"a P pick after its frame", withP(204, &stationv1.PWave{OnsetMs: 20})},
		{"a P pick from an hour ago", withP(205, &stationv1.PWave{OnsetMs: -3600_000})},
		{"a P window of a minute", withP(206, &stationv1.PWave{OnsetMs: -60_000, WindowMs: 60_000})},
		{"a Pd of a kilometre", withP(207, &stationv1.PWave{OnsetMs: -1000, WindowMs: 1000, PdCm: 1e5})},
		{"a NaN τc", withP(208, &stationv1.PWave{OnsetMs: -1000, WindowMs: 1000, TaucS: float32(math.NaN())})},
		{"seq 2^63−1", jump},
	} {
		if o := check(g, seal(t, key, 1, tc.p), true); o.Result != OutOfBounds || o.Ack != nil {
			t.Errorf("%s: %v (ack %v)", tc.name, o.Result, o.Ack != nil)
		}
		if r := honest(); r != Accepted {
			t.Fatalf("after %s the station's next packet is %v", tc.name, r)
		}
	}
	if o := check(g, seal(t, key, 1, sensor(func(*stationv1.SensorFrame) {})), true); o.Result != Accepted {
		t.Errorf("an honest sensor frame: %v", o.Result)
	}
	seq++
	if o := check(g, seal(t, key, 1, withP(seq, &stationv1.PWave{OnsetMs: -2500, WindowMs: 2520, PdCm: 0.8, TaucS: 1.9})), true); o.Result != Accepted {
		t.Errorf("an honest P-wave measurement: %v", o.Result)
	}
	// A station on silent ground (or before its first samples) reports
	// the intensity of a0 at its floor, -11.06.
	seq++
	silent := packet("S1", seq, epoch)
	silent.GetIntensity().Intensity = -11.06
	if o := check(g, seal(t, key, 1, silent), true); o.Result != Accepted {
		t.Errorf("a silent station's frame: %v", o.Result)
	}

	// The budget: a burst, then the rate.
	limited := 0
	for range 200 {
		if honest() == RateLimited {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("200 packets at one instant were all accepted")
	}
	g.now = func() time.Time { return epoch.Add(time.Second) }
	if r := honest(); r != Accepted {
		t.Fatalf("a second later: %v", r)
	}
}

// swappable is a registry that changes under the gate, as the database's
// does.
type swappable struct{ set *registry.Set }

func (s *swappable) Lookup(id string) (*registry.Station, bool) { return s.set.Lookup(id) }

// TestSeqReset: a station whose counter restarted has its low seqs taken
// for replays, until an admin records the reset (registry SeqResetMs):
// then its window starts afresh, and records received before the reset —
// from the journal after a restart, or the peer core — are not taken as
// new.
func TestSeqReset(t *testing.T) {
	t.Parallel()
	parse := func(reset int64) *registry.Set {
		set, err := registry.Parse([]byte(`[{"id":"S1","key_id":1,"key_hex":"` + keyHex + `","seq_reset_ms":` + strconv.FormatInt(reset, 10) + `}]`))
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	reg := &swappable{set: parse(0)}
	g := New("TNN-1", reg, DefaultLimits())
	g.now = func() time.Time { return epoch }
	for seq := uint64(5000); seq < 5010; seq++ {
		if r := check(g, seal(t, key, 1, packet("S1", seq, epoch)), true).Result; r != Accepted {
			t.Fatalf("seq %d: %v", seq, r)
		}
	}
	if r := check(g, seal(t, key, 1, packet("S1", 1, epoch)), true).Result; r != Replayed {
		t.Fatalf("a restarted counter before the reset: %v", r)
	}
	resetAt := time.Now().UnixMilli() - 1000 // the registry bounds resets by the real clock
	reg.set = parse(resetAt)
	if r := check(g, seal(t, key, 1, packet("S1", 1, epoch)), true).Result; r != Accepted {
		t.Fatalf("after the reset: %v", r)
	}
	if g.Record("S1", 5005, resetAt-1) {
		t.Fatal("a record from before the reset taken as new")
	}
	if !g.Record("S1", 2, resetAt+1) {
		t.Fatal("a record from after the reset not taken")
	}
	// The same reset seen again changes nothing.
	if r := check(g, seal(t, key, 1, packet("S1", 1, epoch)), true).Result; r != Duplicate {
		t.Fatalf("seq 1 again: %v", r)
	}
}

// TestCopiesDoNotSilenceTheStation: anyone who saw one of a station's
// datagrams may send it again, many times, while it is fresh. The copies
// are acked within a budget of their own; the station's new packets are
// accepted all the same, where copies drawing on its budget left none.
func TestCopiesDoNotSilenceTheStation(t *testing.T) {
	t.Parallel()
	g := testGate(t)
	seen := seal(t, key, 1, packet("S1", 1, epoch))
	if o := check(g, seen, true); o.Result != Accepted {
		t.Fatalf("the station's packet: %v", o.Result)
	}
	acked, limited := 0, 0
	for range 1000 {
		switch o := check(g, seen, true); o.Result {
		case Duplicate:
			if o.Ack == nil {
				t.Fatal("a copy within its budget was not acked")
			}
			acked++
		case RateLimited:
			limited++
		default:
			t.Fatalf("a copy: %v", o.Result)
		}
	}
	if limited == 0 || acked == 0 {
		t.Fatalf("1000 copies at one instant: %d acked, %d over the budget; want both", acked, limited)
	}
	if o := check(g, seal(t, key, 1, packet("S1", 2, epoch)), true); o.Result != Accepted {
		t.Fatalf("the station's next packet, after the copies: %v", o.Result)
	}
}

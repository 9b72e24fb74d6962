package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
	"shindo.dev/sdk/uplink"
	"shindo.dev/seismo/measure"
)

var testKey = bytes.Repeat([]byte{5}, 32)

type flat struct{ v float64 }

func (f flat) Fill(_ int64, ns, ew, ud []float64) {
	for i := range ns {
		ns[i], ew[i], ud[i] = f.v, -f.v, f.v/2
	}
}

func (flat) Skip(int) {}

// collector is a core that verifies and records every packet.
type collector struct {
	conn    *net.UDPConn
	mu      sync.Mutex
	packets []*stationv1.Packet
	bad     int
}

func newCollector(t *testing.T) *collector {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &collector{conn: conn}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			d, err := stationwire.Open(buf[:n])
			ok := err == nil && stationwire.Verify(testKey, d)
			var p *stationv1.Packet
			if ok {
				p, err = stationwire.Packet(d)
				ok = err == nil
			}
			c.mu.Lock()
			if ok {
				c.packets = append(c.packets, p)
			} else {
				c.bad++
			}
			c.mu.Unlock()
			if ok {
				ack, _ := stationwire.Seal(testKey, 1, &stationv1.Ack{StationId: p.GetStationId(), Seq: p.GetSeq()})
				conn.WriteToUDP(ack, from)
			}
		}
	}()
	return c
}

func (c *collector) snapshot() ([]*stationv1.Packet, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*stationv1.Packet(nil), c.packets...), c.bad
}

// runFleet runs a fleet of stations with the given workers against two
// collectors until each has at least n packets.
func runFleet(t *testing.T, stations []Station, workers, n int) (primary, backup *collector, ups []*uplink.Uplink) {
	t.Helper()
	primary, backup = newCollector(t), newCollector(t)
	for _, c := range []*collector{primary, backup} {
		u, err := uplink.Dial(uplink.Config{Name: "u", UDP: c.conn.LocalAddr().String(), AckTimeout: 100 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, u := range ups {
		go u.Run(ctx)
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Stations: stations, Uplinks: ups, Workers: workers,
			Ground: func(Station, time.Time) Ground { return flat{2} },
			Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	if !poll.Within(10*time.Second, func() bool {
		p, _ := primary.snapshot()
		b, _ := backup.snapshot()
		return len(p) >= n && len(b) >= n
	}) {
		p, _ := primary.snapshot()
		b, _ := backup.snapshot()
		t.Fatalf("primary got %d packets, backup %d", len(p), len(b))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return primary, backup, ups
}

func TestFleetSendsBothFramesOnEveryUplink(t *testing.T) {
	t.Parallel()
	// Three intervals: 2 stations × 2 packets × 3 on each uplink.
	stations := []Station{{ID: "A", Key: testKey, KeyID: 1}, {ID: "B", Key: testKey, KeyID: 1}}
	primary, backup, ups := runFleet(t, stations, 2, 12)
	p, bad := primary.snapshot()
	b, _ := backup.snapshot()
	if bad != 0 {
		t.Fatalf("%d packets failed verification", bad)
	}
	bySeq := map[uint64]*stationv1.Packet{}
	for _, pk := range b {
		bySeq[pk.GetSeq()<<8|uint64(pk.GetStationId()[0])] = pk
	}
	last := map[string]uint64{}
	for _, pk := range p {
		id := pk.GetStationId()
		if pk.GetSeq() <= last[id] {
			t.Fatalf("station %s seq %d after %d", id, pk.GetSeq(), last[id])
		}
		last[id] = pk.GetSeq()
		switch body := pk.GetBody().(type) {
		case *stationv1.Packet_Intensity:
			if body.Intensity.GetWindowEndMs()%500 != 0 || body.Intensity.GetPgaGal() < 2 {
				t.Fatalf("intensity frame %v", body.Intensity)
			}
		case *stationv1.Packet_Sensor:
			s := body.Sensor
			if len(s.GetNs()) != 25 || len(s.GetEw()) != 25 || len(s.GetUd()) != 25 || s.GetRateHz() != 50 || s.GetFirstSampleMs()%500 != 0 {
				t.Fatalf("sensor frame %v", s)
			}
			if got := float64(s.GetNs()[0]) * float64(s.GetScaleGal()); got < 1.99 || got > 2.01 {
				t.Fatalf("sample %v gal, want 2", got)
			}
		default:
			t.Fatalf("unexpected body %T", body)
		}
		if twin := bySeq[pk.GetSeq()<<8|uint64(id[0])]; twin != nil && twin.GetSentAtMs() != pk.GetSentAtMs() {
			t.Fatalf("seq %d differs between uplinks", pk.GetSeq())
		}
	}
	if s := ups[0].Stats(); s.Acked == 0 {
		t.Fatalf("primary never acked: %+v", s)
	}
}

// TestFleetSendsIntensityFirst: in each round a worker sends every
// station's intensity frame before any sensor frame — the cores' ticks wait
// for the intensity frames only.
func TestFleetSendsIntensityFirst(t *testing.T) {
	t.Parallel()
	stations := []Station{{ID: "A", Key: testKey, KeyID: 1}, {ID: "B", Key: testKey, KeyID: 1}, {ID: "C", Key: testKey, KeyID: 1}}
	primary, _, _ := runFleet(t, stations, 1, 18)
	p, _ := primary.snapshot()
	rounds := map[int64]string{}
	var order []int64
	for _, pk := range p {
		at := pk.GetSentAtMs()
		if _, ok := rounds[at]; !ok {
			order = append(order, at)
		}
		switch pk.GetBody().(type) {
		case *stationv1.Packet_Intensity:
			rounds[at] += "I"
		case *stationv1.Packet_Sensor:
			rounds[at] += "S"
		}
	}
	complete := 0
	for _, at := range order {
		if got := rounds[at]; len(got) == 6 {
			complete++
			if got != "IIISSS" {
				t.Errorf("round %d sent %s, want IIISSS", at, got)
			}
		}
	}
	if complete == 0 {
		t.Fatalf("no complete round in %v", rounds)
	}
}

// BenchmarkRound measures one 500 ms round of a simulated fleet — every
// station measures its interval and signs one copy of each packet per
// uplink, sends, and takes the acks — against a minimal core in the same
// process that acks everything (its signing is counted too, so the figure
// is pessimistic). A fleet keeps real time while a round takes under 500 ms
// per core it has.
//
//	cd cli && go test -run '^$' -bench Round -benchtime 20x ./internal/fleet/
func BenchmarkRound(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("stations=%d", n), func(b *testing.B) {
			sinkConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer sinkConn.Close()
			go ackAll(sinkConn)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var ups []*uplink.Uplink
			for _, name := range []string{"primary", "backup"} {
				u, err := uplink.Dial(uplink.Config{Name: name, UDP: sinkConn.LocalAddr().String()}, log)
				if err != nil {
					b.Fatal(err)
				}
				defer u.Close()
				go u.Run(context.Background())
				ups = append(ups, u)
			}
			opts := Options{Uplinks: ups, Log: log}
			var members []*member
			start := time.Now().UnixMilli() / 500 * 500
			for i := range n {
				st := Station{ID: fmt.Sprintf("S%05d", i), Key: testKey, KeyID: 1, Lat: 23.9, Lon: 121.6}
				p, _ := measure.New(measure.Config{StartMs: start})
				m := &member{st: st, ground: flat{0.01 * float64(i%7)}, pipe: p}
				for _, u := range ups {
					m.links = append(m.links, u.Link(st.ID, st.Key, st.KeyID, func() uint64 { return m.seq.Add(1) }))
				}
				members = append(members, m)
			}
			batches := map[*uplink.Uplink]*uplink.Batch{}
			for _, u := range ups {
				batches[u] = u.NewBatch()
			}
			var prepare, send time.Duration
			for b.Loop() {
				t0 := time.Now()
				for _, m := range members {
					m.prepare(opts)
				}
				t1 := time.Now()
				transmit(members, batches)
				prepare, send = prepare+t1.Sub(t0), send+time.Since(t1)
			}
			perStation := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*n) / 1000 }
			b.ReportMetric(perStation(prepare), "prepare-µs/station")
			b.ReportMetric(perStation(send), "send-µs/station")
			b.ReportMetric(500_000/(perStation(prepare)+perStation(send)), "stations/core")
		})
	}
}

// ackAll acks every datagram it receives, signed with testKey.
func ackAll(conn *net.UDPConn) {
	signer := stationwire.NewSigner(testKey)
	buf := make([]byte, 2048)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		d, err := stationwire.Open(buf[:n])
		if err != nil {
			continue
		}
		p, err := stationwire.Packet(d)
		if err != nil {
			continue
		}
		ack, _ := signer.Seal(1, &stationv1.Ack{StationId: p.GetStationId(), Seq: p.GetSeq()})
		conn.WriteToUDP(ack, from)
	}
}

// stalling is a ground whose third Fill takes 3 s, as a station's CPU
// starved for that long would; it records the samples it is told to skip.
type stalling struct {
	mu      sync.Mutex
	fills   int
	skipped int
}

func (g *stalling) Fill(_ int64, ns, ew, ud []float64) {
	g.mu.Lock()
	g.fills++
	stall := g.fills == 3
	g.mu.Unlock()
	if stall {
		// The stall under test: a ground-motion source that blocks.
		time.Sleep(3 * time.Second) //nolint:forbidigo // the fault itself, not a wait
	}
	for i := range ns {
		ns[i], ew[i], ud[i] = 2, -2, 1
	}
}

func (g *stalling) Skip(n int) {
	g.mu.Lock()
	g.skipped += n
	g.mu.Unlock()
}

// TestFleetSkipsWhenBehind: a fleet more than MaxBehind behind real time
// skips to the present — its ground passes over the lost samples and the
// frames after the gap are current — instead of sending the backlog late.
func TestFleetSkipsWhenBehind(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	u, err := uplink.Dial(uplink.Config{Name: "u", UDP: c.conn.LocalAddr().String(), AckTimeout: 100 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go u.Run(ctx)
	g := &stalling{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Stations: []Station{{ID: "A", Key: testKey, KeyID: 1}}, Uplinks: []*uplink.Uplink{u}, Workers: 1,
			Ground: func(Station, time.Time) Ground { return g }, MaxBehind: time.Second,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	// Until frames flow again after the stall, for a second.
	var ends []int64
	if !poll.Within(15*time.Second, func() bool {
		ps, _ := c.snapshot()
		ends = ends[:0]
		for _, p := range ps {
			if f := p.GetIntensity(); f != nil {
				ends = append(ends, f.GetWindowEndMs())
			}
		}
		n := len(ends)
		return n > 4 && ends[n-1]-ends[1] > 4500
	}) {
		t.Fatalf("frames %v", ends)
	}
	cancel()
	<-done
	slices.Sort(ends)
	ends = slices.Compact(ends)
	gap := int64(0)
	for i := 1; i < len(ends); i++ {
		gap = max(gap, ends[i]-ends[i-1])
	}
	g.mu.Lock()
	skipped := g.skipped
	g.mu.Unlock()
	if gap < 2000 || skipped == 0 || int64(skipped)*20 != gap-500 {
		// The gap is the samples skipped, and the interval measured
		// again from rest after them.
		t.Fatalf("largest gap between frames %d ms, %d samples skipped: %v", gap, skipped, ends)
	}
	if late := time.Now().UnixMilli() - ends[len(ends)-1]; late > 1500 {
		t.Fatalf("the newest frame ended %d ms ago: the fleet did not catch up", late)
	}
}

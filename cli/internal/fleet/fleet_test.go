package fleet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"shindo.dev/cli/internal/uplink"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

var testKey = bytes.Repeat([]byte{5}, 32)

type flat struct{ v float64 }

func (f flat) Fill(_ int64, ns, ew, ud []float64) {
	for i := range ns {
		ns[i], ew[i], ud[i] = f.v, -f.v, f.v/2
	}
}

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

func TestFleetSendsBothFramesOnEveryUplink(t *testing.T) {
	t.Parallel()
	primary, backup := newCollector(t), newCollector(t)
	var ups []*uplink.Uplink
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
	stations := []Station{{ID: "A", Key: testKey, KeyID: 1}, {ID: "B", Key: testKey, KeyID: 1}}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Stations: stations, Uplinks: ups, Workers: 2,
			Ground: func(Station, time.Time) Ground { return flat{2} },
			Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	// Three intervals: 2 stations × 2 packets × 3 on each uplink.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, _ := primary.snapshot()
		b, _ := backup.snapshot()
		if len(p) >= 12 && len(b) >= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary got %d packets, backup %d", len(p), len(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
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

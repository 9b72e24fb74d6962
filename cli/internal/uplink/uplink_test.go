package uplink

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

var stationKey = bytes.Repeat([]byte{3}, 32)

// core is a UDP server that acks packets by a policy: drop the first n
// transmissions of each seq, or sign acks with a wrong key.
type core struct {
	conn      *net.UDPConn
	dropFirst int
	forge     bool
	mu        sync.Mutex
	seen      map[uint64]int
}

func newCore(t *testing.T, dropFirst int, forge bool) *core {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c := &core{conn: conn, seen: map[uint64]int{}, dropFirst: dropFirst, forge: forge}
	t.Cleanup(func() { conn.Close() })
	go c.serve()
	return c
}

func (c *core) serve() {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.conn.ReadFromUDP(buf)
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
		c.mu.Lock()
		c.seen[p.GetSeq()]++
		count := c.seen[p.GetSeq()]
		drop, forge := count <= c.dropFirst, c.forge
		c.mu.Unlock()
		if drop {
			continue
		}
		k := stationKey
		if forge {
			k = bytes.Repeat([]byte{9}, 32)
		}
		ack, _ := stationwire.Seal(k, 1, &stationv1.Ack{StationId: p.GetStationId(), Seq: p.GetSeq(), Site: "TNN-1"})
		c.conn.WriteToUDP(ack, from)
	}
}

func (c *core) transmissions(seq uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[seq]
}

func datagram(t *testing.T, seq uint64) []byte {
	b, err := stationwire.Seal(stationKey, 1, &stationv1.Packet{StationId: "S1", Seq: seq, Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, c *core) *Uplink {
	t.Helper()
	u, err := Dial("primary", c.conn.LocalAddr().String(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	u.Register("S1", stationKey)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go u.Run(ctx)
	return u
}

func waitStats(t *testing.T, u *Uplink, ok func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := u.Stats()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never settled: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAcked(t *testing.T) {
	t.Parallel()
	c := newCore(t, 0, false)
	u := run(t, c)
	acked := make(chan uint64, 10)
	u.OnAck(func(_ string, seq uint64, _ time.Duration) { acked <- seq })
	for seq := uint64(1); seq <= 5; seq++ {
		u.Send("S1", seq, datagram(t, seq))
	}
	s := waitStats(t, u, func(s Stats) bool { return s.Acked == 5 })
	if s.Sent != 5 || s.Retransmitted != 0 || s.Lost != 0 || s.SRTTMillis <= 0 {
		t.Fatalf("stats %+v", s)
	}
	if len(acked) != 5 {
		t.Fatalf("%d ack callbacks", len(acked))
	}
}

func TestRetransmitsOnce(t *testing.T) {
	t.Parallel()
	c := newCore(t, 1, false) // the first transmission is lost, the retransmission acked
	u := run(t, c)
	u.Send("S1", 1, datagram(t, 1))
	s := waitStats(t, u, func(s Stats) bool { return s.Acked == 1 })
	if s.Retransmitted != 1 || c.transmissions(1) != 2 {
		t.Fatalf("stats %+v, core saw %d transmissions", s, c.transmissions(1))
	}

	c.mu.Lock()
	c.dropFirst = 5 // nothing gets through
	c.mu.Unlock()
	u.Send("S1", 2, datagram(t, 2))
	s = waitStats(t, u, func(s Stats) bool { return s.Lost == 1 })
	if s.Retransmitted != 2 || c.transmissions(2) != 2 {
		t.Fatalf("more than one retransmission: %+v, core saw %d", s, c.transmissions(2))
	}
}

func TestForgedAckIgnored(t *testing.T) {
	t.Parallel()
	c := newCore(t, 0, true)
	u := run(t, c)
	u.Send("S1", 1, datagram(t, 1))
	s := waitStats(t, u, func(s Stats) bool { return s.Lost == 1 })
	if s.Acked != 0 || s.BadAcks != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func FuzzHandleAck(f *testing.F) {
	good, _ := stationwire.Seal(stationKey, 1, &stationv1.Ack{StationId: "S1", Seq: 1})
	other, _ := proto.Marshal(&stationv1.Datagram{Packet: []byte{1}, Mac: make([]byte, 32)})
	f.Add(good)
	f.Add(other)
	f.Add([]byte{})
	u := &Uplink{keys: map[string][]byte{"S1": stationKey}, pending: map[key]*pending{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		u.handleAck(b)
	})
}

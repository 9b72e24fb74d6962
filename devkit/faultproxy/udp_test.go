package faultproxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

func TestUDPPassThroughManyClients(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, true)
	p := startUDP(t, target, Options{Seed: 1})

	const clients, each = 16, 20
	cs := make([]*udpEnd, clients)
	for i := range cs {
		cs[i] = dialUDPClient(t, p.Addr())
	}
	for k := range each {
		for i, c := range cs {
			c.send(t, fmt.Appendf(nil, "c%02d-%03d", i, k))
		}
	}
	for i, c := range cs {
		poll.Until(t, 5*time.Second, fmt.Sprintf("client %d's replies", i), func() bool { return c.count() == each })
	}
	for i, c := range cs {
		var got []string
		for _, d := range c.received() {
			got = append(got, string(d.data))
		}
		var want []string
		for k := range each {
			want = append(want, fmt.Sprintf("c%02d-%03d", i, k))
		}
		if !slices.Equal(got, want) {
			t.Errorf("client %d got %q, want its own datagrams in order %q", i, got, want)
		}
	}
	sources := map[netip.AddrPort]bool{}
	for _, d := range target.received() {
		sources[d.from] = true
	}
	if len(sources) != clients {
		t.Errorf("target saw %d source addresses, want one per client (%d)", len(sources), clients)
	}
	// A datagram can arrive before the proxy has counted sending it.
	poll.Until(t, 5*time.Second, "the counters", func() bool {
		s := p.Stats()
		return s.Upstream.Forwarded == clients*each && s.Downstream.Forwarded == clients*each
	})
	s := p.Stats()
	if s.Flows != clients {
		t.Errorf("flows %d, want %d", s.Flows, clients)
	}
	for _, c := range []Counters{s.Upstream, s.Downstream} {
		if c.Received != clients*each || c.Forwarded != clients*each || c.Dropped() != 0 {
			t.Errorf("counters %+v, want %d received and forwarded, none dropped", c, clients*each)
		}
	}
}

func TestUDPDropRate(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, false)
	p := startUDP(t, target, Options{Seed: 42})
	p.Set(Upstream, Impairment{Drop: 0.1})
	c := dialUDPClient(t, p.Addr())

	const n = 10000
	sendPaced(t, c, p, n)
	s := settle(t, p)
	// Binomial(10000, 0.1) has a standard deviation of 30; ±150 is five.
	if s.DroppedRandom < 850 || s.DroppedRandom > 1150 {
		t.Errorf("dropped %d of %d at 10%%, want 850..1150", s.DroppedRandom, n)
	}
	if s.Received != n || s.Forwarded+s.DroppedRandom != n {
		t.Errorf("counters %+v do not add up to %d", s, n)
	}
	poll.Until(t, 5*time.Second, "target to get every forwarded datagram", func() bool { return uint64(target.count()) == s.Forwarded })
}

func TestUDPDeterministicWithSeed(t *testing.T) {
	t.Parallel()
	// delivered returns the numbers the target got, sorted, from a run
	// under seed with loss and duplication.
	delivered := func(t *testing.T, seed uint64) []int {
		target := startUDPTarget(t, false)
		p := startUDP(t, target, Options{Seed: seed})
		p.Set(Upstream, Impairment{Drop: 0.3, Duplicate: 0.2})
		c := dialUDPClient(t, p.Addr())
		sendPaced(t, c, p, 500)
		want := int(settle(t, p).Forwarded)
		poll.Until(t, 5*time.Second, "target to get every forwarded datagram", func() bool { return target.count() == want })
		got := numbers(target.received())
		slices.Sort(got)
		return got
	}
	a, b, other := delivered(t, 7), delivered(t, 7), delivered(t, 8)
	if !slices.Equal(a, b) {
		t.Errorf("two runs with seed 7 delivered different datagrams:\n%v\n%v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 delivered the same datagrams")
	}
}

func TestUDPDelay(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	for _, dir := range []Direction{Upstream, Downstream} {
		t.Run(dir.String(), func(t *testing.T) {
			t.Parallel()
			target := startUDPTarget(t, true)
			p := startUDP(t, target, Options{Seed: 1})
			p.Set(dir, Impairment{Delay: delay})
			c := dialUDPClient(t, p.Addr())

			start := time.Now()
			c.send(t, []byte("ping"))
			poll.Until(t, 5*time.Second, "the echo", func() bool { return c.count() == 1 })
			if rtt := c.received()[0].at.Sub(start); rtt < delay {
				t.Errorf("round trip %v, want at least the %v delay", rtt, delay)
			}
			s := p.Stats()
			delayed := map[Direction]uint64{Upstream: s.Upstream.Delayed, Downstream: s.Downstream.Delayed}
			other := Downstream - dir
			if delayed[dir] != 1 || delayed[other] != 0 {
				t.Errorf("delayed %s %d, %s %d; want 1 and 0", dir, delayed[dir], other, delayed[other])
			}
		})
	}
}

// TestUDPDelayLowered: a datagram due at once does not overtake one still
// waiting for a delay that Set has since lowered when KeepOrder is set,
// and does without it, as the delay it was given says.
func TestUDPDelayLowered(t *testing.T) {
	t.Parallel()
	for _, keepOrder := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepOrder=%v", keepOrder), func(t *testing.T) {
			t.Parallel()
			target := startUDPTarget(t, false)
			p := startUDP(t, target, Options{Seed: 1, KeepOrder: keepOrder})
			c := dialUDPClient(t, p.Addr())
			p.Set(Upstream, Impairment{Delay: 100 * time.Millisecond})
			c.send(t, numbered(0))
			poll.Until(t, 5*time.Second, "the first to wait", func() bool { return p.Stats().Upstream.Delayed == 1 })
			p.Set(Upstream, Impairment{})
			c.send(t, numbered(1))
			poll.Until(t, 5*time.Second, "both", func() bool { return target.count() == 2 })
			var got []uint64
			for _, d := range target.received() {
				got = append(got, binary.BigEndian.Uint64(d.data))
			}
			want := []uint64{1, 0}
			if keepOrder {
				want = []uint64{0, 1}
			}
			if !slices.Equal(got, want) {
				t.Errorf("order %v, want %v", got, want)
			}
		})
	}
}

func TestUDPJitter(t *testing.T) {
	t.Parallel()
	const n, jitter = 100, 60 * time.Millisecond
	for _, tc := range []struct {
		name      string
		keepOrder bool
	}{
		{"may reorder", false},
		{"keep order", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := startUDPTarget(t, false)
			p := startUDP(t, target, Options{Seed: 3, KeepOrder: tc.keepOrder})
			p.Set(Upstream, Impairment{Jitter: jitter})
			c := dialUDPClient(t, p.Addr())

			sent := make([]time.Time, n)
			for i := range n {
				sent[i] = time.Now()
				c.send(t, numbered(i))
			}
			poll.Until(t, 5*time.Second, "every datagram", func() bool { return target.count() == n })
			got := target.received()
			var longest time.Duration
			for _, d := range got {
				longest = max(longest, d.at.Sub(sent[number(d)]))
			}
			// 100 uniform draws over 60 ms: the largest is all but surely
			// over 45 ms. Only lower bounds are asserted: a starved
			// scheduler can make datagrams late, never early, so the
			// smallest latency proves nothing.
			if longest < jitter*3/4 {
				t.Errorf("longest latency %v, want at least %v", longest, jitter*3/4)
			}
			// The spread shows as swaps: datagrams sent back to back and
			// delayed alike would keep their order.
			inv := inversions(numbers(got))
			if tc.keepOrder && inv != 0 {
				t.Errorf("%d inversions with KeepOrder", inv)
			}
			if !tc.keepOrder && inv == 0 {
				t.Errorf("no inversions: 60 ms of jitter over back-to-back datagrams should swap some")
			}
			if r := p.Stats().Upstream.Reordered; r != 0 {
				t.Errorf("reordered counter %d without Reorder", r)
			}
		})
	}
}

func TestUDPReorder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reorder float64
	}{
		{"asked", 0.2},
		{"not asked", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := startUDPTarget(t, false)
			p := startUDP(t, target, Options{Seed: 5, KeepOrder: true})
			p.Set(Upstream, Impairment{Reorder: tc.reorder, Jitter: 5 * time.Millisecond})
			c := dialUDPClient(t, p.Addr())

			const n = 500
			sendPaced(t, c, p, n)
			poll.Until(t, 5*time.Second, "every datagram", func() bool { return target.count() == n })
			inv := inversions(numbers(target.received()))
			r := p.Stats().Upstream.Reordered
			// Each held datagram goes out right behind the one after it:
			// exactly one adjacent swap each.
			if uint64(inv) != r {
				t.Errorf("%d inversions, but %d counted reordered", inv, r)
			}
			if tc.reorder > 0 && r == 0 {
				t.Errorf("nothing reordered at %v", tc.reorder)
			}
			if tc.reorder == 0 && r != 0 {
				t.Errorf("%d reordered without Reorder", r)
			}
		})
	}
}

func TestUDPReorderMaxHold(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, false)
	const hold = 30 * time.Millisecond
	p := startUDP(t, target, Options{Seed: 1, MaxHold: hold})
	p.Set(Upstream, Impairment{Reorder: 1})
	c := dialUDPClient(t, p.Addr())

	start := time.Now()
	c.send(t, []byte("alone"))
	poll.Until(t, 5*time.Second, "the held datagram", func() bool { return target.count() == 1 })
	if d := target.received()[0].at.Sub(start); d < hold {
		t.Errorf("a lone held datagram went out after %v, want at least MaxHold %v", d, hold)
	}
	if r := p.Stats().Upstream.Reordered; r != 0 {
		t.Errorf("reordered %d: nothing overtook the lone datagram", r)
	}
}

func TestUDPDuplicate(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, false)
	p := startUDP(t, target, Options{Seed: 9})
	p.Set(Upstream, Impairment{Duplicate: 0.25})
	c := dialUDPClient(t, p.Addr())

	const n = 2000
	sendPaced(t, c, p, n)
	s := settle(t, p)
	// Binomial(2000, 0.25) has a standard deviation of about 19.
	if s.Duplicated < 400 || s.Duplicated > 600 {
		t.Errorf("duplicated %d of %d at 25%%, want 400..600", s.Duplicated, n)
	}
	want := n + int(s.Duplicated)
	if s.Forwarded != uint64(want) {
		t.Errorf("forwarded %d, want %d", s.Forwarded, want)
	}
	poll.Until(t, 5*time.Second, "originals and duplicates", func() bool { return target.count() == want })
}

// TestUDPDirections impairs one direction at a time, as a test of the
// uplink rules would (lose only acks, or only packets), and checks the
// other direction is untouched and that clearing the impairment recovers.
func TestUDPDirections(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, tc := range []struct {
		name       string
		dir        Direction
		imp        Impairment
		targetGets int
		dropped    func(Counters) uint64
	}{
		{"drop acks", Downstream, Impairment{Drop: 1}, n, func(c Counters) uint64 { return c.DroppedRandom }},
		{"drop packets", Upstream, Impairment{Drop: 1}, 0, func(c Counters) uint64 { return c.DroppedRandom }},
		{"blackhole acks", Downstream, Impairment{Blackhole: true}, n, func(c Counters) uint64 { return c.DroppedBlackhole }},
		{"blackhole packets", Upstream, Impairment{Blackhole: true}, 0, func(c Counters) uint64 { return c.DroppedBlackhole }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := startUDPTarget(t, true)
			p := startUDP(t, target, Options{Seed: 1})
			p.Set(tc.dir, tc.imp)
			c := dialUDPClient(t, p.Addr())

			for i := range n {
				c.send(t, numbered(i))
			}
			lane := func(s UDPStats) Counters {
				if tc.dir == Upstream {
					return s.Upstream
				}
				return s.Downstream
			}
			// Drops are counted when decided, so once all n are counted
			// nothing more can arrive and the zero checks below are final.
			poll.Until(t, 5*time.Second, "every datagram dropped", func() bool { return tc.dropped(lane(p.Stats())) == n })
			if got := target.count(); got != tc.targetGets {
				t.Errorf("target got %d, want %d", got, tc.targetGets)
			}
			if got := c.count(); got != 0 {
				t.Errorf("client got %d replies, want none", got)
			}
			settle(t, p) // the target can echo before the proxy counts what it sent
			s := p.Stats()
			other := s.Downstream
			if tc.dir == Downstream {
				other = s.Upstream
			}
			if other.Dropped() != 0 || other.Forwarded != uint64(tc.targetGets) {
				t.Errorf("the other direction was touched: %+v", other)
			}

			p.Set(tc.dir, Impairment{})
			c.send(t, []byte("after"))
			poll.Until(t, 5*time.Second, "a reply once cleared", func() bool { return c.count() == 1 })
		})
	}
}

func TestUDPOverflow(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, false)
	const maxQueue = 8
	p := startUDP(t, target, Options{Seed: 1, MaxQueue: maxQueue})
	// Long enough that nothing leaves the queue during the test; Close
	// discards what waits.
	p.Set(Upstream, Impairment{Delay: time.Minute})
	c := dialUDPClient(t, p.Addr())

	const n = 30
	for i := range n {
		c.send(t, numbered(i))
	}
	poll.Until(t, 5*time.Second, "proxy to read them", func() bool { return p.Stats().Upstream.Received == n })
	s := p.Stats().Upstream
	if s.Delayed != maxQueue || s.DroppedOverflow != n-maxQueue {
		t.Errorf("delayed %d, overflowed %d; want %d and %d", s.Delayed, s.DroppedOverflow, maxQueue, n-maxQueue)
	}
}

func TestUDPMaxFlows(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, false)
	p := startUDP(t, target, Options{Seed: 1, MaxFlows: 2})
	for i := range 3 {
		c := dialUDPClient(t, p.Addr())
		c.send(t, []byte("hello"))
		poll.Until(t, 5*time.Second, "the proxy to read it", func() bool { return p.Stats().Upstream.Received == uint64(i+1) })
		settle(t, p)
	}
	s := p.Stats()
	if s.Flows != 2 || s.Upstream.DroppedOverflow != 1 {
		t.Errorf("flows %d, overflowed %d; want 2 and 1", s.Flows, s.Upstream.DroppedOverflow)
	}
}

func TestUDPRebind(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, true)
	p := startUDP(t, target, Options{Seed: 1})
	c := dialUDPClient(t, p.Addr())

	c.send(t, []byte("before"))
	poll.Until(t, 5*time.Second, "the first echo", func() bool { return c.count() == 1 })
	p.Rebind()
	c.send(t, []byte("after"))
	poll.Until(t, 5*time.Second, "the second echo", func() bool { return c.count() == 2 })
	got := target.received()
	if got[0].from == got[1].from {
		t.Errorf("target saw %v both times, want a new source after Rebind", got[0].from)
	}
}

// TestUDPTargetRestart checks a flow outlives its target going away, as
// when a test restarts svc-ingest: the ICMP errors the flow's socket gets
// meanwhile must not end it.
func TestUDPTargetRestart(t *testing.T) {
	t.Parallel()
	target := startUDPTarget(t, true)
	addr := target.conn.LocalAddr().(*net.UDPAddr)
	p := startUDP(t, target, Options{Seed: 1})
	c := dialUDPClient(t, p.Addr())
	c.send(t, []byte("one"))
	poll.Until(t, 5*time.Second, "the first echo", func() bool { return c.count() == 1 })

	_ = target.conn.Close()
	c.send(t, []byte("lost"))
	poll.Until(t, 5*time.Second, "the datagram to the dead target", func() bool {
		s := p.Stats().Upstream
		return s.Forwarded+s.WriteErrors == 2
	})
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		t.Skipf("the target's port was taken meanwhile: %v", err)
	}
	(&udpEnd{conn: conn}).start(t, true)
	// Retransmit like a station: the first send may still meet the ICMP
	// error left on the socket.
	deadline := time.Now().Add(5 * time.Second)
	for c.count() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no echo from the restarted target")
		}
		c.send(t, []byte("two"))
		poll.Within(50*time.Millisecond, func() bool { return c.count() >= 2 })
	}
	if f := p.Stats().Flows; f != 1 {
		t.Errorf("%d flows, want the first one kept", f)
	}
}

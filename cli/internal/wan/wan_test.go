package wan

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/devkit/poll"
)

// fakePort is a site's side of the router in memory: what the test sends
// is read by the router, what the router writes arrives with its time.
type fakePort struct {
	in   chan []byte
	out  chan arrival
	once sync.Once
	done chan struct{}
}

type arrival struct {
	pkt []byte
	at  time.Time
}

func newFakePort() *fakePort {
	return &fakePort{in: make(chan []byte, 1024), out: make(chan arrival, 1024), done: make(chan struct{})}
}

func (p *fakePort) Read(b []byte) (int, error) {
	select {
	case pkt := <-p.in:
		return copy(b, pkt), nil
	case <-p.done:
		return 0, io.EOF
	}
}

func (p *fakePort) Write(b []byte) (int, error) {
	p.out <- arrival{pkt: append([]byte(nil), b...), at: time.Now()}
	return len(b), nil
}

func (p *fakePort) Close() error { p.once.Do(func() { close(p.done) }); return nil }

// packet is an IPv4 header to dst carrying seq in its identification.
func packet(dst netip.Addr, seq uint16) []byte {
	b := make([]byte, 20)
	b[0] = 0x45
	b[4], b[5] = byte(seq>>8), byte(seq)
	d := dst.As4()
	copy(b[16:], d[:])
	return b
}

func seqOf(b []byte) uint16 { return uint16(b[4])<<8 | uint16(b[5]) }

var testPrefix = netip.MustParsePrefix("10.77.0.0/16")

func newTestRouter(t *testing.T, n int) (*Router, []*fakePort) {
	t.Helper()
	r := NewRouter(testPrefix)
	ports := make([]*fakePort, n)
	for i := range ports {
		ports[i] = newFakePort()
		r.Add(byte(i), ports[i])
	}
	r.Start()
	t.Cleanup(r.Close)
	return r, ports
}

func TestRouterDelaysEachDirectionByItsShape(t *testing.T) {
	t.Parallel()
	r, ports := newTestRouter(t, 3)
	if err := r.Set(1, 2, netprofile.Shape{Delay: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// 2 → 1 stays clear: shapes are per direction.
	sent := time.Now()
	ports[1].in <- packet(addrIn(testPrefix, 2), 1)
	ports[2].in <- packet(addrIn(testPrefix, 1), 2)
	back := <-ports[1].out
	fwd := <-ports[2].out
	// The clear direction is not held for the other's 40 ms (how much
	// less it takes depends on the machine: -race, a loaded CI).
	if d := back.at.Sub(sent); d >= 40*time.Millisecond || !back.at.Before(fwd.at) {
		t.Errorf("clear direction took %s, the 40 ms one %s", d, fwd.at.Sub(sent))
	}
	if d := fwd.at.Sub(sent); d < 40*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("40 ms direction took %s", d)
	}
	if seqOf(fwd.pkt) != 1 || seqOf(back.pkt) != 2 {
		t.Fatalf("packets swapped: %d, %d", seqOf(fwd.pkt), seqOf(back.pkt))
	}
	if s := r.Stats(1, 2); s.Packets != 1 || s.Bytes != 20 || s.Dropped != 0 {
		t.Fatalf("stats 1→2: %+v", s)
	}
}

func TestRouterJitterKeepsOrder(t *testing.T) {
	t.Parallel()
	r, ports := newTestRouter(t, 2)
	r.Set(0, 1, netprofile.Shape{Delay: 5 * time.Millisecond, Jitter: 20 * time.Millisecond})
	const n = 200
	for i := range n {
		ports[0].in <- packet(addrIn(testPrefix, 1), uint16(i))
	}
	for i := range n {
		a := <-ports[1].out
		if got := seqOf(a.pkt); got != uint16(i) {
			t.Fatalf("packet %d arrived in place %d", got, i)
		}
	}
}

func TestRouterLossAndBlackhole(t *testing.T) {
	t.Parallel()
	r, ports := newTestRouter(t, 2)
	r.Set(0, 1, netprofile.Shape{Loss: 0.5})
	const n = 400
	for i := range n {
		ports[0].in <- packet(addrIn(testPrefix, 1), uint16(i))
	}
	poll.Within(5*time.Second, func() bool { return r.Stats(0, 1).Packets >= n })
	s := r.Stats(0, 1)
	if s.Dropped < n/4 || s.Dropped > n*3/4 || s.Overflow != 0 {
		t.Fatalf("50 %% loss dropped %d of %d (%+v)", s.Dropped, n, s)
	}
	for range n - int(s.Dropped) {
		<-ports[1].out
	}

	r.Set(0, 1, netprofile.Shape{Blackhole: true})
	ports[0].in <- packet(addrIn(testPrefix, 1), 9999)
	poll.Within(5*time.Second, func() bool { return r.Stats(0, 1).Dropped != s.Dropped })
	r.Set(0, 1, netprofile.Shape{})
	ports[0].in <- packet(addrIn(testPrefix, 1), 10000)
	if a := <-ports[1].out; seqOf(a.pkt) != 10000 {
		t.Fatalf("a packet sent into a blackhole arrived: %d", seqOf(a.pkt))
	}
}

// TestRouterNoUDP: under a NoUDP shape datagrams are lost and a stream's
// segments (TCP, protocol 6) pass.
func TestRouterNoUDP(t *testing.T) {
	t.Parallel()
	r, ports := newTestRouter(t, 2)
	r.Set(0, 1, netprofile.Shape{NoUDP: true})
	udp, tcp := packet(addrIn(testPrefix, 1), 1), packet(addrIn(testPrefix, 1), 2)
	udp[9], tcp[9] = 17, 6
	ports[0].in <- udp
	ports[0].in <- tcp
	if a := <-ports[1].out; seqOf(a.pkt) != 2 {
		t.Fatalf("got packet %d, want the TCP one alone", seqOf(a.pkt))
	}
	if s := r.Stats(0, 1); s.Dropped != 1 {
		t.Fatalf("%+v: want the UDP datagram dropped", s)
	}
}

func TestRouterDropsWhatItDoesNotRoute(t *testing.T) {
	t.Parallel()
	r, ports := newTestRouter(t, 2)
	ipv6 := make([]byte, 40)
	ipv6[0] = 0x60
	ports[0].in <- ipv6
	ports[0].in <- packet(netip.MustParseAddr("192.0.2.1"), 1) // outside the prefix
	ports[0].in <- packet(addrIn(testPrefix, 7), 2)            // no such port
	ports[0].in <- []byte{0x45}                                // truncated
	ports[0].in <- packet(addrIn(testPrefix, 1), 3)            // routed
	if a := <-ports[1].out; seqOf(a.pkt) != 3 {
		t.Fatalf("got %d", seqOf(a.pkt))
	}
	if err := r.Set(0, 7, netprofile.Shape{}); err != ErrNoDirection {
		t.Fatalf("Set to a missing port: %v", err)
	}
}

func TestNamespaceName(t *testing.T) {
	t.Parallel()
	for site, want := range map[string]string{"TNN-1": "shindo42-tnn1", "stations": "shindo42-stations"} {
		got := NamespaceName(42, site)
		if got != want || !namespaceRE.MatchString(got) {
			t.Errorf("%s: %s, want %s", site, got, want)
		}
	}
}

// buildTwoSites builds sites A-1 and B-1 on this machine, or skips the
// test where it cannot.
func buildTwoSites(t *testing.T) *Net {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err)
	}
	n, err := Build(map[string]byte{"A-1": 1, "B-1": 2}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBuild builds a network of two sites on this machine, where it can:
// a connection between them takes the round trip of the shapes set, one
// from the root namespace none; Close leaves no namespace behind.
func TestBuild(t *testing.T) {
	n := buildTwoSites(t)
	closed := false
	t.Cleanup(func() {
		if !closed {
			n.Close()
		}
	})
	a, _ := n.Site("A-1")
	b, _ := n.Site("B-1")
	ln, err := n.Listen("B-1", "tcp", net.JoinHostPort(b.Addr.String(), "7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	n.Set("A-1", "B-1", netprofile.Shape{Delay: 30 * time.Millisecond})
	n.Set("B-1", "A-1", netprofile.Shape{Delay: 10 * time.Millisecond})
	connect := func() time.Duration {
		t.Helper()
		var took time.Duration
		err := inNetns(a.Netns, func() error {
			start := time.Now()
			c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
			took = time.Since(start)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return took
	}
	if rtt := connect(); rtt < 40*time.Millisecond || rtt > 300*time.Millisecond {
		t.Errorf("connect A-1 → B-1 took %s, want about 40 ms", rtt)
	}
	start := time.Now()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("from the root namespace: %v", err)
	}
	c.Close()
	if rtt := time.Since(start); rtt > 20*time.Millisecond {
		t.Errorf("connect from the root namespace took %s, want no delay", rtt)
	}
	if s := n.Stats("A-1", "B-1"); s.Packets == 0 {
		t.Errorf("no packets counted A-1 → B-1")
	}
	n.Set("A-1", "B-1", netprofile.Shape{Blackhole: true})
	err = inNetns(a.Netns, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 500*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Errorf("connected through a blackhole")
	}
	ln.Close()
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Site{a, b} {
		if _, err := os.Stat("/run/netns/" + s.Netns); err == nil {
			t.Errorf("namespace %s left behind", s.Netns)
		}
	}
	if _, err := net.InterfaceByName(n.Root); err == nil {
		t.Errorf("root interface %s left behind", n.Root)
	}
}

// TestBuildHoldsABurst sends from one site, as fast as a socket can, as
// many datagrams as a thousand stations send in one tick: the site's
// device must hold them for the router, dropping none (its TX dropped
// counter), as a clear link would.
func TestBuildHoldsABurst(t *testing.T) {
	n := buildTwoSites(t)
	defer n.Close()
	a, _ := n.Site("A-1")
	b, _ := n.Site("B-1")
	const burst = 4000
	err := inNetns(a.Netns, func() error {
		// Unconnected, so that B-1's port unreachable does not fail a write.
		c, err := net.ListenPacket("udp", net.JoinHostPort(a.Addr.String(), "0"))
		if err != nil {
			return err
		}
		defer c.Close()
		to := &net.UDPAddr{IP: b.Addr.AsSlice(), Port: 7001}
		payload := make([]byte, 120) // about a station frame's size
		for range burst {
			if _, err := c.WriteTo(payload, to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	type txStats struct {
		Packets uint64 `json:"packets"`
		Dropped uint64 `json:"dropped"`
	}
	read := func() txStats {
		t.Helper()
		out, err := exec.Command(n.ip, "-n", a.Netns, "-s", "-j", "link", "show", "dev", "wan0").Output()
		if err != nil {
			t.Fatal(err)
		}
		var links []struct {
			Stats struct {
				TX txStats `json:"tx"`
			} `json:"stats64"`
		}
		if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
			t.Fatalf("ip -j link show: %v: %s", err, out)
		}
		return links[0].Stats.TX
	}
	// The device counts a packet when the router has read it: the last
	// of the burst may still wait in it.
	var tx txStats
	poll.Until(t, 5*time.Second, "the whole burst through A-1's device", func() bool { tx = read(); return tx.Packets+tx.Dropped >= burst })
	if tx.Dropped > 0 {
		t.Errorf("A-1's device sent %d packets and dropped %d of a burst of %d, want none dropped", tx.Packets, tx.Dropped, burst)
	}
}

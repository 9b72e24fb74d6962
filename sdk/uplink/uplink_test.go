package uplink

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
	"shindo.dev/sdk/trust"
)

var stationKey = bytes.Repeat([]byte{3}, 32)

// core is a test peer speaking the core side of the protocol over UDP and
// WebSocket, with switches to lose traffic.
type core struct {
	udp       *net.UDPConn
	ws        *httptest.Server
	udpDown   atomic.Bool // drop every UDP datagram
	wsRefuse  atomic.Bool // answer WebSocket dials 503
	wsDials   atomic.Int32
	dropFirst atomic.Int32
	forge     atomic.Bool
	mu        sync.Mutex
	seen      map[uint64]int
	probes    int
	wsPackets int
	wsConns   []*websocket.Conn
}

// killWS drops every WebSocket connection from the core's side.
func (c *core) killWS() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.wsConns {
		conn.CloseNow()
	}
}

func newCore(t *testing.T) *core { return startCore(t, false) }

// startCore starts a core; with wss its WebSocket is served over TLS with
// httptest's certificate.
func startCore(t *testing.T, wss bool) *core {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c := &core{udp: conn, seen: map[uint64]int{}}
	t.Cleanup(func() { conn.Close() })
	go c.serveUDP()
	c.ws = httptest.NewUnstartedServer(http.HandlerFunc(c.serveWS))
	if wss {
		c.ws.StartTLS()
	} else {
		c.ws.Start()
	}
	t.Cleanup(func() { c.ws.CloseClientConnections(); c.ws.Close() })
	return c
}

func (c *core) wsURL() string { return "ws" + strings.TrimPrefix(c.ws.URL, "http") + "/v1/station/ws" }

// ack builds the reply to datagram b, or nil to stay silent.
func (c *core) ack(b []byte, viaWS bool) []byte {
	d, err := stationwire.Open(b)
	if err != nil || !stationwire.Verify(stationKey, d) {
		return nil
	}
	p, err := stationwire.Packet(d)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	c.seen[p.GetSeq()]++
	n := c.seen[p.GetSeq()]
	if p.GetProbe() != nil {
		c.probes++
	}
	if viaWS {
		c.wsPackets++
	}
	c.mu.Unlock()
	if !viaWS && int32(n) <= c.dropFirst.Load() {
		return nil
	}
	k := stationKey
	if c.forge.Load() {
		k = bytes.Repeat([]byte{9}, 32)
	}
	ack, _ := stationwire.Seal(k, 1, &stationv1.Ack{StationId: p.GetStationId(), Seq: p.GetSeq(), Site: "TNN-1"})
	return ack
}

func (c *core) serveUDP() {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.udp.ReadFromUDP(buf)
		if err != nil {
			return
		}
		// Counted, then lost: to the station a dead path in either
		// direction looks the same.
		if a := c.ack(buf[:n], false); a != nil && !c.udpDown.Load() {
			c.udp.WriteToUDP(a, from)
		}
	}
}

func (c *core) serveWS(w http.ResponseWriter, r *http.Request) {
	c.wsDials.Add(1)
	if c.wsRefuse.Load() {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	c.mu.Lock()
	c.wsConns = append(c.wsConns, conn)
	c.mu.Unlock()
	for {
		_, b, err := conn.Read(r.Context())
		if err != nil {
			return
		}
		if a := c.ack(b, true); a != nil {
			conn.Write(r.Context(), websocket.MessageBinary, a)
		}
	}
}

func (c *core) counts(seq uint64) (transmissions, probes, wsPackets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[seq], c.probes, c.wsPackets
}

// fast timers keep the tests short; the rules are the same.
func fastConfig(c *core, name string) Config {
	return Config{Name: name, UDP: c.udp.LocalAddr().String(), WS: c.wsURL(),
		AckTimeout: 40 * time.Millisecond, TimeoutsToWS: 4, ProbeInterval: 150 * time.Millisecond, ProbesToUDP: 3}
}

type station struct {
	link *Link
	seq  atomic.Uint64
}

func start(t *testing.T, cfg Config) (*Uplink, *station) {
	t.Helper()
	u, err := Dial(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go u.Run(ctx)
	st := &station{}
	st.link = u.Link("S1", stationKey, 1, func() uint64 { return st.seq.Add(1) })
	return u, st
}

// send transmits one intensity packet and returns its seq.
func (s *station) send(t *testing.T) uint64 {
	t.Helper()
	seq := s.seq.Add(1)
	d, err := s.link.Seal(&stationv1.Packet{StationId: "S1", Seq: seq, SentAtMs: time.Now().UnixMilli(),
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{}}})
	if err != nil {
		t.Fatal(err)
	}
	s.link.Transmit(seq, d)
	return seq
}

func TestAckedAndRTT(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	_, st := start(t, fastConfig(c, "primary"))
	for range 5 {
		st.send(t)
	}
	poll.Until(t, 10*time.Second, "5 acks", func() bool { return st.link.Stats().Acked == 5 })
	s := st.link.Stats()
	if s.Sent != 5 || s.Retransmitted != 0 || s.Lost != 0 || s.SRTT <= 0 || s.ConsecutiveTimeouts != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The next packet carries the measured RTT.
	d, _ := st.link.Seal(&stationv1.Packet{StationId: "S1", Seq: 99})
	env, _ := stationwire.Open(d)
	var p stationv1.Packet
	proto.Unmarshal(env.GetPacket(), &p)
	if p.GetRttUs() == 0 {
		t.Fatal("packet does not carry the uplink's RTT")
	}
}

func TestRetransmitsAtMostOnce(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	c.dropFirst.Store(1) // the first transmission is lost, the retransmission acked
	_, st := start(t, fastConfig(c, "primary"))
	seq := st.send(t)
	poll.Until(t, 10*time.Second, "ack of the retransmission", func() bool { return st.link.Stats().Acked == 1 })
	if s := st.link.Stats(); s.Retransmitted != 1 || s.ConsecutiveTimeouts != 0 {
		t.Fatalf("stats %+v", s)
	}
	if n, _, _ := c.counts(seq); n != 2 {
		t.Fatalf("core saw %d transmissions", n)
	}
	c.dropFirst.Store(5) // nothing gets through now
	seq = st.send(t)
	poll.Until(t, 10*time.Second, "the packet given up", func() bool { return st.link.Stats().Lost == 1 })
	if n, _, _ := c.counts(seq); n != 2 {
		t.Fatalf("core saw %d transmissions of one packet, want 2", n)
	}
}

func TestForgedAckIgnored(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	c.forge.Store(true)
	u, st := start(t, fastConfig(c, "primary"))
	st.send(t)
	poll.Until(t, 10*time.Second, "the packet given up", func() bool { return st.link.Stats().Lost == 1 })
	if s := u.Stats(); s.Acked != 0 || s.BadAcks != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestStateMachine walks one uplink through every transition and checks
// each happens exactly at its rule, while a second uplink to another core
// is untouched.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	tnn, tyo := newCore(t), newCore(t)
	_, primary := start(t, fastConfig(tnn, "primary"))
	_, backup := start(t, fastConfig(tyo, "backup"))
	tnn.udpDown.Store(true)

	// Packet 1: timeout, retransmission, timeout — 2 timeouts.
	primary.send(t)
	poll.Until(t, 10*time.Second, "packet 1 lost", func() bool { return primary.link.Stats().Lost == 1 })
	if s := primary.link.Stats(); s.ConsecutiveTimeouts != 2 || primary.link.Transport() != UDP {
		t.Fatalf("after 2 timeouts: %+v", s)
	}
	// Packet 2: the 3rd timeout keeps UDP, the 4th switches.
	primary.send(t)
	poll.Until(t, 10*time.Second, "3 timeouts", func() bool { return primary.link.Stats().Retransmitted == 2 })
	if tr := primary.link.Transport(); tr != UDP {
		t.Fatalf("on %v after 3 timeouts", tr)
	}
	poll.Until(t, 10*time.Second, "switch to WebSocket", func() bool { return primary.link.Transport() == WS })
	if s := primary.link.Stats(); s.ToWS != 1 || s.Lost != 2 {
		t.Fatalf("at the switch: %+v", s)
	}
	// On WebSocket, packets are acked over it.
	_, _, wsBefore := tnn.counts(0)
	primary.send(t)
	poll.Until(t, 10*time.Second, "ack over WebSocket", func() bool { return primary.link.Stats().Acked == 1 })
	if _, _, ws := tnn.counts(0); ws != wsBefore+1 {
		t.Fatalf("packet did not travel the WebSocket")
	}

	// Probes go out every ProbeInterval over UDP, which is still down:
	// they fail and the link stays on WebSocket.
	poll.Until(t, 10*time.Second, "two failed probes", func() bool { _, probes, _ := tnn.counts(0); return probes >= 2 })
	if s := primary.link.Stats(); primary.link.Transport() != WS || s.ProbesOK != 0 {
		t.Fatalf("failed probes moved the link: %+v", s)
	}
	// UDP heals: three acked probes in a row bring it back, not fewer.
	_, probesAtHeal, _ := tnn.counts(0)
	tnn.udpDown.Store(false)
	poll.Until(t, 10*time.Second, "two acked probes", func() bool { return primary.link.Stats().ProbesOK >= 2 })
	if primary.link.Transport() != WS {
		t.Fatal("back on UDP before the third acked probe")
	}
	poll.Until(t, 10*time.Second, "back on UDP", func() bool { return primary.link.Transport() == UDP })
	_, probes, _ := tnn.counts(0)
	if s := primary.link.Stats(); s.ToUDP != 1 || s.ProbesOK != 3 || probes-probesAtHeal < 3 {
		t.Fatalf("at the return: %+v, %d probes since healing", s, probes-probesAtHeal)
	}
	primary.send(t)
	poll.Until(t, 10*time.Second, "ack over UDP", func() bool { return primary.link.Stats().Acked == 2 })

	// The backup uplink never noticed.
	backup.send(t)
	poll.Until(t, 10*time.Second, "backup ack", func() bool { return backup.link.Stats().Acked == 1 })
	if s := backup.link.Stats(); s.ToWS != 0 || s.ConsecutiveTimeouts != 0 || s.Retransmitted != 0 || backup.link.Transport() != UDP {
		t.Fatalf("backup disturbed: %+v", s)
	}
}

func TestLostWebSocketFallsBackToUDP(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	_, st := start(t, fastConfig(c, "primary"))
	c.udpDown.Store(true)
	st.send(t)
	st.send(t)
	poll.Until(t, 10*time.Second, "switch to WebSocket", func() bool { return st.link.Transport() == WS })
	c.killWS()
	poll.Until(t, 10*time.Second, "back on UDP", func() bool { return st.link.Transport() == UDP })
	if s := st.link.Stats(); s.ToUDP != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestWebSocketOverTLS: the fallback runs over wss:// to a server whose
// key the station has pinned, and is refused by a station that pinned
// another key (it stays on UDP, as when the WebSocket is unreachable).
func TestWebSocketOverTLS(t *testing.T) {
	t.Parallel()
	c := startCore(t, true)
	c.udpDown.Store(true)
	right, err := trust.ClientConfig("", trust.Pin(c.ws.Certificate()))
	if err != nil {
		t.Fatal(err)
	}
	// httptest's servers share one certificate: another key is issued.
	ca, err := pki.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	another, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: "ingest"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := trust.ClientConfig("", trust.Pin(another.Cert))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(c, "primary")
	if !strings.HasPrefix(cfg.WS, "wss://") {
		t.Fatalf("WebSocket URL %s", cfg.WS)
	}
	cfg.TLS = wrong
	_, refused := start(t, cfg)
	cfg.TLS = right
	_, pinned := start(t, cfg)
	for range 2 {
		refused.send(t)
		pinned.send(t)
	}
	poll.Until(t, 10*time.Second, "the pinned station on WebSocket", func() bool { return pinned.link.Transport() == WS })
	pinned.send(t)
	poll.Until(t, 10*time.Second, "an ack over wss://", func() bool { return pinned.link.Stats().Acked == 1 })
	poll.Until(t, 10*time.Second, "the other station's 4 timeouts", func() bool { return refused.link.Stats().Lost == 2 })
	if s := refused.link.Stats(); s.ToWS != 0 || refused.link.Transport() != UDP {
		t.Errorf("a station that pinned another key got onto the WebSocket: %+v", s)
	}
}

func TestNoWebSocketConfigured(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	cfg := fastConfig(c, "primary")
	cfg.WS = ""
	_, st := start(t, cfg)
	c.udpDown.Store(true)
	for range 3 {
		st.send(t)
	}
	poll.Until(t, 10*time.Second, "3 lost", func() bool { return st.link.Stats().Lost == 3 })
	if st.link.Transport() != UDP || st.link.Stats().ConsecutiveTimeouts != 6 {
		t.Fatalf("stats %+v", st.link.Stats())
	}
}

func FuzzDispatch(f *testing.F) {
	good, _ := stationwire.Seal(stationKey, 1, &stationv1.Ack{StationId: "S1", Seq: 1})
	other, _ := proto.Marshal(&stationv1.Datagram{Packet: []byte{1}, Mac: make([]byte, 32)})
	f.Add(good)
	f.Add(other)
	f.Add([]byte{})
	u := &Uplink{links: map[string]*Link{}}
	u.links["S1"] = &Link{u: u, station: "S1", key: stationKey, signer: stationwire.NewSigner(stationKey), pending: map[uint64]*pending{}}
	verifier := stationwire.NewSigner(stationKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		before := u.badAcks.Load()
		u.dispatch(b)
		counted := u.badAcks.Load() - before
		// Taken only if it is an ack of the station, signed under its
		// key; anything else is counted as bad, once.
		signed := false
		if d, err := stationwire.Open(b); err == nil {
			var ack stationv1.Ack
			signed = proto.Unmarshal(d.GetPacket(), &ack) == nil && ack.GetStationId() == "S1" && verifier.Verify(d)
		}
		if signed && counted != 0 || !signed && counted != 1 {
			t.Fatalf("signed %v, counted bad %d times", signed, counted)
		}
	})
}

// TestWebSocketRetriesBackOff: while the core answers neither UDP nor
// WebSocket dials, a station tries the WebSocket again only after a
// doubling backoff, not after every run of timeouts; once the core
// accepts, it switches, and the next ack resets the backoff.
func TestWebSocketRetriesBackOff(t *testing.T) {
	t.Parallel()
	c := newCore(t)
	cfg := fastConfig(c, "primary")
	cfg.AckTimeout = 10 * time.Millisecond // a run of 4 timeouts every 40 ms
	cfg.DialBackoff, cfg.MaxDialBackoff = 100*time.Millisecond, 400*time.Millisecond
	_, st := start(t, cfg)
	c.udpDown.Store(true)
	c.wsRefuse.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				st.send(t)
			}
		}
	}()
	started := time.Now()
	poll.Until(t, 10*time.Second, "two seconds of refused dials", func() bool { return time.Since(started) > 2*time.Second })
	// Without the backoff: a dial per run of timeouts, some 50 in 2 s.
	// With it: after 0, ~0.1, ~0.3, ~0.7, ~1.1, ~1.5, ~1.9 s (±25 %).
	if n := c.wsDials.Load(); n < 3 || n > 10 {
		t.Fatalf("%d WebSocket dials in 2 s of refusals, want 3 to 10", n)
	}
	if s := st.link.Stats(); s.Dials != uint64(c.wsDials.Load()) && s.Dials != uint64(c.wsDials.Load())+1 {
		t.Errorf("link counted %d dials, the core saw %d", s.Dials, c.wsDials.Load())
	}
	c.wsRefuse.Store(false)
	poll.Until(t, 10*time.Second, "switch to WebSocket once the core accepts", func() bool { return st.link.Transport() == WS })
	poll.Until(t, 10*time.Second, "an ack over WebSocket", func() bool {
		st.link.mu.Lock()
		defer st.link.mu.Unlock()
		return st.link.backoff == 0
	})
}

// Package uplink is the station side of an uplink (SPEC §2–3): the path
// from a station to one core. Each uplink decides alone:
//
//   - it sends over UDP and waits AckTimeout (250 ms) for the core's signed
//     ack, retransmitting a packet at most once;
//   - every ack wait that expires is a timeout; after TimeoutsToWS (4)
//     consecutive timeouts, with no valid ack in between, it switches to
//     WebSocket;
//   - while on WebSocket it sends a UDP probe every ProbeInterval (5 s) and
//     returns to UDP after ProbesToUDP (3) consecutive acked probes;
//   - a WebSocket that cannot be dialled, or that stops delivering acks, is
//     not tried again before a backoff, doubled at each such failure from
//     DialBackoff (1 s) up to MaxDialBackoff (30 s) with ±25 % jitter, and
//     reset by an ack: when a core is down or overloaded, a thousand
//     stations dialling it twice a second each would keep it so;
//   - acks whose MAC does not verify are counted and ignored.
//
// Many stations may share one Uplink (the fleet simulator does): they share
// its UDP socket, and each station has its own Link with its own state
// machine and, when on WebSocket, its own connection.
package uplink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/ipv4"
	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

// Defaults of SPEC §3.
const (
	DefaultAckTimeout    = 250 * time.Millisecond
	DefaultTimeoutsToWS  = 4
	DefaultProbeInterval = 5 * time.Second
	DefaultProbesToUDP   = 3
	// Backoff of WebSocket attempts after a failed one (not in SPEC §3,
	// which fixes when to try, not how often to retry).
	DefaultDialBackoff    = time.Second
	DefaultMaxDialBackoff = 30 * time.Second
)

// Config describes one uplink.
type Config struct {
	Name string // "primary" or "backup"
	UDP  string // core ingest UDP host:port
	WS   string // core ingest WebSocket URL (ws:// or wss://); empty: no fallback
	// TLS is whom a wss:// URL's server must be (trust.ClientConfig: a CA,
	// a pin); nil: the system's CAs.
	TLS           *tls.Config
	AckTimeout    time.Duration // wait for an ack before a retransmission
	TimeoutsToWS  int           // consecutive timeouts before switching to WebSocket
	ProbeInterval time.Duration // UDP probe period while on WebSocket
	ProbesToUDP   int           // consecutive acked probes before returning to UDP
	// DialBackoff and MaxDialBackoff bound the wait before the WebSocket
	// is tried again after a failed dial or a WebSocket that stopped
	// delivering acks.
	DialBackoff, MaxDialBackoff time.Duration
	// OnAck, if set, is called once for every acked packet (not probes),
	// outside the link's lock.
	OnAck func(station string, seq uint64)
}

func (c *Config) defaults() {
	if c.AckTimeout <= 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.TimeoutsToWS <= 0 {
		c.TimeoutsToWS = DefaultTimeoutsToWS
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.ProbesToUDP <= 0 {
		c.ProbesToUDP = DefaultProbesToUDP
	}
	if c.DialBackoff <= 0 {
		c.DialBackoff = DefaultDialBackoff
	}
	if c.MaxDialBackoff < c.DialBackoff {
		c.MaxDialBackoff = max(DefaultMaxDialBackoff, c.DialBackoff)
	}
}

// Transport is how a link currently sends.
type Transport int

// Transports.
const (
	UDP Transport = iota
	WS
)

func (t Transport) String() string {
	if t == WS {
		return "ws"
	}
	return "udp"
}

// Uplink is the path to one core, shared by any number of stations.
type Uplink struct {
	cfg    Config
	conn   *net.UDPConn
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.RWMutex
	links map[string]*Link

	wsDial *websocket.DialOptions // shared by the links: one TLS session cache

	badAcks atomic.Uint64
}

// Dial opens an uplink; nothing is sent until a link transmits.
func Dial(cfg Config, log *slog.Logger) (*Uplink, error) {
	cfg.defaults()
	addr, err := net.ResolveUDPAddr("udp", cfg.UDP)
	if err != nil {
		return nil, fmt.Errorf("%s uplink %q: %w", cfg.Name, cfg.UDP, err)
	}
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return nil, fmt.Errorf("%s uplink %s: %w", cfg.Name, cfg.UDP, err)
	}
	_ = conn.SetReadBuffer(8 << 20)
	_ = conn.SetWriteBuffer(8 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	return &Uplink{
		cfg: cfg, conn: conn, log: log.With(slog.String("uplink", cfg.Name)),
		ctx: ctx, cancel: cancel, links: map[string]*Link{}, wsDial: wsDialOptions(cfg.TLS),
	}, nil
}

// wsDialOptions dial every link's WebSocket with tlsCfg, resuming TLS
// sessions: a thousand stations falling back at once cost the core one
// full handshake each only the first time.
func wsDialOptions(tlsCfg *tls.Config) *websocket.DialOptions {
	if tlsCfg == nil {
		return nil
	}
	tlsCfg = tlsCfg.Clone()
	if tlsCfg.ClientSessionCache == nil {
		tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(4096)
	}
	// HTTP/1.1 only (no ALPN h2): a WebSocket upgrades an HTTP/1.1 request.
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}}
}

// Name returns the uplink's name.
func (u *Uplink) Name() string { return u.cfg.Name }

// Link adds a station to the uplink. nextSeq hands out the station's
// sequence numbers (shared by its uplinks; probes take theirs from it too).
func (u *Uplink) Link(station string, key []byte, keyID uint32, nextSeq func() uint64) *Link {
	l := &Link{u: u, station: station, key: key, keyID: keyID, signer: stationwire.NewSigner(key), nextSeq: nextSeq, pending: map[uint64]*pending{}}
	u.mu.Lock()
	u.links[station] = l
	u.mu.Unlock()
	return l
}

// Run reads acks from the UDP socket until ctx ends, then closes every
// WebSocket.
func (u *Uplink) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, u.Close)
	defer stop()
	buf := make([]byte, 2048)
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			if ctx.Err() != nil || u.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// ICMP port unreachable while the core is down: the packets
			// time out and the state machine reacts; keep reading.
			var opErr *net.OpError
			if errors.As(err, &opErr) {
				continue
			}
			return fmt.Errorf("%s uplink read: %w", u.cfg.Name, err)
		}
		u.dispatch(buf[:n])
	}
}

// Close stops the uplink: the socket, every WebSocket, every probe.
func (u *Uplink) Close() {
	u.cancel()
	u.conn.Close()
}

// dispatch verifies an ack from the socket and hands it to its link.
func (u *Uplink) dispatch(b []byte) {
	d, err := stationwire.Open(b)
	if err != nil {
		u.badAcks.Add(1)
		return
	}
	var ack stationv1.Ack
	if err := proto.Unmarshal(d.GetPacket(), &ack); err != nil {
		u.badAcks.Add(1)
		return
	}
	u.mu.RLock()
	l := u.links[ack.GetStationId()]
	u.mu.RUnlock()
	if l == nil || !l.signer.Verify(d) {
		u.badAcks.Add(1)
		return
	}
	l.acked(ack.GetSeq())
}

// Stats sums the uplink's links.
func (u *Uplink) Stats() Stats {
	u.mu.RLock()
	links := make([]*Link, 0, len(u.links))
	for _, l := range u.links {
		links = append(links, l)
	}
	u.mu.RUnlock()
	var s Stats
	var srttSum time.Duration
	for _, l := range links {
		ls := l.Stats()
		s.add(ls)
		srttSum += ls.SRTT
	}
	s.Links = len(links)
	if len(links) > 0 {
		s.SRTT = srttSum / time.Duration(len(links))
	}
	s.BadAcks += u.badAcks.Load()
	return s
}

// Stats describe a link, or the sum of an uplink's links.
type Stats struct {
	Links               int           // stations on the uplink
	OnWS                int           // of them, on WebSocket now
	SRTT                time.Duration // smoothed RTT (RFC 6298); mean over links
	ConsecutiveTimeouts int           // current run of ack timeouts; the largest over links
	ProbesOK            int           // current run of acked probes; the largest over links
	Sent                uint64        // packets sent (first transmissions, probes excluded)
	Acked               uint64        // packets acked
	Retransmitted       uint64        // second transmissions
	Lost                uint64        // packets unacked after their retransmission
	Probes              uint64        // UDP probes sent
	Dials               uint64        // WebSocket dials attempted
	BadAcks             uint64        // acks dropped for a bad MAC or an unknown station
	ToWS, ToUDP         uint64        // transport switches
}

func (s *Stats) add(o Stats) {
	s.OnWS += o.OnWS
	s.ConsecutiveTimeouts = max(s.ConsecutiveTimeouts, o.ConsecutiveTimeouts)
	s.ProbesOK = max(s.ProbesOK, o.ProbesOK)
	s.Sent += o.Sent
	s.Acked += o.Acked
	s.Retransmitted += o.Retransmitted
	s.Lost += o.Lost
	s.Probes += o.Probes
	s.Dials += o.Dials
	s.BadAcks += o.BadAcks
	s.ToWS += o.ToWS
	s.ToUDP += o.ToUDP
}

// Transport summarises the links' transports: "udp", "ws" or "mixed".
func (s Stats) Transport() string {
	switch s.OnWS {
	case 0:
		return "udp"
	case s.Links:
		return "ws"
	default:
		return "mixed"
	}
}

type pending struct {
	datagram []byte
	sentAt   time.Time
	retried  bool
	probe    bool
	timer    *time.Timer
}

// Link is one station on one uplink, with its own state machine.
type Link struct {
	u       *Uplink
	station string
	key     []byte
	keyID   uint32
	signer  *stationwire.Signer
	nextSeq func() uint64

	mu          sync.Mutex
	transport   Transport
	ws          *websocket.Conn
	dialing     bool
	backoff     time.Duration // current wait after a failed WebSocket; 0 after an ack
	nextDial    time.Time     // no WebSocket attempt before
	probeCancel context.CancelFunc
	consecutive int
	probesOK    int
	pending     map[uint64]*pending
	srtt        time.Duration
	lastRTT     time.Duration
	stats       Stats
}

// Uplink returns the uplink the link belongs to.
func (l *Link) Uplink() *Uplink { return l.u }

// Seal stamps p with this link's last measured RTT, serializes and signs
// it. The caller has set the station, seq and send time.
func (l *Link) Seal(p *stationv1.Packet) ([]byte, error) {
	l.mu.Lock()
	p.RttUs = uint32(min(l.lastRTT.Microseconds(), 1<<32-1))
	l.mu.Unlock()
	return l.signer.Seal(l.keyID, p)
}

// Transmit sends a sealed packet and waits for its ack in the background.
func (l *Link) Transmit(seq uint64, datagram []byte) { l.TransmitVia(nil, seq, datagram) }

// TransmitVia is Transmit, except that a UDP datagram joins batch (sent at
// its Flush) instead of costing a system call of its own; nil batch sends
// at once.
func (l *Link) TransmitVia(batch *Batch, seq uint64, datagram []byte) {
	l.mu.Lock()
	p := &pending{datagram: datagram, sentAt: time.Now()}
	l.pending[seq] = p
	p.timer = time.AfterFunc(l.u.cfg.AckTimeout, func() { l.timeout(seq) })
	l.stats.Sent++
	onWS := l.ws != nil
	l.mu.Unlock()
	if batch != nil && !onWS {
		batch.add(datagram)
		return
	}
	l.write(datagram)
}

// Batch gathers UDP datagrams for one uplink so that a round of a fleet
// goes out in a few sendmmsg calls. It is not safe for concurrent use; each
// sender keeps its own.
type Batch struct {
	u    *Uplink
	pc   *ipv4.PacketConn
	msgs []ipv4.Message
}

// NewBatch returns an empty batch for u.
func (u *Uplink) NewBatch() *Batch { return &Batch{u: u, pc: ipv4.NewPacketConn(u.conn)} }

func (b *Batch) add(d []byte) {
	b.msgs = append(b.msgs, ipv4.Message{Buffers: [][]byte{d}})
	if len(b.msgs) == 256 {
		b.Flush()
	}
}

// Flush sends what the batch holds; datagrams that fail show up as ack
// timeouts like any loss.
func (b *Batch) Flush() {
	msgs := b.msgs
	for len(msgs) > 0 {
		n, err := b.pc.WriteBatch(msgs, 0)
		if err != nil {
			n = max(n, 1)
		}
		msgs = msgs[n:]
	}
	clear(b.msgs)
	b.msgs = b.msgs[:0]
}

// write sends over the current transport; a failed WebSocket write falls
// back to UDP for this datagram and ends the WebSocket.
func (l *Link) write(datagram []byte) {
	l.mu.Lock()
	ws := l.ws
	l.mu.Unlock()
	if ws != nil {
		ctx, cancel := context.WithTimeout(l.u.ctx, l.u.cfg.AckTimeout)
		err := ws.Write(ctx, websocket.MessageBinary, datagram)
		cancel()
		if err == nil {
			return
		}
		l.wsLost(ws, err)
	}
	_, _ = l.u.conn.Write(datagram) // a failed send shows as a timeout
}

func (l *Link) timeout(seq uint64) {
	l.mu.Lock()
	p, ok := l.pending[seq]
	if !ok {
		l.mu.Unlock()
		return
	}
	if p.probe {
		delete(l.pending, seq)
		l.probesOK = 0
		l.mu.Unlock()
		return
	}
	l.consecutive++
	resend := !p.retried
	if resend {
		p.retried, p.sentAt = true, time.Now()
		p.timer = time.AfterFunc(l.u.cfg.AckTimeout, func() { l.timeout(seq) })
		l.stats.Retransmitted++
	} else {
		delete(l.pending, seq)
		l.stats.Lost++
	}
	var toWS, reconnect bool
	if l.consecutive >= l.u.cfg.TimeoutsToWS && l.u.cfg.WS != "" && !l.dialing {
		reconnect = l.transport == WS // the WebSocket itself stopped delivering
		if reconnect {
			l.backOffLocked()
		}
		toWS = l.transport == UDP && !time.Now().Before(l.nextDial)
		if toWS {
			l.dialing = true
		}
	}
	oldWS := l.ws
	l.mu.Unlock()
	if reconnect {
		// Back on UDP; the next run of timeouts after the backoff tries the
		// WebSocket again.
		l.wsLost(oldWS, errors.New("acks stopped"))
	}
	if toWS {
		go l.toWS()
	}
	if resend {
		l.write(p.datagram)
	}
}

// acked settles seq.
func (l *Link) acked(seq uint64) {
	if l.settle(seq) && l.u.cfg.OnAck != nil {
		l.u.cfg.OnAck(l.station, seq)
	}
}

// settle records the ack of seq and reports whether it was the first ack
// of a packet (not a probe).
func (l *Link) settle(seq uint64) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.pending[seq]
	if !ok {
		return false // a second ack of a settled packet
	}
	delete(l.pending, seq)
	p.timer.Stop()
	rtt := now.Sub(p.sentAt)
	if p.probe {
		l.probesOK++
		if l.transport == WS && l.probesOK >= l.u.cfg.ProbesToUDP {
			l.toUDPLocked("probes succeeded")
		}
		return false
	}
	l.stats.Acked++
	l.consecutive = 0
	l.backoff, l.nextDial = 0, time.Time{}
	l.lastRTT = rtt
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 8 // RFC 6298, alpha = 1/8
	}
	return true
}

// backOffLocked doubles the wait before the next WebSocket attempt (from
// DialBackoff, up to MaxDialBackoff, ±25 %); l.mu is held.
func (l *Link) backOffLocked() {
	l.backoff = min(max(2*l.backoff, l.u.cfg.DialBackoff), l.u.cfg.MaxDialBackoff)
	jitter := time.Duration(rand.Int64N(int64(l.backoff)/2+1)) - l.backoff/4
	l.nextDial = time.Now().Add(l.backoff + jitter)
}

// toWS dials the WebSocket and, once connected, moves the link onto it.
func (l *Link) toWS() {
	l.mu.Lock()
	l.stats.Dials++
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.u.ctx, 3*time.Second)
	c, _, err := websocket.Dial(ctx, l.u.cfg.WS, l.u.wsDial)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dialing = false
	if err != nil {
		// Stay on UDP; a run of timeouts after the backoff tries again.
		l.consecutive = 0
		l.backOffLocked()
		if l.u.ctx.Err() == nil {
			l.u.log.WarnContext(ctx, "websocket dial failed, staying on UDP", slog.String("station", l.station), slog.Any("error", err))
		}
		return
	}
	c.SetReadLimit(4096)
	l.ws = c
	if l.transport != WS {
		l.stats.ToWS++
		l.u.log.InfoContext(ctx, "uplink switched to websocket", slog.String("station", l.station), slog.Int("timeouts", l.consecutive))
	}
	l.transport, l.consecutive, l.probesOK = WS, 0, 0
	probeCtx, probeCancel := context.WithCancel(l.u.ctx)
	if l.probeCancel != nil {
		l.probeCancel()
	}
	l.probeCancel = probeCancel
	go l.readWS(c)
	go l.probe(probeCtx)
}

// readWS takes acks from the WebSocket until it closes.
func (l *Link) readWS(c *websocket.Conn) {
	for {
		_, b, err := c.Read(l.u.ctx)
		if err != nil {
			l.wsLost(c, err)
			return
		}
		d, err := stationwire.Open(b)
		if err != nil || !l.signer.Verify(d) {
			l.u.badAcks.Add(1)
			continue
		}
		var ack stationv1.Ack
		if proto.Unmarshal(d.GetPacket(), &ack) != nil || ack.GetStationId() != l.station {
			l.u.badAcks.Add(1)
			continue
		}
		l.acked(ack.GetSeq())
	}
}

// wsLost returns the link to UDP if c is still its WebSocket.
func (l *Link) wsLost(c *websocket.Conn, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ws != c || c == nil {
		return
	}
	if l.u.ctx.Err() == nil {
		l.u.log.Warn("websocket lost, back to UDP", slog.String("station", l.station), slog.Any("error", cause))
	}
	l.toUDPLocked("websocket lost")
}

// toUDPLocked moves the link back to UDP; l.mu is held.
func (l *Link) toUDPLocked(why string) {
	if l.ws != nil {
		go l.ws.Close(websocket.StatusNormalClosure, why)
		l.ws = nil
	}
	if l.probeCancel != nil {
		l.probeCancel()
		l.probeCancel = nil
	}
	if l.transport == WS {
		l.stats.ToUDP++
		l.u.log.Info("uplink back on UDP", slog.String("station", l.station), slog.String("why", why))
	}
	l.transport, l.consecutive = UDP, 0
}

// probe sends a UDP probe every ProbeInterval while the link is on
// WebSocket.
func (l *Link) probe(ctx context.Context) {
	t := time.NewTicker(l.u.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seq := l.nextSeq()
		d, err := l.Seal(&stationv1.Packet{StationId: l.station, Seq: seq, SentAtMs: time.Now().UnixMilli(),
			Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}})
		if err != nil {
			continue
		}
		l.mu.Lock()
		p := &pending{datagram: d, sentAt: time.Now(), probe: true}
		l.pending[seq] = p
		p.timer = time.AfterFunc(l.u.cfg.AckTimeout, func() { l.timeout(seq) })
		l.stats.Probes++
		l.mu.Unlock()
		_, _ = l.u.conn.Write(d)
	}
}

// Stats returns the link's state and counters.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Links = 1
	if l.transport == WS {
		s.OnWS = 1
	}
	s.SRTT, s.ConsecutiveTimeouts, s.ProbesOK = l.srtt, l.consecutive, l.probesOK
	return s
}

// Transport returns the link's current transport.
func (l *Link) Transport() Transport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.transport
}

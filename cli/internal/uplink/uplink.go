// Package uplink is the station side of one uplink (station → one core)
// over UDP: it sends signed datagrams, matches the core's signed acks,
// retransmits a packet once when no ack came within the ack timeout, and
// keeps the counters the station reports. Many stations may share one
// uplink socket (the fleet simulator does), acks being told apart by
// station ID and seq.
package uplink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

// DefaultAckTimeout is how long a packet waits for its ack (SPEC §3).
const DefaultAckTimeout = 250 * time.Millisecond

// Stats are an uplink's counters.
type Stats struct {
	Sent          uint64  // first transmissions
	Acked         uint64  // packets acked (first ack per packet)
	Retransmitted uint64  // second transmissions
	Lost          uint64  // packets not acked after the retransmission
	BadAcks       uint64  // acks dropped for a bad MAC or unknown packet
	SRTTMillis    float64 // smoothed round-trip time (RFC 6298)
}

type key struct {
	station string
	seq     uint64
}

type pending struct {
	datagram []byte
	sentAt   time.Time
	retried  bool
	timer    *time.Timer
}

// Uplink is one UDP path to one core.
type Uplink struct {
	Name       string
	conn       *net.UDPConn
	ackTimeout time.Duration

	keysMu sync.RWMutex
	keys   map[string][]byte

	mu      sync.Mutex
	pending map[key]*pending
	srtt    time.Duration
	onAck   func(station string, seq uint64, rtt time.Duration)

	sent, acked, retransmitted, lost, badAcks atomic.Uint64
}

// Dial opens an uplink named name (e.g. "primary") to target host:port.
func Dial(name, target string, ackTimeout time.Duration) (*Uplink, error) {
	addr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, fmt.Errorf("%s uplink %q: %w", name, target, err)
	}
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return nil, fmt.Errorf("%s uplink %s: %w", name, target, err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	_ = conn.SetWriteBuffer(4 << 20)
	return &Uplink{Name: name, conn: conn, ackTimeout: ackTimeout, keys: map[string][]byte{}, pending: map[key]*pending{}}, nil
}

// Register makes station's acks verifiable on this uplink.
func (u *Uplink) Register(station string, k []byte) {
	u.keysMu.Lock()
	u.keys[station] = k
	u.keysMu.Unlock()
}

// OnAck sets a function called for every first ack, with its round-trip
// time measured from the last transmission.
func (u *Uplink) OnAck(fn func(station string, seq uint64, rtt time.Duration)) { u.onAck = fn }

// Send transmits a sealed datagram for (station, seq) and arms its ack
// timer.
func (u *Uplink) Send(station string, seq uint64, datagram []byte) error {
	p := &pending{datagram: datagram, sentAt: time.Now()}
	k := key{station, seq}
	u.mu.Lock()
	u.pending[k] = p
	p.timer = time.AfterFunc(u.ackTimeout, func() { u.timeout(k) })
	u.mu.Unlock()
	u.sent.Add(1)
	if _, err := u.conn.Write(datagram); err != nil {
		return fmt.Errorf("%s uplink send: %w", u.Name, err)
	}
	return nil
}

func (u *Uplink) timeout(k key) {
	u.mu.Lock()
	p, ok := u.pending[k]
	if !ok {
		u.mu.Unlock()
		return
	}
	if p.retried {
		delete(u.pending, k)
		u.mu.Unlock()
		u.lost.Add(1)
		return
	}
	p.retried = true
	p.sentAt = time.Now()
	p.timer = time.AfterFunc(u.ackTimeout, func() { u.timeout(k) })
	u.mu.Unlock()
	u.retransmitted.Add(1)
	_, _ = u.conn.Write(p.datagram) // a failed resend is a lost packet, counted at its timeout
}

// Run reads acks until ctx ends.
func (u *Uplink) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { u.conn.Close() })
	defer stop()
	buf := make([]byte, 2048)
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// ICMP port unreachable while the core is down: keep going,
			// the packets time out and count as lost.
			var opErr *net.OpError
			if errors.As(err, &opErr) {
				continue
			}
			return fmt.Errorf("%s uplink read: %w", u.Name, err)
		}
		u.handleAck(buf[:n])
	}
}

func (u *Uplink) handleAck(b []byte) {
	ack, ok := u.verifyAck(b)
	if !ok {
		u.badAcks.Add(1)
		return
	}
	k := key{ack.GetStationId(), ack.GetSeq()}
	u.mu.Lock()
	p, ok := u.pending[k]
	var rtt time.Duration
	if ok {
		delete(u.pending, k)
		p.timer.Stop()
		rtt = time.Since(p.sentAt)
		if u.srtt == 0 {
			u.srtt = rtt
		} else {
			u.srtt += (rtt - u.srtt) / 8 // RFC 6298, alpha = 1/8
		}
	}
	u.mu.Unlock()
	if !ok {
		return // a second ack of a packet already settled
	}
	u.acked.Add(1)
	if u.onAck != nil {
		u.onAck(k.station, k.seq, rtt)
	}
}

// verifyAck decodes an ack and checks its MAC with the key of the station
// it names; acks for stations not on this uplink, or forged, are refused.
func (u *Uplink) verifyAck(b []byte) (*stationv1.Ack, bool) {
	d, err := stationwire.Open(b)
	if err != nil {
		return nil, false
	}
	var ack stationv1.Ack
	if err := proto.Unmarshal(d.GetPacket(), &ack); err != nil {
		return nil, false
	}
	u.keysMu.RLock()
	k, ok := u.keys[ack.GetStationId()]
	u.keysMu.RUnlock()
	if !ok || !stationwire.Verify(k, d) {
		return nil, false
	}
	return &ack, true
}

// Stats returns the counters.
func (u *Uplink) Stats() Stats {
	u.mu.Lock()
	srtt := u.srtt
	u.mu.Unlock()
	return Stats{
		Sent: u.sent.Load(), Acked: u.acked.Load(), Retransmitted: u.retransmitted.Load(),
		Lost: u.lost.Load(), BadAcks: u.badAcks.Load(),
		SRTTMillis: float64(srtt.Microseconds()) / 1000,
	}
}

// Close closes the socket.
func (u *Uplink) Close() error { return u.conn.Close() }

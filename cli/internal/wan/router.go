package wan

import (
	"errors"
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"shindo.dev/cli/internal/netprofile"
)

// Port is one site's side of the router: each Read returns one IP packet
// the site sent, each Write hands one to the site's network stack. A TUN
// device is one.
type Port interface {
	io.ReadWriteCloser
}

// maxQueue is how many packets may wait per direction of a pair of sites,
// delayed or not yet written; more are dropped as overflow, as a router's
// full queue would. A thousand stations send about 8,000 packets a second
// on their two uplinks, so at 30 ms this holds a few seconds' worth.
const maxQueue = 1 << 16

// maxPacket is the largest packet a port reads: the TUN devices' MTU is
// 1500, but a port may hand over anything an IPv4 header can describe.
const maxPacket = 1 << 16

// Router forwards IPv4 packets between ports. A port is known by its index,
// the third octet of its site's addresses in the /16 the router serves
// (10.N.i.0/24 is port i). Every ordered pair of ports is a direction with
// its own netprofile.Shape: a packet from port a to port b waits the
// shape's delay plus a jitter drawn uniformly from [0, Jitter), never
// overtakes the packet before it (real paths rarely reorder), and is lost
// with the shape's probability, or always under a blackhole. A packet for
// an address no port serves, or not IPv4, is dropped.
type Router struct {
	prefix netip.Prefix

	mu    sync.Mutex
	ports map[byte]Port
	dirs  map[[2]byte]*direction

	wg     sync.WaitGroup
	closed atomic.Bool
}

// NewRouter returns a router for prefix, a /16; add ports before Start.
func NewRouter(prefix netip.Prefix) *Router {
	return &Router{prefix: prefix.Masked(), ports: map[byte]Port{}, dirs: map[[2]byte]*direction{}}
}

// Add makes p the port with index i.
func (r *Router) Add(i byte, p Port) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports[i] = p
}

// Start runs the router: a reader per port, a sender per direction.
func (r *Router) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a := range r.ports {
		for b, pb := range r.ports {
			if a == b {
				continue
			}
			d := &direction{to: pb, queue: make(chan queued, maxQueue), done: make(chan struct{}), rng: rand.New(rand.NewPCG(uint64(a)<<8|uint64(b), uint64(time.Now().UnixNano())))}
			r.dirs[[2]byte{a, b}] = d
			r.wg.Go(d.send)
		}
	}
	for i, p := range r.ports {
		r.wg.Go(func() { r.read(i, p) })
	}
}

// Close closes every port and waits for the router's goroutines; packets
// still queued are dropped.
func (r *Router) Close() {
	if !r.closed.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	for _, p := range r.ports {
		p.Close()
	}
	for _, d := range r.dirs {
		close(d.done)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// ErrNoDirection is returned for a pair of ports the router does not join.
var ErrNoDirection = errors.New("no such direction")

// Set gives the direction from port a to port b the shape s, from the next
// packet on; packets already queued keep the shape they were queued under.
func (r *Router) Set(a, b byte, s netprofile.Shape) error {
	d := r.direction(a, b)
	if d == nil {
		return ErrNoDirection
	}
	d.mu.Lock()
	d.shape = s
	d.mu.Unlock()
	return nil
}

// Stats returns the counters of the direction from port a to port b.
func (r *Router) Stats(a, b byte) DirStats {
	d := r.direction(a, b)
	if d == nil {
		return DirStats{}
	}
	return DirStats{Packets: d.packets.Load(), Bytes: d.bytes.Load(), Dropped: d.dropped.Load(), Overflow: d.overflow.Load()}
}

func (r *Router) direction(a, b byte) *direction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs[[2]byte{a, b}]
}

// DirStats count one direction of a pair of sites.
type DirStats struct {
	// Packets entered the direction; of them Dropped were lost (the
	// shape's loss, a blackhole, overflow) and Overflow found its queue
	// full.
	Packets, Bytes, Dropped, Overflow uint64
}

// read forwards what port i sends until it is closed. The source is the
// port, whatever the packet's source address says.
func (r *Router) read(i byte, p Port) {
	buf := make([]byte, maxPacket)
	for {
		n, err := p.Read(buf)
		if err != nil {
			if r.closed.Load() || errors.Is(err, io.EOF) {
				return
			}
			continue // a transient error of one read; the port is still there
		}
		dst, ok := r.destination(buf[:n])
		if !ok || dst == i {
			continue
		}
		d := r.direction(i, dst)
		if d == nil {
			continue
		}
		d.enqueue(append([]byte(nil), buf[:n]...))
	}
}

// destination is the port an IPv4 packet is for.
func (r *Router) destination(pkt []byte) (byte, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return 0, false
	}
	dst := netip.AddrFrom4([4]byte(pkt[16:20]))
	if !r.prefix.Contains(dst) {
		return 0, false
	}
	return dst.As4()[2], true
}

// protoUDP is UDP's number in the IPv4 header's protocol field (byte 9).
const protoUDP = 17

// direction is one way between two ports.
type direction struct {
	to    Port
	queue chan queued
	done  chan struct{} // closed when the router closes

	mu    sync.Mutex
	shape netprofile.Shape
	rng   *rand.Rand
	last  time.Time // when the packet before is due, so none overtakes it

	packets, bytes, dropped, overflow atomic.Uint64
}

type queued struct {
	pkt []byte
	due time.Time
}

// enqueue applies the shape to pkt: lost, or queued until it is due.
func (d *direction) enqueue(pkt []byte) {
	d.packets.Add(1)
	d.bytes.Add(uint64(len(pkt)))
	now := time.Now()
	d.mu.Lock()
	s := d.shape
	lost := s.Blackhole || (s.NoUDP && pkt[9] == protoUDP) || (s.Loss > 0 && d.rng.Float64() < s.Loss)
	due := now.Add(s.Delay)
	if s.Jitter > 0 {
		due = due.Add(time.Duration(d.rng.Int64N(int64(s.Jitter))))
	}
	if !lost {
		if due.Before(d.last) {
			due = d.last
		}
		d.last = due
	}
	d.mu.Unlock()
	if lost {
		d.dropped.Add(1)
		return
	}
	select {
	case d.queue <- queued{pkt: pkt, due: due}:
	default:
		d.dropped.Add(1)
		d.overflow.Add(1)
	}
}

// send writes each queued packet to the destination port when it is due.
func (d *direction) send() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var q queued
		select {
		case <-d.done:
			return
		case q = <-d.queue:
		}
		if wait := time.Until(q.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-d.done:
				return
			case <-timer.C:
			}
		}
		// A write error is a packet lost on the way in: the stack it was
		// for is going away, or its queue is full, as on a real link.
		if _, err := d.to.Write(q.pkt); err != nil {
			d.dropped.Add(1)
		}
	}
}

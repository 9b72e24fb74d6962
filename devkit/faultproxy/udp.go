package faultproxy

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// maxDatagram is the read buffer: the largest UDP payload, so nothing a
// client sends is truncated on the way (the server must see oversize
// datagrams to count them).
const maxDatagram = 65535

// socketBuffer is asked of the kernel for every socket so that bursts in
// tests are shaped by the proxy, not lost in a full socket buffer: a fleet
// of 1,000 stations sends 2,000 datagrams on an uplink at once, which
// overflow 1 MiB while the reader works through them. The kernel caps it
// at net.core.rmem_max and wmem_max.
const socketBuffer = 4 << 20

// UDP is a fault-injecting UDP proxy.
type UDP struct {
	opts   Options
	target *net.UDPAddr
	conn   *net.UDPConn // the socket clients send to
	lanes  [2]*lane
	done   chan struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	flows    map[netip.AddrPort]*flow
	nextFlow uint64 // numbers flows in order of appearance, for seeding
	closed   bool
}

// flow is one client's mapping: its address and its own socket to the
// target.
type flow struct {
	client netip.AddrPort
	up     *net.UDPConn
	dirs   [2]flowDir
}

// flowDir is a flow's state in one direction, guarded by that direction's
// lane.mu.
type flowDir struct {
	rng  *rand.Rand
	last time.Time // due time of the latest datagram, for KeepOrder
	held *item     // the datagram Reorder holds until the next one
}

// lane is one direction: its impairment, queue, scheduler and counters.
type lane struct {
	dir  Direction
	wake chan struct{} // nudges the scheduler when the queue changes
	n    counters

	mu  sync.Mutex
	imp Impairment
	q   queue
	seq uint64 // breaks ties in due time so equal times keep arrival order
	// sending counts datagrams the scheduler has taken from q and not yet
	// sent: while there are any, a datagram due at once must queue
	// behind them rather than overtake them.
	sending int
}

type counters struct {
	received, forwarded, writeErrors                 atomic.Uint64
	droppedRandom, droppedBlackhole, droppedOverflow atomic.Uint64
	duplicated, reordered, delayed                   atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Received:         c.received.Load(),
		Forwarded:        c.forwarded.Load(),
		DroppedRandom:    c.droppedRandom.Load(),
		DroppedBlackhole: c.droppedBlackhole.Load(),
		DroppedOverflow:  c.droppedOverflow.Load(),
		Duplicated:       c.duplicated.Load(),
		Reordered:        c.reordered.Load(),
		Delayed:          c.delayed.Load(),
		WriteErrors:      c.writeErrors.Load(),
	}
}

// Counters are one direction's datagram counts since the proxy started.
type Counters struct {
	// Received counts datagrams read from the sending side.
	Received uint64
	// Forwarded counts datagrams written to the receiving side,
	// duplicates included.
	Forwarded uint64
	// DroppedRandom, DroppedBlackhole and DroppedOverflow count datagrams
	// lost to Drop, to Blackhole, and to the MaxQueue or MaxFlows cap.
	DroppedRandom, DroppedBlackhole, DroppedOverflow uint64
	// Duplicated counts datagrams sent twice.
	Duplicated uint64
	// Reordered counts datagrams released after the one behind them.
	Reordered uint64
	// Delayed counts datagrams that waited for Delay or Jitter.
	Delayed uint64
	// WriteErrors counts datagrams the socket refused to send (for
	// example a target that is not listening, or a flow cut by Rebind).
	WriteErrors uint64
}

// Dropped is the sum of the drops of every cause.
func (c Counters) Dropped() uint64 {
	return c.DroppedRandom + c.DroppedBlackhole + c.DroppedOverflow
}

// UDPStats are a UDP proxy's counters.
type UDPStats struct {
	Upstream, Downstream Counters
	// Flows is the number of clients mapped now.
	Flows int
}

// ListenUDP starts a proxy listening on listen (such as "127.0.0.1:0")
// and forwarding to target. It passes traffic through untouched until Set
// is called.
func ListenUDP(listen, target string, opts Options) (*UDP, error) {
	opts = opts.withDefaults()
	laddr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return nil, fmt.Errorf("resolve listen address: %w", err)
	}
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, fmt.Errorf("resolve target address: %w", err)
	}
	conn, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	_ = conn.SetReadBuffer(socketBuffer) // best effort: the kernel may cap it
	_ = conn.SetWriteBuffer(socketBuffer)
	p := &UDP{
		opts:   opts,
		target: taddr,
		conn:   conn,
		done:   make(chan struct{}),
		flows:  map[netip.AddrPort]*flow{},
	}
	for d := range p.lanes {
		p.lanes[d] = &lane{dir: Direction(d), wake: make(chan struct{}, 1)}
	}
	p.wg.Add(3)
	go p.schedule(p.lanes[Upstream])
	go p.schedule(p.lanes[Downstream])
	go p.readClients()
	return p, nil
}

// Addr is the address clients send to.
func (p *UDP) Addr() net.Addr { return p.conn.LocalAddr() }

// Seed is the seed in use, the one given or the one picked at random.
func (p *UDP) Seed() uint64 { return p.opts.Seed }

// Set replaces the impairment of one direction. Datagrams already waiting
// keep the fate they were given on arrival.
func (p *UDP) Set(dir Direction, imp Impairment) {
	dir.check()
	l := p.lanes[dir]
	l.mu.Lock()
	l.imp = imp
	l.mu.Unlock()
}

// SetBoth gives both directions the same impairment.
func (p *UDP) SetBoth(imp Impairment) {
	p.Set(Upstream, imp)
	p.Set(Downstream, imp)
}

// Impairment returns the impairment of one direction.
func (p *UDP) Impairment(dir Direction) Impairment {
	dir.check()
	l := p.lanes[dir]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.imp
}

// Stats returns the counters so far.
func (p *UDP) Stats() UDPStats {
	p.mu.Lock()
	n := len(p.flows)
	p.mu.Unlock()
	return UDPStats{
		Upstream:   p.lanes[Upstream].n.snapshot(),
		Downstream: p.lanes[Downstream].n.snapshot(),
		Flows:      n,
	}
}

// Rebind forgets every client mapping, as a NAT that lost its state: each
// client's next datagram reaches the target from a new source port, and
// replies to the old port are lost. Datagrams already queued upstream for
// an old mapping count as write errors.
func (p *UDP) Rebind() {
	p.mu.Lock()
	old := p.flows
	p.flows = map[netip.AddrPort]*flow{}
	p.mu.Unlock()
	for _, f := range old {
		_ = f.up.Close() // its reader sees net.ErrClosed and exits
	}
}

// Close stops the proxy and returns once all its goroutines have exited.
// Datagrams still waiting are discarded. Later calls return the first
// call's result.
func (p *UDP) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		flows := p.flows
		p.flows = nil
		p.mu.Unlock()
		close(p.done)
		if err := p.conn.Close(); err != nil {
			p.closeErr = fmt.Errorf("close listener: %w", err)
		}
		for _, f := range flows {
			_ = f.up.Close()
		}
		p.wg.Wait()
	})
	return p.closeErr
}

// readClients reads what clients send and passes it upstream.
func (p *UDP) readClients() {
	defer p.wg.Done()
	buf := make([]byte, maxDatagram)
	up := p.lanes[Upstream]
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient error on one datagram must not stop the proxy
		}
		f, err := p.flowFor(from)
		if err != nil {
			up.n.received.Add(1)
			if errors.Is(err, errTooManyFlows) {
				up.n.droppedOverflow.Add(1)
			} else {
				up.n.writeErrors.Add(1)
			}
			continue
		}
		if f == nil {
			return // closed
		}
		p.handle(up, f, bytes.Clone(buf[:n]))
	}
}

var errTooManyFlows = errors.New("too many flows")

// flowFor returns the client's flow, creating it and its reader on first
// sight. It returns nil, nil once the proxy is closed.
func (p *UDP) flowFor(client netip.AddrPort) (*flow, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil
	}
	if f := p.flows[client]; f != nil {
		return f, nil
	}
	if len(p.flows) >= p.opts.MaxFlows {
		return nil, errTooManyFlows
	}
	up, err := net.DialUDP("udp", nil, p.target)
	if err != nil {
		return nil, fmt.Errorf("dial target: %w", err)
	}
	_ = up.SetReadBuffer(socketBuffer)
	_ = up.SetWriteBuffer(socketBuffer)
	f := &flow{client: client, up: up}
	for d := range f.dirs {
		f.dirs[d].rng = newRand(p.opts.Seed, p.nextFlow<<1|uint64(d))
	}
	p.nextFlow++
	p.flows[client] = f
	// Adding while readClients holds its own count is allowed even during
	// Close's Wait; closed was checked under mu, so Close will close up.
	p.wg.Add(1)
	go p.readTarget(f)
	return f, nil
}

// readTarget reads the target's replies to one client and passes them
// downstream.
func (p *UDP) readTarget(f *flow) {
	defer p.wg.Done()
	buf := make([]byte, maxDatagram)
	down := p.lanes[Downstream]
	for {
		n, err := f.up.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A connected UDP socket reports an ICMP port unreachable as
			// ECONNREFUSED on the next read; a target that is down for a
			// while (a test restarting svc-ingest) must not end the flow.
			continue
		}
		p.handle(down, f, bytes.Clone(buf[:n]))
	}
}

// handle decides a datagram's fate and queues it for the scheduler.
func (p *UDP) handle(l *lane, f *flow, data []byte) {
	l.n.received.Add(1)
	now := time.Now()
	l.mu.Lock()
	if direct := p.decide(l, f, data, now); direct != nil {
		// Due now with nothing ahead of it: sent by the reader itself,
		// sparing the scheduler's round trip. The reader of a flow and
		// direction is one goroutine, so nothing of its own overtakes it.
		l.mu.Unlock()
		p.send(l, direct)
		return
	}
	l.mu.Unlock()
}

// decide gives a datagram its fate under l.mu: dropped, queued for the
// scheduler, or, when it is due at once and nothing waits or is being
// sent in its direction, returned for the caller to send now.
func (p *UDP) decide(l *lane, f *flow, data []byte, now time.Time) *item {
	imp := l.imp
	if imp.Blackhole {
		l.n.droppedBlackhole.Add(1)
		return nil
	}
	st := &f.dirs[l.dir]
	// Always draw all four, so one impairment's setting does not shift
	// the sequence another one sees.
	rDrop, rDup, rReorder, rJitter := st.rng.Float64(), st.rng.Float64(), st.rng.Float64(), st.rng.Float64()
	if rDrop < imp.Drop {
		l.n.droppedRandom.Add(1)
		return nil
	}
	if len(l.q) >= p.opts.MaxQueue {
		l.n.droppedOverflow.Add(1)
		return nil
	}
	at := imp.due(now, rJitter)
	if p.opts.KeepOrder && at.Before(st.last) {
		at = st.last
	}
	st.last = at
	if at.After(now) {
		l.n.delayed.Add(1)
	}
	it := &item{flow: f, data: data, copies: 1, at: at, orig: at, seq: l.nextSeq()}
	if rDup < imp.Duplicate {
		it.copies = 2
		l.n.duplicated.Add(1)
	}
	if !at.After(now) && st.held == nil && rReorder >= imp.Reorder && len(l.q) == 0 && l.sending == 0 {
		return it
	}
	heap.Push(&l.q, it)
	switch {
	case st.held != nil:
		// This is the datagram the held one waits for: release the held
		// one right behind it, never before its own due time.
		prev := st.held
		st.held = nil
		prev.at = it.at
		if prev.orig.After(prev.at) {
			prev.at = prev.orig
		}
		prev.seq = l.nextSeq()
		heap.Fix(&l.q, prev.index)
		l.n.reordered.Add(1)
	case rReorder < imp.Reorder:
		it.at = it.at.Add(p.opts.MaxHold) // released then if no next one comes
		heap.Fix(&l.q, it.index)
		st.held = it
	}
	select {
	case l.wake <- struct{}{}:
	default: // a nudge is already pending
	}
	return nil
}

func (l *lane) nextSeq() uint64 {
	l.seq++
	return l.seq
}

// schedule is the one goroutine that sends a direction's datagrams when
// they are due, in (due time, arrival) order.
func (p *UDP) schedule(l *lane) {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var batch []*item
	for {
		l.mu.Lock()
		now := time.Now()
		batch = batch[:0]
		for len(l.q) > 0 && !l.q[0].at.After(now) {
			it := heap.Pop(&l.q).(*item)
			if st := &it.flow.dirs[l.dir]; st.held == it {
				st.held = nil // MaxHold ran out before a next datagram came
			}
			batch = append(batch, it)
		}
		l.sending = len(batch)
		wait := time.Duration(-1)
		if len(l.q) > 0 {
			wait = l.q[0].at.Sub(now)
		}
		l.mu.Unlock()

		for i, it := range batch {
			p.send(l, it)
			batch[i] = nil // let the datagram be collected
		}
		if len(batch) > 0 {
			l.mu.Lock()
			l.sending = 0
			l.mu.Unlock()
		}
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-l.wake:
		case <-p.done:
			return
		}
	}
}

func (p *UDP) send(l *lane, it *item) {
	for range it.copies {
		var err error
		if l.dir == Upstream {
			_, err = it.flow.up.Write(it.data)
		} else {
			_, err = p.conn.WriteToUDPAddrPort(it.data, it.flow.client)
		}
		if err != nil {
			l.n.writeErrors.Add(1)
			continue
		}
		l.n.forwarded.Add(1)
	}
}

// item is a datagram waiting to go out.
type item struct {
	flow   *flow
	data   []byte
	copies int
	at     time.Time // when it goes out
	orig   time.Time // when it would go out if not held for Reorder
	seq    uint64
	index  int // in the heap, for Fix
}

// queue is a min-heap of items by due time, then arrival.
type queue []*item

func (q queue) Len() int { return len(q) }

func (q queue) Less(i, j int) bool {
	if q[i].at.Equal(q[j].at) {
		return q[i].seq < q[j].seq
	}
	return q[i].at.Before(q[j].at)
}

func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *queue) Push(x any) {
	it := x.(*item)
	it.index = len(*q)
	*q = append(*q, it)
}

func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}

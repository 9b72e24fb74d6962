package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// chunkSize is the most one read takes from a stream.
	chunkSize = 32 << 10
	// chunkQueue is how many chunks wait per direction and connection;
	// with chunkSize it bounds the bytes held by delay or a blackhole to
	// 512 KiB, after which the proxy stops reading and the sender's own
	// TCP window fills, as it would on a slow or dead path.
	chunkQueue = 16
	// dialTimeout bounds the connection to the target; Close cuts it short.
	dialTimeout = 5 * time.Second
	// acceptBackoff paces retries after an accept error that is not the
	// listener closing (such as running out of file descriptors).
	acceptBackoff = 10 * time.Millisecond
)

// TCP is a fault-injecting TCP proxy.
type TCP struct {
	target string
	ln     *net.TCPListener
	ctx    context.Context // ends on Close, cutting dials short
	cancel context.CancelFunc
	wg     sync.WaitGroup
	refuse atomic.Bool

	closeOnce sync.Once
	closeErr  error

	accepted, refused, reset, dialErrors atomic.Uint64
	dirs                                 [2]streamCounters

	impMu   sync.Mutex
	imp     [2]Impairment
	rng     [2]*rand.Rand
	changed chan struct{} // closed and replaced by every Set

	mu     sync.Mutex
	conns  map[*tcpConn]struct{}
	closed bool
}

type streamCounters struct {
	bytes, chunks, delayed, held atomic.Uint64
}

func (c *streamCounters) snapshot() StreamCounters {
	return StreamCounters{
		Bytes:   c.bytes.Load(),
		Chunks:  c.chunks.Load(),
		Delayed: c.delayed.Load(),
		Held:    c.held.Load(),
	}
}

// StreamCounters are one direction's counts over all connections.
type StreamCounters struct {
	// Bytes and Chunks count what was forwarded.
	Bytes, Chunks uint64
	// Delayed counts chunks that waited for Delay or Jitter.
	Delayed uint64
	// Held counts chunks a blackhole has held (or holds now).
	Held uint64
}

// TCPStats are a TCP proxy's counters.
type TCPStats struct {
	// Accepted counts connections forwarded; Refused those closed at once
	// by SetRefuse; Reset those cut by Reset; DialErrors those closed
	// because the target could not be reached.
	Accepted, Refused, Reset, DialErrors uint64
	// Open is the number of connections open now.
	Open int
	// Upstream and Downstream count the bytes each way.
	Upstream, Downstream StreamCounters
}

// ListenTCP starts a proxy listening on listen (such as "127.0.0.1:0")
// and forwarding each connection to target. It passes traffic through
// untouched until Set is called. Of Options only Seed (for jitter) applies.
func ListenTCP(listen, target string, opts Options) (*TCP, error) {
	opts = opts.withDefaults()
	laddr, err := net.ResolveTCPAddr("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("resolve listen address: %w", err)
	}
	ln, err := net.ListenTCP("tcp", laddr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &TCP{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		changed: make(chan struct{}),
		conns:   map[*tcpConn]struct{}{},
	}
	for d := range p.rng {
		p.rng[d] = newRand(opts.Seed, uint64(d))
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *TCP) Addr() net.Addr { return p.ln.Addr() }

// Set replaces the impairment of one direction. Chunks already due keep
// their time; a cleared blackhole releases what it held at once.
func (p *TCP) Set(dir Direction, imp Impairment) {
	dir.check()
	p.impMu.Lock()
	p.imp[dir] = imp
	close(p.changed)
	p.changed = make(chan struct{})
	p.impMu.Unlock()
}

// SetBoth gives both directions the same impairment.
func (p *TCP) SetBoth(imp Impairment) {
	p.Set(Upstream, imp)
	p.Set(Downstream, imp)
}

// Impairment returns the impairment of one direction.
func (p *TCP) Impairment(dir Direction) Impairment {
	dir.check()
	p.impMu.Lock()
	defer p.impMu.Unlock()
	return p.imp[dir]
}

// SetRefuse makes new connections close as soon as they are accepted (with
// a reset), or, with false, be forwarded again. Open connections are not
// touched; Reset cuts them.
func (p *TCP) SetRefuse(refuse bool) { p.refuse.Store(refuse) }

// Reset cuts every open connection on both sides with a TCP reset, as a
// middlebox losing its state would. New connections are still accepted.
func (p *TCP) Reset() {
	p.mu.Lock()
	conns := make([]*tcpConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		if p.shut(c, true) {
			p.reset.Add(1)
		}
	}
}

// Stats returns the counters so far.
func (p *TCP) Stats() TCPStats {
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	return TCPStats{
		Accepted:   p.accepted.Load(),
		Refused:    p.refused.Load(),
		Reset:      p.reset.Load(),
		DialErrors: p.dialErrors.Load(),
		Open:       open,
		Upstream:   p.dirs[Upstream].snapshot(),
		Downstream: p.dirs[Downstream].snapshot(),
	}
}

// Close stops accepting, cuts every connection and returns once all the
// proxy's goroutines have exited. Later calls return the first call's
// result.
func (p *TCP) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		conns := p.conns
		p.conns = map[*tcpConn]struct{}{}
		p.mu.Unlock()
		p.cancel()
		if err := p.ln.Close(); err != nil {
			p.closeErr = fmt.Errorf("close listener: %w", err)
		}
		for c := range conns {
			p.shut(c, false)
		}
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *TCP) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-time.After(acceptBackoff):
				continue
			case <-p.ctx.Done():
				return
			}
		}
		if p.refuse.Load() {
			_ = c.SetLinger(0) // reset, not a polite FIN
			_ = c.Close()
			p.refused.Add(1)
			continue
		}
		p.wg.Add(1) // this goroutine holds a count, so Add is safe during Wait
		go p.connect(c)
	}
}

// tcpConn is one proxied connection.
type tcpConn struct {
	client, server *net.TCPConn
	done           chan struct{} // closed when the connection is shut
	once           sync.Once
	finished       atomic.Int32 // directions whose source ended cleanly
}

type chunk struct {
	b  []byte
	at time.Time // when it was read
}

// connect dials the target for one accepted client and starts the four
// goroutines of the connection: a reader and a writer per direction, so a
// chunk waiting for its delay never stops the next one being read.
func (p *TCP) connect(client *net.TCPConn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	sc, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		p.dialErrors.Add(1)
		_ = client.Close()
		return
	}
	c := &tcpConn{client: client, server: sc.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.client.Close()
		_ = c.server.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)

	up := make(chan chunk, chunkQueue)
	down := make(chan chunk, chunkQueue)
	p.wg.Add(4)
	go p.read(c, c.client, up)
	go p.write(c, Upstream, up, c.server)
	go p.read(c, c.server, down)
	go p.write(c, Downstream, down, c.client)
}

// shut closes both sides of c once; reset sends a TCP reset instead of a
// FIN. It reports whether this call did it.
func (p *TCP) shut(c *tcpConn, reset bool) bool {
	did := false
	c.once.Do(func() {
		did = true
		if reset {
			_ = c.client.SetLinger(0)
			_ = c.server.SetLinger(0)
		}
		_ = c.client.Close()
		_ = c.server.Close()
		close(c.done)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	})
	return did
}

// read moves chunks from src to q; it closes q when src ends cleanly, so
// the writer can pass the half-close on after the last chunk.
func (p *TCP) read(c *tcpConn, src *net.TCPConn, q chan<- chunk) {
	defer p.wg.Done()
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// A copy sized to what was read keeps held memory to the bytes
			// actually waiting, not chunkQueue full buffers.
			ch := chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
			select {
			case q <- ch:
			case <-c.done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				close(q)
			} else {
				p.shut(c, false)
			}
			return
		}
	}
}

// write sends chunks from q to dst when they are due: held while the
// direction is blackholed, then Delay plus jitter after they were read (or
// after the blackhole cleared), never before the chunk ahead.
func (p *TCP) write(c *tcpConn, dir Direction, q <-chan chunk, dst *net.TCPConn) {
	defer p.wg.Done()
	n := &p.dirs[dir]
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var last time.Time
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-q:
		case <-c.done:
			return
		}
		if !ok {
			// The source closed its side: pass the half-close on, and
			// close the connection once both sides have.
			_ = dst.CloseWrite()
			if c.finished.Add(1) == 2 {
				p.shut(c, false)
			}
			return
		}
		imp, r, held, alive := p.waitOpen(c, dir)
		if !alive {
			return
		}
		if held {
			ch.at = time.Now() // the path just came back: the delay starts now
		}
		at := imp.due(ch.at, r)
		if at.Before(last) {
			at = last
		}
		last = at
		if wait := time.Until(at); wait > 0 {
			n.delayed.Add(1)
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-c.done:
				return
			}
		}
		if _, err := dst.Write(ch.b); err != nil {
			p.shut(c, false)
			return
		}
		n.bytes.Add(uint64(len(ch.b)))
		n.chunks.Add(1)
	}
}

// waitOpen blocks while dir is blackholed and returns the impairment to
// apply, a jitter variate, whether it had to wait, and false if c was shut
// meanwhile. It counts a held chunk when the hold starts, so a test sees
// the stall while it lasts.
func (p *TCP) waitOpen(c *tcpConn, dir Direction) (imp Impairment, r float64, held, alive bool) {
	for {
		p.impMu.Lock()
		imp, changed := p.imp[dir], p.changed
		if !imp.Blackhole {
			r = p.rng[dir].Float64()
			p.impMu.Unlock()
			return imp, r, held, true
		}
		p.impMu.Unlock()
		if !held {
			held = true
			p.dirs[dir].held.Add(1)
		}
		select {
		case <-changed:
		case <-c.done:
			return imp, 0, held, false
		}
	}
}

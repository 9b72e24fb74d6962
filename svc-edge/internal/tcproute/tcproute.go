// Package tcproute carries an edge's long-lived TCP connections (SeedLink,
// and SeedLink over WebSocket on the same port) to a core: each connection
// goes to the first core, in the order the data API's balancer gives, that
// accepts it within DialTimeout, and is then copied both ways until either
// side ends. A connection whose core goes away ends with it; the client
// reconnects through the edge and lands at the other core, where SeedLink's
// sequence numbers (the same at both cores) let it resume.
package tcproute

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/peerwrite"
	"shindo.dev/lib/service"
)

// Options configure a Proxy.
type Options struct {
	// Targets are the cores' addresses (host:port), in the order of the
	// balancer's indexes.
	Targets []string
	// Order returns the indexes of Targets to try, best first.
	Order func() []int
	// DialTimeout bounds one attempt to reach a core, its TLS handshake
	// included.
	DialTimeout time.Duration
	// TLS, when set, is the client side of the mutual TLS the cores
	// require (the edge's internal certificate); nil: plain TCP.
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS client's handshake at the edge (a
	// tls.Listener's connections), before a core is dialed for it, so one
	// that stalls holds no core connection; 0: 10 s.
	HandshakeTimeout time.Duration
	// Acquire and Release count a client address's connections against
	// the edge's per-address budget; Acquire false turns it away.
	Acquire func(addr string) bool
	Release func(addr string)
	// MaxConns bounds the connections carried at once.
	MaxConns int
	// WriteTimeout bounds a write to a client: one that takes nothing of
	// what its core sends for that long is dropped (the write deadline is
	// renewed at half-time, so it is dropped after between half of it and
	// all of it); 0: 10 s, as a core's SeedLink server gives the edge.
	WriteTimeout time.Duration
	// Name labels the metrics (the protocol carried).
	Name string
}

// Proxy is a TCP proxy to the cores.
type Proxy struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	open       prometheus.Gauge
	turnedAway *prometheus.CounterVec
	routed     *prometheus.CounterVec
	redialed   prometheus.Counter
	stalled    prometheus.Counter
}

// New returns a proxy; Serve runs it.
func New(opts Options, log *slog.Logger) (*Proxy, error) {
	if len(opts.Targets) == 0 || opts.Order == nil || opts.DialTimeout <= 0 || opts.MaxConns < 1 {
		return nil, errors.New("tcproute: targets, order, a dial timeout and a connection limit are required")
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	labels := prometheus.Labels{"protocol": opts.Name}
	return &Proxy{opts: opts, log: log, conns: map[net.Conn]struct{}{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shindo_edge_tcp_connections", ConstLabels: labels,
			Help: "Connections the edge carries to a core."}),
		turnedAway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_edge_tcp_turned_away_total", ConstLabels: labels,
			Help: "Connections closed on accept, by reason (limit, address, handshake: a TLS client's failed, no_core: no core accepted it)."}, []string{"reason"}),
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_edge_tcp_routed_total", ConstLabels: labels,
			Help: "Connections carried, by core address."}, []string{"core"}),
		redialed: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_tcp_redialed_total", ConstLabels: labels,
			Help: "Connections carried to another core because theirs closed before its first byte."}),
		stalled: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_tcp_stalled_total", ConstLabels: labels,
			Help: "Connections dropped because the client took nothing of what its core sent within the write timeout."}),
	}, nil
}

// Collectors are the proxy's metrics.
func (p *Proxy) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.open, p.turnedAway, p.routed, p.redialed, p.stalled}
}

// Serve carries the connections ln accepts until ctx ends, then closes
// them all and waits for their copies.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
		// Closed outside the lock, which every connection's end takes, and
		// without waiting on clients that stopped reading (a TLS
		// connection's closing alert).
		p.mu.Lock()
		conns := make([]net.Conn, 0, len(p.conns))
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		for _, c := range conns {
			_ = peerwrite.Close(c)
		}
	}()
	for {
		c, err := service.Accept(ln)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		addr := service.AddrKey(service.RemoteHost(c.RemoteAddr()))
		if reason := p.admit(c, addr); reason != "" {
			p.turnedAway.WithLabelValues(reason).Inc()
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.drop(c, addr)
			p.carry(ctx, c)
		}()
	}
	p.wg.Wait()
	return nil
}

func (p *Proxy) admit(c net.Conn, addr string) string {
	p.mu.Lock()
	full := len(p.conns) >= p.opts.MaxConns
	p.mu.Unlock()
	if full {
		return "limit"
	}
	if p.opts.Acquire != nil && !p.opts.Acquire(addr) {
		return "address"
	}
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	p.open.Inc()
	return ""
}

func (p *Proxy) drop(c net.Conn, addr string) {
	_ = peerwrite.Close(c)
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.open.Dec()
	if p.opts.Release != nil {
		p.opts.Release(addr)
	}
}

// carry connects c to the first core that answers and copies both ways.
func (p *Proxy) carry(ctx context.Context, c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		timeout := p.opts.HandshakeTimeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		hctx, cancel := context.WithTimeout(ctx, timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			p.turnedAway.WithLabelValues("handshake").Inc()
			p.log.DebugContext(ctx, "TLS handshake failed", slog.String("protocol", p.opts.Name), slog.Any("error", err))
			return
		}
	}
	order := p.opts.Order()
	up, next := p.dial(ctx, order)
	if up == nil {
		p.turnedAway.WithLabelValues("no_core").Inc()
		return
	}
	s := &splice{client: &peerwrite.Writer{Conn: c, Deadline: peerwrite.Deadline{Timeout: p.opts.WriteTimeout}}, up: up}
	defer func() { s.closeUp() }()
	done := make(chan struct{}, 2)
	go func() {
		s.fromClient()
		done <- struct{}{}
	}()
	go func() {
		// A core that closes right after accepting, before its first
		// byte, may have been dying when it did (a killed process's
		// listening socket takes connections for a moment): nothing of it
		// reached the client, so the next core gets what the client sent
		// so far, as if it had been the first. A core that closes a
		// connection later without a word (a silent client's negotiation
		// timeout) is not replaced.
		for dialed := time.Now(); s.fromCore() && time.Since(dialed) < p.opts.DialTimeout; dialed = time.Now() {
			if up, next = p.dial(ctx, order[next:]); up == nil {
				break
			}
			p.redialed.Inc()
			if !s.replace(up) {
				break
			}
		}
		done <- struct{}{}
	}()
	<-done
	// Either side's end ends the connection: a core that went away must
	// not leave its client waiting on a half-open one.
	if s.stalledClient() {
		p.stalled.Inc()
		peerwrite.Drop(c)
	} else {
		_ = peerwrite.Close(c)
	}
	s.closeUp()
	<-done
}

// dial connects to the first of the cores at indexes that accepts and
// returns how many of them it used.
func (p *Proxy) dial(ctx context.Context, indexes []int) (net.Conn, int) {
	for n, i := range indexes {
		var d interface {
			DialContext(ctx context.Context, network, addr string) (net.Conn, error)
		} = &net.Dialer{Timeout: p.opts.DialTimeout}
		if p.opts.TLS != nil {
			d = &tls.Dialer{NetDialer: &net.Dialer{Timeout: p.opts.DialTimeout}, Config: p.opts.TLS}
		}
		up, err := d.DialContext(ctx, "tcp", p.opts.Targets[i])
		if err == nil {
			p.routed.WithLabelValues(p.opts.Targets[i]).Inc()
			return up, n + 1
		}
		p.log.WarnContext(ctx, "core refused a routed connection", slog.String("protocol", p.opts.Name),
			slog.String("core", p.opts.Targets[i]), slog.Any("error", err))
	}
	return nil, len(indexes)
}

// replayLimit bounds what a client may send before its core's first byte
// and still be carried to another core: SeedLink's commands and a
// WebSocket upgrade request are far smaller.
const replayLimit = 16 << 10

// splice copies between a client and its core. Until the core's first
// byte it keeps what the client sent, for another core should this one
// close without a word.
type splice struct {
	// client is written with a deadline: one that stops reading is
	// dropped, where a write without one would wait for as long as its
	// kernel keeps answering with a closed window.
	client *peerwrite.Writer

	mu       sync.Mutex
	up       net.Conn
	answered bool   // the core sent a byte: the connection is its for good
	sent     []byte // the client's bytes before that
	tooMuch  bool   // more than replayLimit of them: no replay
	ended    bool   // the client's side ended
	stalled  bool   // a write to the client timed out
}

// fromClient copies the client's bytes to the core until either ends.
// Until the core answers it reads through a small buffer of its own, to
// keep a copy; then it hands over to io.Copy, which moves TCP to TCP in
// the kernel and holds no buffer per connection.
func (s *splice) fromClient() {
	buf := make([]byte, 4<<10)
	for {
		s.mu.Lock()
		up, answered := s.up, s.answered
		s.mu.Unlock()
		if answered {
			_, _ = io.Copy(up, s.client.Conn)
			break
		}
		n, err := s.client.Conn.Read(buf)
		if n > 0 {
			s.mu.Lock()
			up, answered = s.up, s.answered
			if !answered && !s.tooMuch {
				if len(s.sent)+n > replayLimit {
					s.tooMuch, s.sent = true, nil
				} else {
					s.sent = append(s.sent, buf[:n]...)
				}
			}
			s.mu.Unlock()
			// A write that fails before the core answered is retried by
			// the replay, should another core take the connection.
			if _, werr := up.Write(buf[:n]); werr != nil && answered {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	s.ended = true
	up := s.up
	s.mu.Unlock()
	// The client ended: end the core's reading half, then both.
	if tc, ok := up.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// fromCore copies the core's bytes to the client until either ends; true
// when the core ended before its first byte and another may take over.
func (s *splice) fromCore() bool {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	buf := make([]byte, 4<<10) // the core's first answer, then everything it sends
	n, err := up.Read(buf)
	if n == 0 && err != nil {
		s.mu.Lock()
		retry := !s.tooMuch && !s.ended
		s.mu.Unlock()
		return retry
	}
	s.mu.Lock()
	s.answered, s.sent = true, nil
	s.mu.Unlock()
	_, werr := s.client.Write(buf[:n])
	if werr == nil && err == nil {
		// Through buf, each write under the deadline: the core's records
		// are small, and a kernel-to-kernel copy could not be bounded.
		_, werr = io.CopyBuffer(s.client, struct{ io.Reader }{up}, buf)
	}
	if errors.Is(werr, os.ErrDeadlineExceeded) {
		s.mu.Lock()
		s.stalled = true
		s.mu.Unlock()
	}
	if tc, ok := s.client.Conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	return false
}

func (s *splice) stalledClient() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// replace makes up the core, sending it what the client sent so far;
// false if it failed at that.
func (s *splice) replace(up net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.up.Close()
	s.up = up
	_, err := up.Write(s.sent)
	return err == nil
}

func (s *splice) closeUp() {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	_ = up.Close()
}

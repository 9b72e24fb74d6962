package service

import (
	"net"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// descriptorReserve is how many descriptors of the process's limit the
// public listeners leave to everything else: journal and archive files,
// gRPC connections, the database pool. Running out of descriptors must
// shed clients, never fail a durable write.
const descriptorReserve = 512

// budget bounds the connections of a process's public listeners (HTTP and gRPC),
// together and per client address. A connection over budget is closed as
// soon as it is accepted — a counted refusal — instead of waiting in the
// kernel's backlog until the client gives up.
type budget struct {
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[string]int

	refused *prometheus.CounterVec
}

// newBudget returns a budget of max connections (0: the process's open-file
// limit less descriptorReserve) and perAddr per address (0: no bound).
func newBudget(max, perAddr int) *budget {
	if max <= 0 {
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur > 2*descriptorReserve {
			max = int(lim.Cur) - descriptorReserve
		} else {
			max = 1024
		}
	}
	return &budget{max: max, perAddr: perAddr, byAddr: map[string]int{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_connections_refused_total",
			Help: "Connections to public listeners (HTTP and gRPC) closed on accept, over the process's or an address's budget.",
		}, []string{"listener", "reason"})}
}

// listener wraps ln so its connections draw on the budget.
func (b *budget) listener(name string, ln net.Listener) net.Listener {
	return &budgetListener{Listener: ln, b: b, name: name}
}

type budgetListener struct {
	net.Listener
	b    *budget
	name string
}

func (l *budgetListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			// Out of descriptors is temporary: net/http and grpc back off and
			// accepts again, and the budget keeps it from happening.
			return nil, err
		}
		addr := ""
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			addr = AddrKey(tcp.IP.String())
		}
		if reason := l.b.take(addr); reason != "" {
			l.b.refused.WithLabelValues(l.name, reason).Inc()
			c.Close()
			continue
		}
		return &budgetConn{Conn: c, b: l.b, addr: addr}, nil
	}
}

// take admits a connection from addr, or names why not.
func (b *budget) take(addr string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.open >= b.max:
		return "process"
	case b.perAddr > 0 && b.byAddr[addr] >= b.perAddr:
		return "per_address"
	}
	b.open++
	b.byAddr[addr]++
	return ""
}

// opened is how many connections are open now.
func (b *budget) opened() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.open)
}

func (b *budget) release(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open--
	if b.byAddr[addr]--; b.byAddr[addr] <= 0 {
		delete(b.byAddr, addr)
	}
}

// budgetConn gives its place back when closed, once, also after it was
// hijacked (SSE and WebSocket connections outlive their handler).
type budgetConn struct {
	net.Conn
	b    *budget
	addr string
	once sync.Once
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.b.release(c.addr) })
	return err
}

// Unwrap is the connection underneath: writers that take a connection
// over write to it directly, so net.Buffers reach it as one writev.
func (c *budgetConn) Unwrap() net.Conn { return c.Conn }

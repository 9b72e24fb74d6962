package edge

import (
	"net"
	"net/http"
	"sync"

	"shindo.dev/lib/service"
)

// addrLimit caps the open streams per client address, so one address
// flooding connections cannot take the edge's capacity from everyone.
type addrLimit struct {
	max int
	mu  sync.Mutex
	n   map[string]int
	// refused counts the connections turned away.
	refused uint64
}

func newAddrLimit(max int) *addrLimit { return &addrLimit{max: max, n: map[string]int{}} }

func (l *addrLimit) acquire(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[addr] >= l.max {
		l.refused++
		return false
	}
	l.n[addr]++
	return true
}

func (l *addrLimit) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[addr]--; l.n[addr] <= 0 {
		delete(l.n, addr)
	}
}

// clientAddr is what the per-address limits count a request's client by:
// its connection's remote IP, an IPv6 one by its /64 (service.AddrKey).
// Behind a proxy every client would share its address; shindo's edges
// face clients directly.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return service.AddrKey(host)
}

// turnedAway is how many connections the limit refused.
func (l *addrLimit) turnedAway() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

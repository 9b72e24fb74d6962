// Package tlsrecord counts the TLS records a connection reads, for tests
// that check how a server frames what it writes.
package tlsrecord

import (
	"net"
	"sync"
)

// Counter is a connection that counts the TLS records read through it by
// their 5-byte headers (type, version, length). Wrap the raw connection
// and give it to tls.Client.
type Counter struct {
	net.Conn
	mu      sync.Mutex
	header  []byte // of the record being read
	left    int    // bytes of its body still to come
	records int
}

func (r *Counter) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	for b := p[:n]; len(b) > 0; {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left, b = r.left-k, b[k:]
			continue
		}
		k := min(5-len(r.header), len(b))
		r.header, b = append(r.header, b[:k]...), b[k:]
		if len(r.header) == 5 {
			r.left, r.header = int(r.header[3])<<8|int(r.header[4]), r.header[:0]
			r.records++
		}
	}
	return n, err
}

// Records is how many record headers have been read.
func (r *Counter) Records() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records
}

// Package writev writes several buffers to a connection in one go: one
// writev on a bare socket, and on anything else — a TLS connection above
// all — one Write of the buffers joined. net.Buffers gathers only on a
// bare socket and falls back to a Write per buffer elsewhere; on a
// tls.Conn each Write is a record of its own, sealed, sent with a system
// call and opened by the peer, so a message in three parts costs three of
// each.
package writev

import (
	"net"
	"sync"
)

// joined holds the buffers messages are copied into; most are a few
// kilobytes, and one is in use per writer at a time.
var joined = sync.Pool{New: func() any { return new([]byte) }}

// maxKept bounds the buffers kept for reuse: a rare large message is not
// held on to.
const maxKept = 64 << 10

// Write writes bufs to c, in that order, as one write.
func Write(c net.Conn, bufs ...[]byte) error {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
		nb := net.Buffers(bufs)
		_, err := nb.WriteTo(c)
		return err
	}
	if len(bufs) == 1 {
		_, err := c.Write(bufs[0])
		return err
	}
	bp := joined.Get().(*[]byte)
	b := (*bp)[:0]
	for _, x := range bufs {
		b = append(b, x...)
	}
	_, err := c.Write(b)
	if cap(b) <= maxKept {
		*bp = b[:0]
		joined.Put(bp)
	}
	return err
}

// Package peerwrite writes to peers from outside — browsers, apps,
// SeedLink clients, stations — any of which may stop reading: deadlines
// that bound every write without a timer update per write, and closing a
// connection without waiting on the peer.
package peerwrite

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Deadline keeps a connection's write deadline between half of Timeout
// and all of it ahead. Setting a deadline is a timer update in the
// runtime's poller: on a connection written on every tick, or a copy
// loop, doing it per write costs a tenth of the writing; renewed at
// half-time it is done every few seconds. A write that cannot finish is
// so given between Timeout/2 and Timeout. Only the one goroutine writing
// to the connection may use it.
type Deadline struct {
	Timeout time.Duration
	at      time.Time
}

// Renew sets c's write deadline Timeout ahead if less than half of it is
// left.
func (d *Deadline) Renew(c net.Conn) {
	if now := time.Now(); d.at.Sub(now) < d.Timeout/2 {
		d.at = now.Add(d.Timeout)
		_ = c.SetWriteDeadline(d.at)
	}
}

// Writer writes to Conn with its deadline renewed before each write.
type Writer struct {
	Conn     net.Conn
	Deadline Deadline
}

func (w *Writer) Write(p []byte) (int, error) {
	w.Deadline.Renew(w.Conn)
	return w.Conn.Write(p)
}

// Unsent is how many bytes c's socket holds that the peer has not
// acknowledged (SIOCOUTQ): they pile up when the peer stops reading and
// its receive window closes. Under TLS it is the socket's, records and
// all. false when c is not a socket this can be asked of.
func Unsent(c net.Conn) (int, bool) {
	c = Socket(c)
	if t, ok := c.(tlsConn); ok {
		c = Socket(t.NetConn())
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, qerr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) { n, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || qerr != nil {
		return 0, false
	}
	return n, true
}

// Close closes c without waiting on its peer. crypto/tls's Close first
// writes a closing alert under a deadline of its own of 5 s; to a peer
// that stopped reading that write waits the whole 5 s on a full socket.
// So a TLS connection gets the alert only when its socket has nothing
// left unsent; otherwise the socket is closed underneath first (the
// kernel still sends what it holds, then FIN) and the alert's write fails
// at once.
func Close(c net.Conn) error {
	if q, ok := Unsent(c); !ok || q > 0 {
		Drop(c)
		return nil
	}
	return c.Close()
}

// Drop closes c at once, with no closing alert under TLS: for a peer
// being dropped for not reading, whose socket may fill up at any moment
// (a write still under way elsewhere). The connection is closed whatever
// its layers report of it.
func Drop(c net.Conn) {
	if t, ok := Socket(c).(tlsConn); ok {
		_ = t.NetConn().Close()
	}
	_ = c.Close()
}

// tlsConn is a *tls.Conn, or a wrapper that embeds one (a listener's
// check of its peer's certificate).
type tlsConn interface {
	net.Conn
	NetConn() net.Conn
	ConnectionState() tls.ConnectionState
}

// Socket is the connection underneath wrappers that count it (a
// service's connection budget) and say so with Unwrap: a socket, or a
// TLS connection.
func Socket(c net.Conn) net.Conn {
	for {
		u, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			return c
		}
		c = u.Unwrap()
	}
}

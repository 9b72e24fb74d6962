package sse

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unread is how many bytes a connection's socket holds that the peer has
// not acknowledged (SIOCOUTQ): they pile up when the client stops reading
// and its receive window closes. Under TLS it is the socket's, records
// and all. false when the connection is not a TCP socket this can be asked
// of.
func unread(conn net.Conn) (int, bool) {
	if t, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = socket(t.NetConn())
	}
	sc, ok := conn.(syscall.Conn)
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

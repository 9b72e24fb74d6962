package service

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Accept returns ln's next connection for a server that runs its own
// accept loop (SeedLink, the edges' TCP routing). Running out of
// descriptors is waited out with a growing pause, as net/http does, rather
// than spinning or ending the server; any other error is returned, and
// after the listener is closed that is net.ErrClosed.
func Accept(ln net.Listener) (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
			return nil, err
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		time.Sleep(pause)
	}
}

// RemoteHost is the IP a connection comes from, without its port: what a
// per-address connection budget counts.
func RemoteHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, _ := net.SplitHostPort(a.String())
	return host
}

// AddrKey is what a per-address limit counts a client host by: an IPv4
// address, or an IPv6 address's /64, the block one host usually holds
// (one counted by each of its addresses would have a limit per address
// times 2⁶⁴). Anything that is no address is its own key.
func AddrKey(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.WithZone("")
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.Unmap().String()
}

package service

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// flakyListener runs out of descriptors a few times before each accept.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// TestAcceptWaitsOutDescriptorShortage: EMFILE is waited out, a closed
// listener ends the loop with net.ErrClosed.
func TestAcceptWaitsOutDescriptorShortage(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln, fails: 3}
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
		}
	}()
	c, err := Accept(fl)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	c.Close()
	if fl.fails != 0 {
		t.Errorf("%d shortages left", fl.fails)
	}
	ln.Close()
	if _, err := Accept(fl); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}

// TestAddrKey: per-address limits count an IPv6 host by its /64, an IPv4
// one (also written IPv4-mapped) by its address.
func TestAddrKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
		{"not an address", "not an address"},
		{"", ""},
	} {
		if got := AddrKey(tc.host); got != tc.want {
			t.Errorf("AddrKey(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

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

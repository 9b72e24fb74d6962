package service

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBudget: connections over a listener's budget — per address, or the
// process's — are closed as soon as they are accepted and counted; a
// closed connection gives its place back, also after the handler let go
// of it (a hijacked stream).
func TestBudget(t *testing.T) {
	t.Parallel()
	b := newBudget(3, 2)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := b.listener("test", raw)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(local string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var one [1]byte
		_, err := c.Read(one[:])
		return err != nil && !isTimeout(err)
	}
	dial("127.0.0.1")
	dial("127.0.0.1")
	s1 := <-accepted
	<-accepted
	if a3 := dial("127.0.0.1"); !closedByServer(a3) {
		t.Fatal("a third connection from one address was kept")
	}
	dial("127.0.0.2")
	<-accepted
	if b2 := dial("127.0.0.3"); !closedByServer(b2) {
		t.Fatal("a fourth connection to the process was kept")
	}
	if testutil.ToFloat64(b.refused.WithLabelValues("test", "per_address")) != 1 ||
		testutil.ToFloat64(b.refused.WithLabelValues("test", "process")) != 1 {
		t.Fatal("refusals not counted by reason")
	}
	s1.Close()
	s1.Close() // twice: released once
	dial("127.0.0.1")
	select {
	case <-accepted:
	case <-time.After(2 * time.Second):
		t.Fatal("a place given back was not taken")
	}
	if b.open != 3 {
		t.Fatalf("%d connections counted open, want 3", b.open)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

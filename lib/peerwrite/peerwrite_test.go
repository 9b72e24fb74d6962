package peerwrite

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// recorder counts the write deadlines set on it.
type recorder struct {
	net.Conn
	set []time.Time
}

func (r *recorder) SetWriteDeadline(t time.Time) error {
	r.set = append(r.set, t)
	return nil
}

// TestDeadlineRenewedAtHalfTime: a deadline is set on the first write,
// not again while more than half of Timeout is left, and again once less
// is; it is never more than Timeout ahead.
func TestDeadlineRenewedAtHalfTime(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	r := &recorder{}
	d := Deadline{Timeout: timeout}
	start := time.Now()
	d.Renew(r)
	if len(r.set) != 1 || r.set[0].Sub(start) > timeout+10*time.Millisecond || r.set[0].Before(start.Add(timeout)) {
		t.Fatalf("first renewal set %v, want %v ahead", r.set, timeout)
	}
	for range 10 {
		d.Renew(r)
	}
	if len(r.set) != 1 {
		t.Fatalf("%d deadlines set with most of the first one left", len(r.set))
	}
	//nolint:forbidigo // past half of the deadline, on the clock the deadline is on
	time.Sleep(timeout/2 + 10*time.Millisecond)
	d.Renew(r)
	if len(r.set) != 2 {
		t.Fatalf("%d deadlines set past half-time, want 2", len(r.set))
	}
	if ahead := time.Until(r.set[1]); ahead > timeout || ahead < timeout/2 {
		t.Fatalf("renewed %v ahead, want about %v", ahead, timeout)
	}
}

// listenTLS listens for TLS on loopback until the test ends, with
// httptest's certificate, and returns the roots that trust it.
func listenTLS(t *testing.T) (net.Listener, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	cert := srv.TLS.Certificates
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	srv.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, roots
}

// fullTLS returns the server side of a TLS connection whose client reads
// nothing, with its socket full: not one more byte fits.
func fullTLS(t *testing.T) net.Conn {
	t.Helper()
	ln, roots := listenTLS(t)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	client, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	go tls.Client(client, &tls.Config{RootCAs: roots, ServerName: "example.com"}).Handshake()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Large writes until one cannot finish; then single bytes on the
	// socket beneath (a timed-out write leaves the TLS connection refusing
	// writes of its own): the kernel fits small writes into its last
	// buffer's room, which must be gone too, or the alert might still fit.
	chunk := bytes.Repeat([]byte("w"), 64<<10)
	for {
		conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := conn.Write(chunk); err != nil {
			break
		}
	}
	raw := conn.(*tls.Conn).NetConn()
	for {
		raw.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := raw.Write([]byte("w")); err != nil {
			break
		}
	}
	conn.SetWriteDeadline(time.Time{})
	if q, ok := Unsent(conn); !ok || q == 0 {
		t.Fatalf("socket holds %d bytes unsent (%v), want some", q, ok)
	}
	return conn
}

// TestCloseDoesNotWait: closing (or dropping) a TLS connection whose peer
// stopped reading returns at once; crypto/tls's own Close would first
// write its closing alert into the full socket and wait up to 5 s.
func TestCloseDoesNotWait(t *testing.T) {
	t.Parallel()
	for name, close := range map[string]func(net.Conn){"Close": func(c net.Conn) { _ = Close(c) }, "Drop": Drop} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := fullTLS(t)
			start := time.Now()
			close(conn)
			if took := time.Since(start); took > time.Second {
				t.Fatalf("closing took %v", took)
			}
			if _, err := conn.Write([]byte("x")); err == nil {
				t.Fatal("the connection still takes writes")
			}
		})
	}
}

// TestCloseSendsTheAlertWhenItFits: a TLS peer that reads gets the
// closing alert: after Close, one more record (the alert, sealed) comes
// before the end of the stream.
func TestCloseSendsTheAlertWhenItFits(t *testing.T) {
	t.Parallel()
	ln, roots := listenTLS(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
		}
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	client := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "example.com"})
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	conn := <-accepted
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(client, b); err != nil {
		t.Fatal(err)
	}
	// Everything written was taken and acknowledged.
	if !waitUnsent(conn) {
		t.Fatal("the socket never emptied")
	}
	if err := Close(conn); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(raw)
	if err != nil {
		t.Fatal(err)
	}
	// A record: type, version, length, then the sealed alert.
	if len(rest) < 5+2 || int(rest[3])<<8|int(rest[4]) != len(rest)-5 {
		t.Fatalf("after Close the peer read %d bytes (% x), want one record: the closing alert", len(rest), rest)
	}
}

func waitUnsent(c net.Conn) bool {
	for range 100 {
		if q, ok := Unsent(c); ok && q == 0 {
			return true
		}
		//nolint:forbidigo // the peer's acknowledgement is the kernel's
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

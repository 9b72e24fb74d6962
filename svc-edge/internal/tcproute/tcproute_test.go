package tcproute

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
)

// core answers every connection with its name, then echoes lines.
type core struct {
	ln   net.Listener
	name string
}

func startCore(t *testing.T, name string) *core {
	t.Helper()
	ln := fakeCore(t, func(conn net.Conn) {
		defer conn.Close()
		io.WriteString(conn, name+"\n")
		io.Copy(conn, conn)
	})
	return &core{ln: ln, name: name}
}

// fakeCore listens on loopback until the test ends and serves each
// connection with handle, in a goroutine of its own.
func fakeCore(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln := listenLocal(t)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(conn)
		}
	}()
	return ln
}

func startProxy(t *testing.T, targets []string, order func() []int, perAddr int) (*Proxy, string) {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int{}
	p, err := New(Options{Targets: targets, Order: order, DialTimeout: time.Second, MaxConns: 10, Name: "seedlink",
		Acquire: func(a string) bool {
			mu.Lock()
			defer mu.Unlock()
			if n[a] >= perAddr {
				return false
			}
			n[a]++
			return true
		},
		Release: func(a string) { mu.Lock(); n[a]--; mu.Unlock() },
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p, ln)
	return p, ln.Addr().String()
}

// serve runs p on ln until the test ends.
func serve(t *testing.T, p *Proxy, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// greet connects through the proxy and returns the core's name, or "" if
// the connection was closed first.
func greet(t *testing.T, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", c
	}
	return strings.TrimSpace(line), c
}

// TestRoutesInTheBalancersOrder: connections go to the first core of the
// order; a core that refuses is passed over; with none, the connection is
// closed and counted; the per-address budget turns the extra away.
func TestRoutesInTheBalancersOrder(t *testing.T) {
	t.Parallel()
	a, b := startCore(t, "TNN-1"), startCore(t, "TYO-1")
	order := []int{0, 1}
	var mu sync.Mutex
	p, addr := startProxy(t, []string{a.ln.Addr().String(), b.ln.Addr().String()}, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return order
	}, 3)
	if got, _ := greet(t, addr); got != "TNN-1" {
		t.Fatalf("first connection reached %q, want TNN-1", got)
	}
	mu.Lock()
	order = []int{1, 0} // the balancer ejected TNN-1
	mu.Unlock()
	if got, _ := greet(t, addr); got != "TYO-1" {
		t.Fatalf("after the ejection: %q, want TYO-1", got)
	}
	mu.Lock()
	order = []int{0, 1}
	mu.Unlock()
	a.ln.Close() // TNN-1 goes away before its probes say so
	if got, _ := greet(t, addr); got != "TYO-1" {
		t.Fatalf("with TNN-1 refusing: %q, want TYO-1", got)
	}
	// Three connections are open from this address: the fourth is turned
	// away.
	if got, _ := greet(t, addr); got != "" {
		t.Fatalf("over the address budget: reached %q", got)
	}
	if n := testutil.ToFloat64(p.turnedAway.WithLabelValues("address")); n != 1 {
		t.Errorf("turned away by address: %v", n)
	}
}

// TestCoreGoingAwayEndsTheConnection: when the core's side ends, the
// client's does too, at once: it reconnects instead of waiting on a
// half-open connection.
func TestCoreGoingAwayEndsTheConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p, addr := startProxy(t, []string{ln.Addr().String()}, func() []int { return []int{0} }, 10)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up := <-accepted
	up.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client read %v after the core closed, want EOF", err)
	}
	if n := testutil.ToFloat64(p.routed.WithLabelValues(ln.Addr().String())); n != 1 {
		t.Errorf("routed %v", n)
	}
}

// listenLocal listens on a free loopback port until the test ends.
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dyingCore accepts connections and, after wait, resets them unanswered,
// as a killed process's listening socket does in the moment before it
// goes.
func dyingCore(t *testing.T, wait time.Duration) net.Listener {
	t.Helper()
	return fakeCore(t, func(c net.Conn) {
		time.AfterFunc(wait, func() {
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		})
	})
}

// TestCoreClosingUnansweredIsPassedOver: a core that closes a connection
// right after accepting it, before its first byte, is passed over as one
// that refused: the next core gets what the client sent meanwhile, and the
// client sees only that core. One that closes later without a word (its
// negotiation timeout) ends the connection.
func TestCoreClosingUnansweredIsPassedOver(t *testing.T) {
	t.Parallel()
	dying, b := dyingCore(t, 20*time.Millisecond), startCore(t, "TYO-1")
	p, addr := startProxy(t, []string{dying.Addr().String(), b.ln.Addr().String()}, func() []int { return []int{0, 1} }, 10)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "HELLO\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for _, want := range []string{"TYO-1", "HELLO"} {
		line, err := r.ReadString('\n')
		if got := strings.TrimSpace(line); err != nil || got != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	}
	if n := testutil.ToFloat64(p.redialed); n != 1 {
		t.Errorf("redialed %v, want 1", n)
	}

	late := dyingCore(t, 1500*time.Millisecond) // after the proxy's DialTimeout
	_, addr = startProxy(t, []string{late.Addr().String(), b.ln.Addr().String()}, func() []int { return []int{0, 1} }, 10)
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes (%v) from a core that closed late, want the connection ended", n, err)
	}
}

// TestNoCore: with every core refusing, the client's connection closes and
// is counted.
func TestNoCore(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p, addr := startProxy(t, []string{dead}, func() []int { return []int{0} }, 10)
	if got, _ := greet(t, addr); got != "" {
		t.Fatalf("reached %q", got)
	}
	if n := testutil.ToFloat64(p.turnedAway.WithLabelValues("no_core")); n != 1 {
		t.Errorf("no_core %v", n)
	}
}

// TestTLSBothSides: under -tls the edge serves SeedLink over TLS with its
// public certificate and carries it to a core that requires mutual TLS,
// with the edge's internal certificate; a client that stalls its
// handshake is dropped after HandshakeTimeout, counted, and never costs a
// core connection.
func TestTLSBothSides(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	certOf := func(site, role string) tls.Certificate {
		is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: site, Role: role}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The core: mutual TLS, its name to every caller with a certificate.
	var accepted atomic.Int32
	coreLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{certOf("TNN-1", "waveform")},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coreLn.Close() })
	go func() {
		for {
			c, err := coreLn.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.WriteString(c, "TNN-1\n")
				io.Copy(c, c)
			}()
		}
	}()
	p, err := New(Options{Targets: []string{coreLn.Addr().String()}, Order: func() []int { return []int{0} },
		DialTimeout: time.Second, MaxConns: 10, Name: "seedlink", HandshakeTimeout: 300 * time.Millisecond,
		TLS: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{certOf("TPE-1", "edge")}, RootCAs: pool},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{certOf("TPE-1", "edge")}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p, ln)

	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "TNN-1\n" {
		t.Fatalf("through TLS at both hops: %q %v", line, err)
	}
	io.WriteString(c, "SELECT 00_B_N_Z\n")
	if line, err := r.ReadString('\n'); err != nil || line != "SELECT 00_B_N_Z\n" {
		t.Fatalf("echo: %q %v", line, err)
	}

	stalled, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled handshake: %v, want the edge to close it", err)
	}
	// The timeout closes the connection, then the handshake returns and
	// is counted.
	poll.Until(t, 5*time.Second, "one connection turned away at the handshake", func() bool {
		return testutil.ToFloat64(p.turnedAway.WithLabelValues("handshake")) == 1
	})
	if n := accepted.Load(); n != 1 {
		t.Errorf("the core accepted %d connections, want 1: the stalled client cost one", n)
	}
}

// TestClientThatStopsReadingIsDropped: a client that takes nothing of
// what its core sends is dropped within the write timeout, counted, and
// its slots given back, where a write without a deadline would wait for
// as long as its kernel answers with a closed window.
func TestClientThatStopsReadingIsDropped(t *testing.T) {
	t.Parallel()
	// A core that greets, then sends as fast as it may.
	ln := fakeCore(t, func(conn net.Conn) {
		defer conn.Close()
		_ = conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(conn, "TNN-1\n")
		chunk := make([]byte, 64<<10)
		for {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	})
	const timeout = 300 * time.Millisecond
	var held atomic.Int64
	p, err := New(Options{Targets: []string{ln.Addr().String()}, Order: func() []int { return []int{0} },
		DialTimeout: time.Second, MaxConns: 10, Name: "seedlink", WriteTimeout: timeout,
		Acquire: func(string) bool { held.Add(1); return true }, Release: func(string) { held.Add(-1) },
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pln := listenLocal(t)
	serve(t, p, pln)

	// The client reads the greeting, then nothing.
	c, err := net.Dial("tcp", pln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "TNN-1\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	start := time.Now()
	if !poll.Within(5*time.Second, func() bool { return testutil.ToFloat64(p.stalled) == 1 }) {
		t.Fatal("the client that stopped reading was never dropped")
	}
	// The kernels' buffers fill first (some megabytes on loopback), then
	// the write waits out the timeout.
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("dropped after %v; the write timeout is %v", took, timeout)
	}
	if !poll.Within(2*time.Second, func() bool { return testutil.ToFloat64(p.open) == 0 && held.Load() == 0 }) {
		t.Fatalf("after the drop: %v connections open, %d address slots held", testutil.ToFloat64(p.open), held.Load())
	}
}

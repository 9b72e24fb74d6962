package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

func TestTCPIntactUnderDelay(t *testing.T) {
	t.Parallel()
	target := startTCPEcho(t)
	p := startTCP(t, target, Options{Seed: 1})
	const delay = 10 * time.Millisecond
	p.SetBoth(Impairment{Delay: delay, Jitter: 10 * time.Millisecond})
	c := dialTCP(t, p.Addr())

	start := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write: %v", err)
	}
	readFull(t, c, []byte("x"))
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip %v, want at least %v (delay each way)", rtt, 2*delay)
	}

	// Many chunks in flight at once, each with its own jitter: the stream
	// must still come back byte for byte.
	want := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	werr := make(chan error, 1)
	go func() {
		for b := want; len(b) > 0; {
			n := min(len(b), 1+rng.IntN(20000))
			if _, err := c.Write(b[:n]); err != nil {
				werr <- err
				return
			}
			b = b[n:]
		}
		werr <- nil
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the stream came back altered")
	}
	const total = 1 + 1<<20
	poll.Until(t, 5*time.Second, "the byte counters", func() bool {
		s := p.Stats()
		return s.Upstream.Bytes == total && s.Downstream.Bytes == total
	})
	if s := p.Stats(); s.Upstream.Delayed == 0 || s.Downstream.Delayed == 0 {
		t.Errorf("no chunk counted as delayed: %+v", s)
	}
}

func TestTCPBlackhole(t *testing.T) {
	t.Parallel()
	for _, dir := range []Direction{Upstream, Downstream} {
		t.Run(dir.String(), func(t *testing.T) {
			t.Parallel()
			target := startTCPEcho(t)
			p := startTCP(t, target, Options{Seed: 1})
			c := dialTCP(t, p.Addr())
			if _, err := c.Write([]byte("open")); err != nil {
				t.Fatalf("write: %v", err)
			}
			readFull(t, c, []byte("open"))

			p.Set(dir, Impairment{Blackhole: true})
			if _, err := c.Write([]byte("hello")); err != nil {
				t.Fatalf("write: %v", err)
			}
			held := func() uint64 {
				if dir == Upstream {
					return p.Stats().Upstream.Held
				}
				return p.Stats().Downstream.Held
			}
			poll.Until(t, 5*time.Second, "the blackhole to hold a chunk", func() bool { return held() == 1 })
			// The chunk is inside the proxy, so neither end can have it yet.
			if dir == Upstream {
				if got := target.received(); got != len("open") {
					t.Errorf("target received %d bytes through a blackhole", got-len("open"))
				}
			}
			_ = c.SetReadDeadline(time.Now())
			if n, err := c.Read(make([]byte, 16)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("client read %d bytes, %v; want nothing through a blackhole", n, err)
			}
			if open := p.Stats().Open; open != 1 {
				t.Errorf("%d connections open, want the blackholed one kept", open)
			}

			p.Set(dir, Impairment{})
			readFull(t, c, []byte("hello"))
		})
	}
}

func TestTCPHalfClose(t *testing.T) {
	t.Parallel()
	target := startTCPEcho(t)
	p := startTCP(t, target, Options{Seed: 1})
	c := dialTCP(t, p.Addr())
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatalf("close write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want the echo then EOF", got, err)
	}
	poll.Until(t, 5*time.Second, "the connection to be closed", func() bool { return p.Stats().Open == 0 })
}

func TestTCPRefuse(t *testing.T) {
	t.Parallel()
	target := startTCPEcho(t)
	p := startTCP(t, target, Options{Seed: 1})
	p.SetRefuse(true)

	// The kernel completes the handshake before the proxy resets it, so
	// the reset shows either on the dial or on the first read.
	if c, err := net.Dial("tcp", p.Addr().String()); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 1))
		_ = c.Close()
		if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read %d bytes, %v; want the connection closed", n, err)
		}
	}
	poll.Until(t, 5*time.Second, "the refusal to be counted", func() bool { return p.Stats().Refused == 1 })
	if s := p.Stats(); s.Accepted != 0 {
		t.Errorf("accepted %d while refusing", s.Accepted)
	}

	p.SetRefuse(false)
	c := dialTCP(t, p.Addr())
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatalf("write: %v", err)
	}
	readFull(t, c, []byte("again"))
}

func TestTCPReset(t *testing.T) {
	t.Parallel()
	target := startTCPEcho(t)
	p := startTCP(t, target, Options{Seed: 1})
	c := dialTCP(t, p.Addr())
	if _, err := c.Write([]byte("one")); err != nil {
		t.Fatalf("write: %v", err)
	}
	readFull(t, c, []byte("one"))

	p.Reset()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read %d bytes, %v; want the connection cut", n, err)
	}
	if s := p.Stats(); s.Reset != 1 || s.Open != 0 {
		t.Errorf("reset %d, open %d; want 1 and 0", s.Reset, s.Open)
	}

	c = dialTCP(t, p.Addr())
	if _, err := c.Write([]byte("two")); err != nil {
		t.Fatalf("write: %v", err)
	}
	readFull(t, c, []byte("two"))
}

func TestTCPTargetDown(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: take one, then give it back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p, err := ListenTCP("127.0.0.1:0", dead, Options{})
	if err != nil {
		t.Fatalf("listen proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })

	c := dialTCP(t, p.Addr())
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read: %v; want the connection closed", err)
	}
	poll.Until(t, 5*time.Second, "the dial error to be counted", func() bool { return p.Stats().DialErrors == 1 })
}

package faultproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// datagram is one datagram as an end saw it.
type datagram struct {
	data []byte
	from netip.AddrPort
	at   time.Time
}

// udpEnd records what arrives on a UDP socket; as a target it can echo.
type udpEnd struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  []datagram
}

func (e *udpEnd) serve(echo bool, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := e.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d := datagram{data: append([]byte(nil), buf[:n]...), from: from, at: time.Now()}
		e.mu.Lock()
		e.got = append(e.got, d)
		e.mu.Unlock()
		if echo {
			if e.conn.RemoteAddr() != nil {
				_, _ = e.conn.Write(d.data)
			} else {
				_, _ = e.conn.WriteToUDPAddrPort(d.data, from)
			}
		}
	}
}

func (e *udpEnd) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func (e *udpEnd) received() []datagram {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]datagram(nil), e.got...)
}

func (e *udpEnd) send(t *testing.T, b []byte) {
	t.Helper()
	if _, err := e.conn.Write(b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (e *udpEnd) start(t *testing.T, echo bool) *udpEnd {
	t.Helper()
	_ = e.conn.SetReadBuffer(socketBuffer)
	_ = e.conn.SetWriteBuffer(socketBuffer)
	done := make(chan struct{})
	go e.serve(echo, done)
	t.Cleanup(func() {
		_ = e.conn.Close()
		<-done
	})
	return e
}

// startUDPTarget starts the stand-in for svc-ingest.
func startUDPTarget(t *testing.T, echo bool) *udpEnd {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen target: %v", err)
	}
	return (&udpEnd{conn: conn}).start(t, echo)
}

// dialUDPClient starts a stand-in station sending to addr.
func dialUDPClient(t *testing.T, addr net.Addr) *udpEnd {
	t.Helper()
	conn, err := net.DialUDP("udp", nil, addr.(*net.UDPAddr))
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	return (&udpEnd{conn: conn}).start(t, false)
}

// startUDP starts a proxy in front of target, closed when the test ends.
func startUDP(t *testing.T, target *udpEnd, opts Options) *UDP {
	t.Helper()
	p, err := ListenUDP("127.0.0.1:0", target.conn.LocalAddr().String(), opts)
	if err != nil {
		t.Fatalf("listen proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	return p
}

// numbered is a datagram carrying its index, so order and loss can be read
// at the far end.
func numbered(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func number(d datagram) int { return int(binary.BigEndian.Uint64(d.data)) }

func numbers(ds []datagram) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = number(d)
	}
	return out
}

// inversions counts places where a datagram arrived after a later one.
func inversions(seq []int) int {
	n := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] < seq[i-1] {
			n++
		}
	}
	return n
}

// sendPaced sends n numbered datagrams upstream in batches, waiting for the
// proxy to have read and sent each batch, so that neither loopback socket
// buffers nor the proxy's queue overflow (on a loaded machine the reader
// can outrun a starved scheduler) and the only losses are the ones the
// proxy decides at random.
func sendPaced(t *testing.T, c *udpEnd, p *UDP, n int) {
	t.Helper()
	const batch = 100
	base := p.Stats().Upstream.Received
	for i := 0; i < n; {
		for end := min(i+batch, n); i < end; i++ {
			c.send(t, numbered(i))
		}
		want := base + uint64(i)
		poll.Until(t, 5*time.Second, "proxy to read the batch", func() bool { return p.Stats().Upstream.Received >= want })
		settle(t, p)
	}
}

// settle waits until every datagram the proxy read upstream has been
// dropped or sent, so counters can be compared exactly.
func settle(t *testing.T, p *UDP) Counters {
	t.Helper()
	var c Counters
	poll.Until(t, 5*time.Second, "the upstream queue to drain", func() bool {
		c = p.Stats().Upstream
		return c.Forwarded+c.WriteErrors == c.Received-c.Dropped()+c.Duplicated
	})
	return c
}

// tcpEcho is the stand-in for svc-ingest's WebSocket listener: it echoes
// and counts what it received.
type tcpEcho struct {
	ln    net.Listener
	mu    sync.Mutex
	bytes int
	conns []net.Conn
}

func startTCPEcho(t *testing.T) *tcpEcho {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen target: %v", err)
	}
	e := &tcpEcho{ln: ln}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.mu.Lock()
						e.bytes += n
						e.mu.Unlock()
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		wg.Wait()
	})
	return e
}

func (e *tcpEcho) received() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bytes
}

// startTCP starts a proxy in front of target, closed when the test ends.
func startTCP(t *testing.T, target *tcpEcho, opts Options) *TCP {
	t.Helper()
	p, err := ListenTCP("127.0.0.1:0", target.ln.Addr().String(), opts)
	if err != nil {
		t.Fatalf("listen proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	return p
}

func dialTCP(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readFull reads len(want) bytes from c within a deadline and compares.
func readFull(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != string(want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

package freeaddr

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestHandsOutFreePortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		addr := TCP(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice in one test", addr)
		}
		seen[addr] = true
		if p := port(t, addr); p < low || p >= high {
			t.Fatalf("%s: outside %d–%d", addr, low, high-1)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s handed out but not free: %v", addr, err)
		}
		l.Close()
	}
}

func TestSkipsAPortHeldByAnotherTest(t *testing.T) {
	held, free := twoPorts(t)
	// Another test, of this process or another: a lock belongs to an
	// open file, and this is another opening of the port's file.
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "shindo-freeaddr", strconv.Itoa(held)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("port %d still held after its test ended: %v", held, err)
	}
	if got := port(t, pick(t, sequence(t, held, free))); got != free {
		t.Fatalf("got port %d; want %d, after the held %d", got, free, held)
	}
}

func TestSkipsAPortSomeoneListensOn(t *testing.T) {
	busy, free := twoPorts(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(busy)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := port(t, pick(t, sequence(t, busy, free))); got != free {
		t.Fatalf("got port %d; want %d, after the busy %d", got, free, busy)
	}
}

// twoPorts returns two ports freeaddr handed out to a test that has ended,
// so they are free again.
func twoPorts(t *testing.T) (a, b int) {
	t.Run("before", func(t *testing.T) { a, b = port(t, TCP(t)), port(t, TCP(t)) })
	return a, b
}

func port(t testing.TB, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// sequence gives ports in order, then fails the test.
func sequence(t *testing.T, ports ...int) func() int {
	return func() int {
		if len(ports) == 0 {
			t.Fatal("asked for more ports than the test gave")
		}
		p := ports[0]
		ports = ports[1:]
		return p
	}
}

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// udpDrops is how many datagrams the kernel dropped, since they were
// opened, at every UDP socket bound to port (the drops column of
// /proc/net/udp and udp6: a receive buffer that was full). A flood's
// datagrams the kernel dropped never reach the server's counters; a test
// that counts them exactly must know how many there were.
func udpDrops(t *testing.T, port int) (drops int64, ok bool) {
	t.Helper()
	for _, table := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		n, found := udpTableDrops(t, table, port)
		drops += n
		ok = ok || found
	}
	return drops, ok
}

func udpTableDrops(t *testing.T, table string, port int) (drops int64, ok bool) {
	t.Helper()
	f, err := os.Open(table)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 13 || !strings.HasSuffix(fields[1], want) {
			continue
		}
		n, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		if err != nil {
			t.Fatalf("%s: drops %q: %v", table, fields[len(fields)-1], err)
		}
		drops += n
		ok = true
	}
	return drops, ok
}

// TestUDPDrops checks the helper against a socket nobody reads: what
// overflows its buffer is what udpDrops reports.
func TestUDPDrops(t *testing.T) {
	r, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	port := r.LocalAddr().(*net.UDPAddr).Port
	before, ok := udpDrops(t, port)
	if !ok || before != 0 {
		t.Fatalf("a new socket: %d drops, found %v", before, ok)
	}
	w, err := net.DialUDP("udp", nil, r.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const sent = 2000
	for range sent {
		w.Write(make([]byte, 500))
	}
	drops, _ := udpDrops(t, port)
	// 64 KiB holds a few dozen of them at most (the kernel counts each
	// datagram's whole buffer against it).
	if drops < sent/2 || drops > sent {
		t.Fatalf("%d drops of %d datagrams to a 64 KiB buffer nobody reads", drops, sent)
	}
}

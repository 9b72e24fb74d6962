// Package freeaddr finds loopback addresses no one listens on, for a
// server under test that must be told its address before it starts.
//
// A port the kernel hands out for "port 0" and takes back is free only
// until the kernel hands it out again, and on a machine running several
// modules' tests at once that is soon: to another process's listener, or
// to an outgoing connection — even to the test's own first connection to
// that port, made before its server listens (a TCP self-connect). The
// server then fails to start while the test talks to a stranger, which may
// never answer. So the ports here lie below the kernel's ephemeral range
// (32768 and up on Linux) and below the dev port plans (17000 and up, e2e's
// above), where the kernel hands out nothing, and a port goes to one test
// at a time across processes: each is held by a lock on a file named after
// it in the temporary directory until the test ends.
package freeaddr

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The ports handed out: [low, high).
const low, high = 10000, 17000

// TCP is 127.0.0.1:PORT with a port no one listens on, and that no other
// test (in this process or another) is given until t ends.
func TCP(t testing.TB) string {
	t.Helper()
	return pick(t, func() int { return low + rand.IntN(high-low) })
}

// pick is TCP trying the ports next gives.
func pick(t testing.TB, next func() int) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "shindo-freeaddr")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		port := strconv.Itoa(next())
		f, err := os.OpenFile(filepath.Join(dir, port), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		// A lock belongs to the open file, so it also keeps another test of
		// this process away; it goes when the file is closed or the
		// process ends, however it ends.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close() // someone else's, or a server of an earlier test still closing
			continue
		}
		l.Close()
		t.Cleanup(func() { f.Close() })
		return addr
	}
	t.Fatalf("no free port in %d–%d after 2000 tries", low, high-1)
	return ""
}

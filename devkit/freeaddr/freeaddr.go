// Package freeaddr finds loopback addresses no one listens on, for a
// server under test that must be told its address before it starts.
package freeaddr

import (
	"net"
	"testing"
)

// TCP is 127.0.0.1:PORT with a port the kernel just handed out and took
// back: free now, and unlikely to be handed out again soon.
func TCP(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

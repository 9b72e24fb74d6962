//go:build !linux

package e2e

import "testing"

// udpDrops: only Linux reports a socket's drops here.
func udpDrops(*testing.T, int) (int64, bool) { return 0, false }

//go:build !linux

package pgserver

import (
	"os"
	"syscall"
)

// Outside Linux there is no parent-death signal: if we die without stopping
// the server, it keeps running.
func setDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}

// killServer stops the server with PostgreSQL's immediate shutdown, the
// nearest portable thing to a crash: no checkpoint, crash recovery at the
// next start. The postmaster waits for its children, so none is returned.
func killServer(postmaster *os.Process) []int {
	_ = postmaster.Signal(syscall.SIGQUIT)
	return nil
}

func anyAlive([]int) bool { return false }

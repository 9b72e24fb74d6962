//go:build !linux

package pgtest

import "syscall"

// Outside Linux there is no parent-death signal: a test binary that dies
// without stopping its server leaves it running.
func setDeathSignal(*syscall.SysProcAttr) {}

// killServer stops the server with PostgreSQL's immediate shutdown, the
// nearest portable thing to a crash: no checkpoint, crash recovery at the
// next start. The postmaster waits for its children, so none is returned.
func killServer(pid int) []int {
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	return nil
}

func anyAlive([]int) bool { return false }

package pgserver

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// setDeathSignal makes Linux send the postmaster sig if we die without
// stopping it: a crash, a test timeout, a kill -9.
func setDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) { attr.Pdeathsig = sig }

// killServer kills the postmaster and its children at once with SIGKILL, as
// a crash would, and returns the children's PIDs. Each child is a session
// leader of its own (PostgreSQL calls setsid), so no process-group signal
// reaches them; the postmaster is stopped first so that it can neither fork
// nor reap between the listing and the kill, which keeps the listed PIDs
// from being reused meanwhile.
func killServer(postmaster *os.Process) []int {
	if err := postmaster.Signal(syscall.SIGSTOP); err != nil {
		return nil // already gone
	}
	children := childrenOf(postmaster.Pid)
	_ = postmaster.Signal(syscall.SIGKILL)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	return children
}

// anyAlive reports whether one of pids is still running. A killed backend
// lingers as a zombie until PID 1 reaps it, but has left the server's shared
// memory by then, which is all a restart needs.
func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if st, ok := procStat(pid); ok && st.state != "Z" {
			return true
		}
	}
	return false
}

func childrenOf(parent int) []int {
	var children []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == parent {
			children = append(children, pid)
		}
	}
	return children
}

type stat struct {
	state string
	ppid  int
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false // gone
	}
	// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return stat{state: string(f[0]), ppid: ppid}, true
}

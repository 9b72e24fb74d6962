package pgtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// setDeathSignal makes Linux send the postmaster SIGQUIT (PostgreSQL's
// immediate shutdown, which takes the backends down too) if the test binary
// dies without stopping it: a test timeout, a crash.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGQUIT }

// killServer kills the postmaster and its children at once with SIGKILL, as
// a crash would, and returns the children's PIDs. Each child is a session
// leader of its own (PostgreSQL calls setsid), so no process-group signal
// reaches them; the postmaster is stopped first so that it cannot fork
// between the listing and the kill.
func killServer(pid int) []int {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	children := childrenOf(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
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

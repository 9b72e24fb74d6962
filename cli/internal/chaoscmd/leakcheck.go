package chaoscmd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// usage is what a process holds: open descriptors and resident memory.
// Descriptors are told apart: files (a server's bounded caches, such as
// the waveform archive's open day files, grow to its working set) and the
// rest — sockets, pipes, timers — which is what a fault leaks.
type usage struct {
	fds      int // not files
	files    int
	rssBytes int64
}

// readUsage reads /proc for pid; ok is false when the process is gone.
func readUsage(pid int) (usage, bool) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return usage{}, false
	}
	var u usage
	for _, e := range entries {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "/dev/") {
			u.files++
		} else {
			u.fds++
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			u.rssBytes = kb * 1024
		}
	}
	return u, true
}

// Leak thresholds: a process that ran through the whole run may end it
// holding this much more than it did at its start, and no more. They are
// loose on purpose — the run is minutes long, and a server's pools and
// caches grow to their working size — and catch what a leak per fault or
// per connection would add up to.
const (
	fdSlack  = 64
	fdGrowth = 1.5 // times the baseline
	rssSlack = 128 << 20
	rssGrow  = 2.0
	// maxFiles is above every service's cache of open files (the waveform
	// archive keeps at most 1024).
	maxFiles = 1024 + 64
)

// leakFindings compares each process that kept its process ID through the
// run with its baseline.
func leakFindings(base, end map[string]procUsage) (checked, restarted int, violations []string) {
	for name, b := range base {
		e, ok := end[name]
		if !ok || e.pid != b.pid {
			restarted++
			continue
		}
		checked++
		if lim := int(float64(b.fds)*fdGrowth) + fdSlack; e.fds > lim {
			violations = append(violations, fmt.Sprintf("%s (pid %d) holds %d descriptors other than files, %d a third into the run (limit %d)", name, e.pid, e.fds, b.fds, lim))
		}
		if e.files > maxFiles {
			violations = append(violations, fmt.Sprintf("%s (pid %d) holds %d open files (limit %d)", name, e.pid, e.files, maxFiles))
		}
		if lim := int64(float64(b.rssBytes)*rssGrow) + rssSlack; e.rssBytes > lim {
			violations = append(violations, fmt.Sprintf("%s (pid %d) resident memory %d MiB, %d MiB a third into the run (limit %d MiB)",
				name, e.pid, e.rssBytes>>20, b.rssBytes>>20, lim>>20))
		}
	}
	return checked, restarted, violations
}

type procUsage struct {
	pid int
	usage
}

// usage reads what every process of the topology holds, the dev database
// included.
func (t *topology) usage(ctx context.Context) map[string]procUsage {
	procs, err := t.processes(ctx)
	if err != nil {
		return nil
	}
	out := sample(procs)
	if t.reload() == nil {
		if pid := t.databasePID(); pid > 0 {
			if u, ok := readUsage(pid); ok {
				out["TNN-1-postgres"] = procUsage{pid: pid, usage: u}
			}
		}
	}
	return out
}

// sample reads the usage of processes.
func sample(procs []proc) map[string]procUsage {
	out := map[string]procUsage{}
	for _, p := range procs {
		if p.PID == 0 {
			continue
		}
		if u, ok := readUsage(p.PID); ok {
			out[p.Name] = procUsage{pid: p.PID, usage: u}
		}
	}
	return out
}

package chaoscmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is what a process holds: open descriptors and resident memory.
// Descriptors are told apart: files (a server's bounded caches, such as
// the waveform archive's open day files, grow to its working set), the
// connections its clients hold open (as many as there are clients: a
// thousand stations falling back to an ingest's WebSocket, for as long as
// their uplink is impaired), and the rest — sockets, pipes, timers —
// which is what a fault leaks.
type usage struct {
	fds      int // neither files nor clients' connections
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

// Leak thresholds: a process life may end holding this much more than it
// did at its baseline, and no more. They are
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

// How the process lives are followed: a sample of every process this
// often, and a life judged only when its last sample is this long after
// its baseline (what grows in less is a server warming up, not a leak).
const (
	leakSampleEvery = 10 * time.Second
	leakJudgeAfter  = time.Minute
	// leakHeldFor: a life is judged by the least it held over its last
	// samples this long. A leak holds on; clients come and go — 1,000
	// stations falling back to the WebSocket at once give an ingest 1,000
	// sockets for as long as their uplink is impaired, or the fleet,
	// behind on two shared CPUs, misses acks.
	leakHeldFor = 45 * time.Second
)

// withoutFleet drops the fleet from a sample: it is the stations, not the
// system, and holds a socket for each of its stations on WebSocket
// fallback, as many as the uplink faults leave there.
func withoutFleet(sample map[string]procUsage) map[string]procUsage {
	delete(sample, "fleet")
	return sample
}

// life is one process ID of a named process: a process restarted by its
// supervisor or a fault begins a new life, judged on its own.
type life struct {
	name      string
	pid       int
	firstSeen time.Time
	base      *usage // taken warm after firstSeen
	baseAt    time.Time
	last      usage // the least of the samples within leakHeldFor of the latest
	lastAt    time.Time
	recent    []timedUsage // the samples within leakHeldFor of the latest
}

type timedUsage struct {
	at time.Time
	usage
}

// held is the least of each measure over recent.
func held(recent []timedUsage) usage {
	h := recent[0].usage
	for _, r := range recent[1:] {
		h.fds, h.files, h.rssBytes = min(h.fds, r.fds), min(h.files, r.files), min(h.rssBytes, r.rssBytes)
	}
	return h
}

// lives follows every process life through samples of the topology: each
// gets its baseline once it has run for warm (its servers have opened the
// files and connections of their working set), and is judged by its last
// sample — at the end of the run, or just before it was killed — so that a
// run with many restarts still compares every process with itself.
type lives struct {
	warm  time.Duration
	byKey map[string]*life // name/pid
	order []string
}

func newLives(warm time.Duration) *lives {
	return &lives{warm: warm, byKey: map[string]*life{}}
}

// add records a sample taken at now.
func (l *lives) add(now time.Time, sample map[string]procUsage) {
	for name, u := range sample {
		key := fmt.Sprintf("%s/%d", name, u.pid)
		lf, ok := l.byKey[key]
		if !ok {
			lf = &life{name: name, pid: u.pid, firstSeen: now}
			l.byKey[key] = lf
			l.order = append(l.order, key)
		}
		if lf.base == nil && now.Sub(lf.firstSeen) >= l.warm {
			b := u.usage
			lf.base, lf.baseAt = &b, now
		}
		lf.recent = append(lf.recent, timedUsage{now, u.usage})
		for len(lf.recent) > 1 && now.Sub(lf.recent[0].at) > leakHeldFor {
			lf.recent = lf.recent[1:]
		}
		lf.last, lf.lastAt = held(lf.recent), now
	}
}

// findings judges every life that ran for judgeAfter past its baseline:
// what it held through its last leakHeldFor against the baseline. short counts the lives too short
// to judge (killed before, or started too late in the run).
func (l *lives) findings(judgeAfter time.Duration) (checked, short int, violations []string) {
	for _, key := range l.order {
		lf := l.byKey[key]
		if lf.base == nil || lf.lastAt.Sub(lf.baseAt) < judgeAfter {
			short++
			continue
		}
		checked++
		b, e := lf.base, lf.last
		if lim := int(float64(b.fds)*fdGrowth) + fdSlack; e.fds > lim {
			violations = append(violations, fmt.Sprintf("%s (pid %d) held %d descriptors other than files or more through the %s to %s, %d at %s (limit %d)",
				lf.name, lf.pid, e.fds, leakHeldFor, lf.lastAt.Format(time.TimeOnly), b.fds, lf.baseAt.Format(time.TimeOnly), lim))
		}
		if e.files > maxFiles {
			violations = append(violations, fmt.Sprintf("%s (pid %d) held %d open files at %s (limit %d)", lf.name, lf.pid, e.files, lf.lastAt.Format(time.TimeOnly), maxFiles))
		}
		if lim := int64(float64(b.rssBytes)*rssGrow) + rssSlack; e.rssBytes > lim {
			violations = append(violations, fmt.Sprintf("%s (pid %d) resident memory %d MiB at %s, %d MiB at %s (limit %d MiB)",
				lf.name, lf.pid, e.rssBytes>>20, lf.lastAt.Format(time.TimeOnly), b.rssBytes>>20, lf.baseAt.Format(time.TimeOnly), lim>>20))
		}
	}
	return checked, short, violations
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
	for _, p := range procs {
		u, ok := out[p.Name]
		if !ok {
			continue
		}
		if n, ok := t.clientConns(ctx, p); ok {
			u.fds = max(0, u.fds-n)
			out[p.Name] = u
		}
	}
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

// clientConns is how many connections clients hold open to p's public
// listeners (shindo_connections_open on its admin listener); false when p
// serves no such count.
func (t *topology) clientConns(ctx context.Context, p proc) (int, bool) {
	admin := t.field(p.Site, p.Role, "admin")
	if admin == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "shindo_connections_open "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err == nil
		}
	}
	return 0, false
}

// Package loadtest holds what the load benchmarks that run clients in
// child processes share: the descriptor limit their sockets need, the
// resident memory of the processes they measure, the ticks they publish,
// and quantiles of the latencies they collect.
package loadtest

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RaiseFileLimit lifts this process's RLIMIT_NOFILE to want, or as far as
// it may (above the hard limit needs CAP_SYS_RESOURCE), and returns the
// limit now in force: every client is a descriptor on both sides.
func RaiseFileLimit(want uint64) uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	if lim.Cur >= want {
		return lim.Cur
	}
	try := syscall.Rlimit{Cur: want, Max: max(want, lim.Max)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &try) != nil {
		// Not allowed above the hard limit: as far as it goes, and the
		// limit read back below says what that was.
		try = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &try)
	}
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return lim.Cur
}

// FileLimit is the hard RLIMIT_NOFILE: the most descriptors a process may
// raise its limit to.
func FileLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return lim.Max
}

// RSS is the resident set size of process pid (0: this one) in bytes; 0
// if it cannot be read.
func RSS(pid int) uint64 {
	path := "/proc/self/statm"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/statm", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// Quantile is the q-quantile (0–1) of xs, the nearest sample at or above
// it; 0 for no samples. xs is not changed.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// GoMemory is the Go runtime's memory in use after a collection: heap,
// goroutine stacks and the allocator's own structures.
func GoMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse + m.MSpanInuse + m.MCacheInuse
}

// Ticks is what a child process of clients reports: how many connected,
// every read's latency (publish → read, ms), the latency of the last
// client to read each tick, and the reads that never came.
type Ticks struct {
	Connected  int
	PerClient  []float64
	LastClient []float64
	Missing    int
}

// Collect summarizes latencies by client, then tick (0: never read).
func Collect(lat [][]float64, ticks int) Ticks {
	res := Ticks{Connected: len(lat)}
	for tick := range ticks {
		last := 0.0
		for _, row := range lat {
			l := row[tick]
			if l == 0 {
				res.Missing++
				continue
			}
			res.PerClient = append(res.PerClient, l)
			last = max(last, l)
		}
		res.LastClient = append(res.LastClient, last)
	}
	return res
}

// ParseTick reads the test payload {"seq":S,"t":T} (T: publish time, Unix
// ns) anywhere in msg.
func ParseTick(msg []byte) (seq int, t int64, ok bool) {
	_, rest, found := bytes.Cut(msg, []byte(`{"seq":`))
	if !found {
		return 0, 0, false
	}
	s, rest, _ := bytes.Cut(rest, []byte(`,"t":`))
	v, _, _ := bytes.Cut(rest, []byte("}"))
	n, err1 := strconv.Atoi(string(s))
	tt, err2 := strconv.ParseInt(string(v), 10, 64)
	return n, tt, err1 == nil && err2 == nil && n >= 0 && tt > 0
}

// WarmupTicks are published before a benchmark's recorded ticks and not
// recorded. A client's first event after it connected and idled costs
// more than the steady state — the first write's buffers on both sides,
// the first record of its TLS connection, its reader waking — and a live
// edge's clients meet that once each, at their connects, spread out; a
// benchmark's clients, connected all at once and then left idle while
// memory is measured, would all meet it in the same first tick.
const WarmupTicks = 2

// PublishTicks calls publish for WarmupTicks ticks and then ticks more,
// 500 ms apart, the live rate: k counts them from 0, and payload is the
// tick's {"seq":n,"t":unix ns}, n from -WarmupTicks, so that ParseTick
// refuses the warm-up ticks and numbers the recorded ones from 0.
func PublishTicks(ticks int, publish func(k int, payload []byte)) {
	for k := range WarmupTicks + ticks {
		publish(k, fmt.Appendf(nil, `{"seq":%d,"t":%d}`, k-WarmupTicks, time.Now().UnixNano()))
		//nolint:forbidigo // ticks at the live rate, two a second: the pacing is the load under test
		time.Sleep(500 * time.Millisecond)
	}
}

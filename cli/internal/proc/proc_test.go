package proc

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

func TestStopGraceful(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := Start("sleeper", "/bin/sh", []string{"-c", "echo one; echo $GREETING; exec sleep 60"}, []string{"GREETING=two"}, log)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the second line logged", func() bool { return strings.Contains(p.Tail(5), "two") })
	if !p.Stop(time.Now().Add(5 * time.Second)) {
		t.Fatal("sleep did not stop on SIGTERM")
	}
	if got := p.Tail(1); got != "two" {
		t.Fatalf("tail %q", got)
	}
	if !strings.Contains(p.ExitDescription(), "terminated") {
		t.Fatalf("exit %q", p.ExitDescription())
	}
}

func TestStopKillsStubbornGroup(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "p.log")
	// The shell ignores SIGTERM and has a child: both must go.
	p, err := Start("stubborn", "/bin/sh", []string{"-c", `trap "" TERM; sleep 60 & echo started; wait`}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the process started", func() bool { return strings.Contains(p.Tail(1), "started") })
	if p.Stop(time.Now().Add(300 * time.Millisecond)) {
		t.Fatal("reported a graceful stop")
	}
	poll.Until(t, 5*time.Second, "the process group gone", func() bool { return !groupRunning(p.Pid()) })
}

// groupRunning reports whether any process of group pgid is running;
// zombies awaiting a reaper do not count.
func groupRunning(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// After the parenthesised command: state, ppid, pgrp.
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true
		}
	}
	return false
}

func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := Start("ghost", filepath.Join(t.TempDir(), "nope"), nil, nil, filepath.Join(t.TempDir(), "g.log"))
	if err == nil || !strings.Contains(err.Error(), "start ghost") {
		t.Fatalf("err = %v", err)
	}
}

func TestRestartsBackOffAndGiveUp(t *testing.T) {
	r := DefaultRestarts()
	// A process killed after a long run comes back at once, every time.
	for range 10 {
		if d, giveUp := r.Exited(time.Hour); giveUp || d != r.Initial {
			t.Fatalf("after a healthy run: %v %v", d, giveUp)
		}
	}
	// One that keeps exiting soon after it started waits longer each time,
	// then is given up on.
	var delays []time.Duration
	for {
		d, giveUp := r.Exited(time.Second)
		if giveUp {
			break
		}
		delays = append(delays, d)
		if len(delays) > r.Limit {
			t.Fatalf("not given up on after %d short runs: %v", len(delays), delays)
		}
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	if !slices.Equal(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	// A healthy run forgives the short ones.
	if d, giveUp := r.Exited(r.Healthy); giveUp || d != r.Initial || r.ShortRuns() != 0 {
		t.Fatalf("after a healthy run: %v %v, %d short runs", d, giveUp, r.ShortRuns())
	}
	capped := &Restarts{Initial: time.Second, Max: 3 * time.Second, Healthy: time.Minute, Limit: 100}
	for range 5 {
		capped.Exited(0)
	}
	if d, _ := capped.Exited(0); d != 3*time.Second {
		t.Fatalf("delay %v past the cap", d)
	}
}

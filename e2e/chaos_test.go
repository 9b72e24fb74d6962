package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaos runs `shindo chaos` for SHINDO_CHAOS_DURATION (5m) against the
// full topology — both cores, both edges, etcd at three sites, a fleet
// playing an earthquake halfway through — with every kind of fault in the
// mix, and fails on any violation of the invariants it proves. The report
// is in the log; the JSON one is kept under the test's directory.
func TestChaos(t *testing.T) {
	duration := 5 * time.Minute
	if s := os.Getenv("SHINDO_CHAOS_DURATION"); s != "" {
		var err error
		if duration, err = time.ParseDuration(s); err != nil {
			t.Fatalf("SHINDO_CHAOS_DURATION: %v", err)
		}
	}
	stations := 50
	if s := os.Getenv("SHINDO_CHAOS_STATIONS"); s != "" {
		stations, _ = strconv.Atoi(s)
	}
	d := startDev(t, "-stations", strconv.Itoa(stations), "-scenario", "hualien", "-scenario-in", (duration / 2).String())
	if keep := os.Getenv("SHINDO_CHAOS_KEEP"); keep != "" {
		// The evidence a violation needs beyond the report: every
		// process's log and both cores' tick archives, copied before the
		// topology stops (a cleanup registered after startDev's runs first).
		t.Cleanup(func() { keepEvidence(t, d.dir, keep) })
	}
	report := os.Getenv("SHINDO_CHAOS_REPORT")
	if report == "" {
		report = filepath.Join(d.dir, "chaos-report.json")
	} else if err := os.MkdirAll(filepath.Dir(report), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"chaos", "-dir", d.dir, "-duration", duration.String(), "-report", report}
	if seed := os.Getenv("SHINDO_CHAOS_SEED"); seed != "" {
		args = append(args, "-seed", seed)
	}
	// The faults, then up to a minute of settling and the checks.
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(t), "shindo"), args...)
	var out, log strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &log
	err := cmd.Run()
	stdout := out.String()
	t.Logf("shindo chaos:\n%s", stdout)
	if err != nil {
		t.Fatalf("shindo chaos: %v:\n%s\nits log:\n%s", err, stdout, lastLines(log.String(), 40))
	}
	for _, want := range []string{"faults injected:", "every acknowledged packet is in both archives exactly once", "no violation"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// The leak check compared processes with themselves: a check that
	// compared nothing would prove nothing.
	if m := regexp.MustCompile(`(\d+) process lives compared`).FindStringSubmatch(stdout); m == nil || m[1] == "0" {
		t.Errorf("the leak check compared no process life: %v", m)
	}
	select {
	case <-d.exited:
		t.Fatalf("shindo dev stopped during the run:\n%s", d.stderr.String())
	default:
	}
}

// keepEvidence copies the logs and the RTS tick archives of the topology
// in dir to keep, which must not exist yet.
func keepEvidence(t *testing.T, dir, keep string) {
	archives, _ := filepath.Glob(filepath.Join(dir, "data", "*-rts"))
	for _, src := range append([]string{filepath.Join(dir, "logs")}, archives...) {
		dst := filepath.Join(keep, filepath.Base(src))
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Errorf("keep %s: %v", src, err)
		}
	}
	t.Logf("logs and tick archives kept in %s", keep)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// BenchmarkServingCoreKilled kills every process of TNN-1, the core both
// edges serve from, with SIGKILL from outside — a machine lost, as nobody
// announces it — ten times, while a client follows the RTS stream at
// TPE-1 by the client rules, and reports the longest wait between two
// ticks around each kill (a tick every 500 ms is no gap) and how long
// until every TNN-1 process ran again, restarted by shindo dev's
// supervisor.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench ServingCoreKilled -benchtime 1x
func BenchmarkServingCoreKilled(b *testing.B) {
	const trials = 10
	d := startDev(b, "-stations", "50", "-log-level", "warn")
	tpe, khh := d.endpoints.get(b, "TPE-1", "edge", "http"), d.endpoints.get(b, "KHH-1", "edge", "http")
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := followRTS(ctx, b, tpe, khh)
	moreTicks(b, 10, 30*time.Second, client) // 5 s of ticks: the client follows
	var gaps, backs []float64
	for range trials {
		before := processes(b, control)
		killed := time.Now()
		for name, p := range before {
			if strings.HasPrefix(name, "TNN-1-") && p.PID > 0 {
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		if !poll.Within(time.Until(killed.Add(60*time.Second)), func() bool {
			for name, p := range processes(b, control) {
				if strings.HasPrefix(name, "TNN-1-") && (p.State != "running" || p.PID == before[name].PID) {
					return false
				}
			}
			return true
		}) {
			b.Fatalf("TNN-1 not back within 60 s:\n%s", d.stderr.String())
		}
		back := time.Since(killed)
		// The edges back on TNN-1, the client settled, and the processes
		// running long enough (15 s) for the supervisor to count the next
		// kill as a crash of a healthy process, not a crash loop it would
		// give up on: a span only time fulfils, not a state to wait for.
		time.Sleep(16 * time.Second) //nolint:forbidigo // the supervisor's 15 s of healthy running
		longest, problems := client.check(killed.Add(-time.Second), time.Now())
		if len(problems) > 0 {
			b.Fatalf("ticks out of order: %v", problems)
		}
		gaps = append(gaps, float64(longest.Milliseconds()))
		backs = append(backs, float64(back.Milliseconds()))
	}
	slices.Sort(gaps)
	slices.Sort(backs)
	b.ReportMetric(gaps[len(gaps)/2], "gap-p50-ms")
	b.ReportMetric(gaps[len(gaps)-1], "gap-max-ms")
	b.ReportMetric(backs[len(backs)/2], "back-p50-ms")
	b.ReportMetric(backs[len(backs)-1], "back-max-ms")
	b.Logf("longest wait per trial (ms): %v; TNN-1 running again after (ms): %v", gaps, backs)
}

// BenchmarkPrimaryKilled crashes the metadata database's primary under
// `shindo dev -ha` — its Patroni and its PostgreSQL, SIGKILL from outside —
// ten times while a writer posts reports through an edge without pause, and
// reports how long until a write is acknowledged again. Between trials the
// old primary is restarted by the supervisor and rejoins as the
// synchronous standby.
//
//	make build && cd e2e && SHINDO_BIN=$PWD/../bin go test -run '^$' -bench PrimaryKilled -benchtime 1x
func BenchmarkPrimaryKilled(b *testing.B) {
	const trials = 10
	d := startDev(b, "-ha", "-stations", "1", "-simulate=false", "-log-level", "warn")
	raw, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		b.Fatal(err)
	}
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		b.Fatal(err)
	}
	w := &writer{api: d.endpoints.get(b, "KHH-1", "edge", "http"), token: strings.TrimSpace(string(raw))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	ha := &haCluster{d: d, w: w, rest: map[string]string{}}
	for _, c := range []string{"TNN-1", "TYO-1"} {
		ha.rest[c] = d.endpoints.get(b, c, "patroni", "rest")
	}
	waitLeader := func(within time.Duration) string { return ha.waitLeader(b, "a trial", within, true) }
	var resumed []float64
	for i := range trials {
		lead := waitLeader(90 * time.Second)
		if i > 0 {
			// The restarted member running long enough (15 s) for the
			// supervisor to count the next kill as a crash of a healthy
			// process, not a crash loop it would give up on: a span only
			// time fulfils, not a state to wait for.
			time.Sleep(16 * time.Second) //nolint:forbidigo // the supervisor's 15 s of healthy running
			lead = waitLeader(90 * time.Second)
		}
		ha.writesFlow(b, "a trial")
		raw, err := os.ReadFile(filepath.Join(d.endpoints.get(b, lead, "patroni", "data_dir"), "postmaster.pid"))
		if err != nil {
			b.Fatal(err)
		}
		pg, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
		patroni := processes(b, control)[lead+"-patroni"].PID
		killed := time.Now()
		syscall.Kill(patroni, syscall.SIGKILL)
		syscall.Kill(pg, syscall.SIGKILL)
		if !poll.Within(time.Until(killed.Add(60*time.Second)), func() bool { return w.ackedSince(killed) }) {
			b.Fatalf("no write acknowledged within 60 s of killing the primary %s; shindo dev:\n%s", lead, lastLines(d.stderr.String(), 30))
		}
		resumed = append(resumed, float64(time.Since(killed).Milliseconds()))
	}
	slices.Sort(resumed)
	b.ReportMetric(resumed[len(resumed)/2]/1000, "resume-p50-s")
	b.ReportMetric(resumed[len(resumed)-1]/1000, "resume-max-s")
	b.Logf("writes resumed after (ms): %v; %d writes acknowledged, %d posts failed", resumed, len(w.ackedIDs()), w.fails)
}

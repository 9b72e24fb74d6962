package chaoscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The kinds of fault, as -mix names them.
const (
	kindKill      = "kill"      // SIGKILL from outside of any process but the fleet
	kindPartition = "partition" // the link between the cores cut, then healed
	kindUplink    = "uplink"    // a loss burst, or a cut, on one uplink
	kindDB        = "db"        // SIGKILL of the metadata database's primary
	kindEtcd      = "etcd"      // one quorum member down for a while
	kindEdge      = "edge"      // one edge down for a while
)

var allKinds = []string{kindKill, kindPartition, kindUplink, kindDB, kindEtcd, kindEdge}

// parseMix reads "kill=4,partition=1,…" into weights; a kind left out is
// never injected.
func parseMix(s string) (map[string]int, error) {
	mix := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("mix %q: want KIND=WEIGHT with a weight 0–1000", part)
		}
		if !slices.Contains(allKinds, name) {
			return nil, fmt.Errorf("mix: unknown fault %q; kinds are %s", name, strings.Join(allKinds, ", "))
		}
		mix[name] = n
	}
	total := 0
	for _, n := range mix {
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("mix %q has no fault with a weight above 0", s)
	}
	return mix, nil
}

// faultRecord is one injected fault, for the report and for judging what
// the checkers saw while it lasted.
type faultRecord struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	Action string    `json:"action"`
	At     time.Time `json:"at"`
	// Hold is how long the fault lasted before it was undone (0 for a
	// kill, which the supervisor undoes).
	Hold time.Duration `json:"hold_ns"`
	// Recovered is how long after At every process ran again.
	Recovered time.Duration `json:"recovered_ns"`
	// Error says why the fault could not be injected or undone.
	Error string `json:"error,omitempty"`
	// Unrecovered says what was still down when the recovery wait ended.
	Unrecovered string `json:"unrecovered,omitempty"`
	// Until is when the topology had recovered (or gave up waiting).
	Until time.Time `json:"until"`
	// killed is the process ID a kill ended: recovered means another runs.
	killed int
}

// injector injects faults of the mix one at a time, each undone and
// recovered from before the next.
type injector struct {
	topo     *topology
	mix      map[string]int
	rng      *rand.Rand
	every    time.Duration
	hold     time.Duration
	recovery time.Duration
	log      *slog.Logger
	// sight tells which core's RTS does not see the fleet: running and
	// ready is not whole for a core that sees no station.
	sight interface{ blind(since time.Time) string }

	mu     sync.Mutex
	faults []faultRecord
}

func (in *injector) records() []faultRecord {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.faults)
}

// run injects until ctx ends or until; the last fault is always undone.
func (in *injector) run(ctx context.Context, until time.Time) {
	kinds := make([]string, 0, len(in.mix))
	for k := range in.mix {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds) // a seed gives the same sequence every run
	for {
		wait := in.every/2 + time.Duration(in.rng.Int64N(int64(in.every)+1))
		if time.Now().Add(wait).After(until) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		kind := in.pick(kinds)
		rec := in.inject(ctx, kind)
		in.mu.Lock()
		in.faults = append(in.faults, rec)
		in.mu.Unlock()
		attrs := []any{slog.String("kind", rec.Kind), slog.String("target", rec.Target), slog.String("action", rec.Action),
			slog.Duration("hold", rec.Hold), slog.Duration("recovered", rec.Recovered.Round(time.Millisecond))}
		if rec.Error != "" || rec.Unrecovered != "" {
			in.log.Warn("fault", append(attrs, slog.String("error", rec.Error), slog.String("unrecovered", rec.Unrecovered))...)
		} else {
			in.log.Info("fault", attrs...)
		}
	}
}

func (in *injector) pick(kinds []string) string {
	total := 0
	for _, k := range kinds {
		total += in.mix[k]
	}
	r := in.rng.IntN(total)
	for _, k := range kinds {
		if r < in.mix[k] {
			return k
		}
		r -= in.mix[k]
	}
	return kinds[len(kinds)-1]
}

// holdFor is a random hold between a quarter of -hold and -hold.
func (in *injector) holdFor() time.Duration {
	return in.hold/4 + time.Duration(in.rng.Int64N(int64(in.hold*3/4)+1))
}

func (in *injector) inject(ctx context.Context, kind string) faultRecord {
	rec := faultRecord{Kind: kind, At: time.Now()}
	err := func() error {
		procs, err := in.topo.processes(ctx)
		if err != nil {
			return err
		}
		switch kind {
		case kindKill:
			var cands []proc
			for _, p := range procs {
				if p.Role != "fleet" && p.State == "running" && p.PID > 0 {
					cands = append(cands, p)
				}
			}
			if len(cands) == 0 {
				return fmt.Errorf("no running process to kill")
			}
			p := cands[in.rng.IntN(len(cands))]
			rec.Target, rec.Action, rec.killed = p.Name, "SIGKILL from outside", p.PID
			return syscall.Kill(p.PID, syscall.SIGKILL)
		case kindDB:
			return in.killDatabase(ctx, &rec, procs)
		case kindPartition:
			rec.Target, rec.Action = "TNN-1↔TYO-1", "partition"
			if err := in.topo.act(ctx, "/v1/intersite/partition"); err != nil {
				return err
			}
			rec.Hold = in.sleep(ctx)
			return in.topo.act(context.WithoutCancel(ctx), "/v1/intersite/heal")
		case kindUplink:
			links := in.topo.links(ctx)
			if len(links) == 0 {
				return fmt.Errorf("this shindo dev has no impairable uplinks")
			}
			rec.Target = links[in.rng.IntN(len(links))]
			path := linkPath(rec.Target, "cut", "")
			rec.Action = "cut"
			if in.rng.IntN(2) == 0 {
				rec.Action, path = "degrade typhoon", linkPath(rec.Target, "degrade", "typhoon")
			}
			if err := in.topo.act(ctx, path); err != nil {
				return err
			}
			rec.Hold = in.sleep(ctx)
			return in.topo.act(context.WithoutCancel(ctx), linkPath(rec.Target, "heal", ""))
		case kindEtcd, kindEdge:
			role := map[string]string{kindEtcd: "etcd", kindEdge: "edge"}[kind]
			var cands []string
			for _, p := range procs {
				if p.Role == role {
					cands = append(cands, p.Name)
				}
			}
			if len(cands) == 0 {
				return fmt.Errorf("no %s process", role)
			}
			rec.Target = cands[in.rng.IntN(len(cands))]
			rec.Action = "stop"
			if in.rng.IntN(2) == 0 {
				rec.Action = "kill"
			}
			if err := in.topo.act(ctx, "/v1/processes/"+rec.Target+"/"+rec.Action); err != nil {
				return err
			}
			rec.Hold = in.sleep(ctx)
			return in.topo.act(context.WithoutCancel(ctx), "/v1/processes/"+rec.Target+"/start")
		}
		return fmt.Errorf("unknown fault %q", kind)
	}()
	if err != nil {
		rec.Error = err.Error()
	}
	if ctx.Err() != nil {
		// The fault is undone even when interrupted, so that chaos leaves
		// a whole topology behind; a second interrupt leaves at once
		// (service.SignalContext).
		in.log.Warn("chaos: interrupted; waiting for the topology to be whole again (interrupt again to leave it as it is)",
			slog.String("fault", kind), slog.String("target", rec.Target), slog.Duration("up_to", in.recovery))
	}
	if werr := in.awaitRecovery(context.WithoutCancel(ctx), &rec); werr != nil {
		rec.Unrecovered = werr.Error()
	}
	rec.Until = time.Now()
	rec.Recovered = rec.Until.Sub(rec.At)
	return rec
}

// sleep holds a fault for a random while, cut short when ctx ends.
func (in *injector) sleep(ctx context.Context) time.Duration {
	d := in.holdFor()
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return time.Since(start)
}

// killDatabase kills the metadata database's primary from outside: the dev
// database's postmaster, or with -ha the Patroni leader and its PostgreSQL
// (a machine that dies takes both).
func (in *injector) killDatabase(ctx context.Context, rec *faultRecord, procs []proc) error {
	rec.Action = "SIGKILL from outside"
	if !in.topo.ha {
		if err := in.topo.reload(); err != nil {
			return err
		}
		pid := in.topo.databasePID()
		if pid == 0 {
			return fmt.Errorf("the dev database has no process ID")
		}
		rec.Target, rec.killed = "TNN-1-postgres", pid
		return syscall.Kill(pid, syscall.SIGKILL)
	}
	leader, err := in.topo.patroniLeader(ctx)
	if err != nil {
		return err
	}
	rec.Target = leader + "-patroni"
	for _, p := range procs {
		if p.Name == rec.Target && p.PID > 0 {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	if dir := in.topo.field(leader, "patroni", "data_dir"); dir != "" {
		if pid := postmasterPID(dir); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// postmasterPID reads the process ID on the first line of a data
// directory's postmaster.pid (0 if none).
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// patroniLeader asks the members' REST APIs which site leads.
func (t *topology) patroniLeader(ctx context.Context) (string, error) {
	for _, site := range coreSites {
		rest := t.field(site, "patroni", "rest")
		if rest == "" {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rest+"/cluster", nil)
		resp, err := t.http.Do(req)
		if err != nil {
			continue
		}
		var doc struct {
			Members []struct{ Name, Role, State string }
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, m := range doc.Members {
			if m.Role == "leader" {
				return m.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no Patroni member names a leader")
}

// awaitRecovery waits until every process runs again with the database
// up, after the fault was undone.
func (in *injector) awaitRecovery(ctx context.Context, rec *faultRecord) error {
	deadline := time.Now().Add(in.recovery)
	var last string
	for {
		last = in.healthy(ctx, rec)
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not recovered within %s: %s", in.recovery, last)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// healthy returns what is still down or blind, or "".
func (in *injector) healthy(ctx context.Context, rec *faultRecord) string {
	procs, err := in.topo.processes(ctx)
	if err != nil {
		return err.Error()
	}
	if err := in.topo.reload(); err != nil {
		return err.Error()
	}
	for _, p := range procs {
		if p.Name == rec.Target && p.PID == rec.killed {
			return p.Name + " not restarted yet"
		}
		if p.State != "running" || p.PID == 0 {
			return p.Name + " " + p.State
		}
		// Running is not ready: endpoints.json names a restarted
		// process once it is.
		if p.Role != "fleet" && in.topo.field(p.Site, p.Role, "pid") != strconv.Itoa(p.PID) {
			return p.Name + " not ready"
		}
	}
	if pid := in.topo.databasePID(); !in.topo.ha && (pid == 0 || pid == rec.killed) {
		return "the dev database"
	}
	if in.topo.ha {
		if _, err := in.topo.patroniLeader(ctx); err != nil {
			return err.Error()
		}
	}
	if in.sight != nil {
		return in.sight.blind(rec.At)
	}
	return ""
}

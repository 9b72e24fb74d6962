// Package chaoscmd implements `shindo chaos`: for a given duration it
// injects random faults from a declared mix into a running `shindo dev` —
// SIGKILL from outside of any process, the cores partitioned, loss bursts
// and cuts on an uplink, the database primary killed, a quorum member or
// an edge down — one at a time, each undone and recovered from before the
// next, while checkers watch the system as its users would. At the end it
// proves the invariants of SPEC §8 and prints a report: the faults
// injected, what each invariant checked, and every violation with its
// evidence. It exits 1 on a violation.
//
// The invariants:
//   - the topology is whole again after every fault: every process runs
//     and is ready, and each core's RTS lists the fleet (a restarted RTS
//     that serves but sees no station is not whole);
//   - every packet a core acknowledged to a station is in both cores'
//     archives exactly once, with its values (witness stations of the
//     run's own, cli/internal/witness);
//   - detections get the same ID at both cores, and no earthquake reaches
//     a client twice under two IDs or with its serial going back;
//   - a detection a core's stream listed as final never changes again in
//     that stream;
//   - every notification accepted is delivered, and never again once its
//     ack was accepted;
//   - clients following the client rules at each edge miss no tick, and
//     wait for one no longer than the documented bound;
//   - no process life (a process ID, between restarts) leaked descriptors
//     or memory against its own baseline.
package chaoscmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"
)

const usageText = `Usage: shindo chaos [flags]

Injects random faults into the running shindo dev of -dir for -duration,
checks the invariants throughout, and prints a report. Exits 1 when an
invariant was violated.

Fault kinds for -mix: kill (SIGKILL from outside of any process but the
fleet), partition (the cores cut from each other), uplink (a cut or a
typhoon loss burst on one uplink), db (the database primary killed), etcd
(one quorum member down), edge (one edge down).

Flags:
`

type config struct {
	dir      string
	duration time.Duration
	seed     uint64
	mix      map[string]int
	every    time.Duration
	hold     time.Duration
	recovery time.Duration
	settle   time.Duration
	report   string
	witness  int
}

// Main runs `shindo chaos` with args (after "chaos").
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shindo chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var mix string
	fs.StringVar(&cfg.dir, "dir", "var/dev", "directory of the running shindo dev (its -dir)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Minute, "how long to inject faults")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed of the fault sequence; 0 picks one (printed, to replay a run)")
	fs.StringVar(&mix, "mix", "kill=6,partition=2,uplink=2,db=1,etcd=1,edge=2", "fault kinds and their weights")
	fs.DurationVar(&cfg.every, "every", 15*time.Second, "mean time between the end of one fault and the next")
	fs.DurationVar(&cfg.hold, "hold", 12*time.Second, "longest a fault that is undone (partition, uplink, etcd, edge) lasts; the shortest is a quarter of it")
	fs.DurationVar(&cfg.recovery, "recovery", 90*time.Second, "longest the topology may take to run whole again after a fault")
	fs.DurationVar(&cfg.settle, "settle", time.Minute, "longest to wait after the last fault for archives and notifications to catch up")
	fs.IntVar(&cfg.witness, "witness-stations", 3, "stations of the run's own whose every acknowledged packet is looked for in both archives")
	fs.StringVar(&cfg.report, "report", "", "also write the report as JSON to this file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var err error
	if cfg.mix, err = parseMix(mix); err != nil {
		fmt.Fprintf(stderr, "shindo chaos: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shindo chaos: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	switch {
	case cfg.duration < 10*time.Second || cfg.duration > 24*time.Hour:
		err = errors.New("duration must be between 10s and 24h")
	case cfg.every < time.Second, cfg.hold < time.Second, cfg.recovery < 10*time.Second, cfg.settle < 0:
		err = errors.New("every and hold must be at least 1s, recovery at least 10s, settle not negative")
	case cfg.witness < 1 || cfg.witness > 100:
		err = errors.New("witness-stations must be between 1 and 100")
	}
	if err != nil {
		fmt.Fprintf(stderr, "shindo chaos: %v\n", err)
		return 2
	}
	if cfg.seed == 0 {
		cfg.seed = rand.Uint64()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := run(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "shindo chaos: %v\n", err)
		return 1
	}
	rep.print(stdout)
	if cfg.report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(cfg.report, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "shindo chaos: %v\n", err)
			return 1
		}
	}
	if rep.Violations > 0 {
		return 1
	}
	return 0
}

// report is what `shindo chaos` found.
type report struct {
	Seed    uint64         `json:"seed"`
	Started time.Time      `json:"started"`
	Ended   time.Time      `json:"ended"`
	Mix     map[string]int `json:"mix"`
	Faults  []faultRecord  `json:"faults"`
	// Machine lists what happened to the machine rather than to the
	// system: stalls of the checker itself, steps of the wall clock.
	Machine    []machineEvent `json:"machine"`
	Checks     []check        `json:"checks"`
	Violations int            `json:"violations"`
}

// check is one invariant: what it looked at, and what broke it.
type check struct {
	Invariant  string   `json:"invariant"`
	Checked    string   `json:"checked"`
	Violations []string `json:"violations"`
}

func (r *report) add(invariant, checked string, violations []string) {
	r.Checks = append(r.Checks, check{Invariant: invariant, Checked: checked, Violations: violations})
	r.Violations += len(violations)
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "shindo chaos: %s from %s, seed %d\n", r.Ended.Sub(r.Started).Round(time.Second), r.Started.Format(time.DateTime), r.Seed)
	byKind := map[string]int{}
	failed := 0
	for _, f := range r.Faults {
		byKind[f.Kind]++
		if f.Error != "" {
			failed++
		}
	}
	var kinds []string
	for k, n := range byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\nfaults injected: %d (%s)\n", len(r.Faults), strings.Join(kinds, ", "))
	for _, f := range r.Faults {
		line := fmt.Sprintf("  %s  %-9s %-22s %-22s", f.At.Format(time.TimeOnly), f.Kind, f.Target, f.Action)
		if f.Hold > 0 {
			line += fmt.Sprintf(" held %s,", f.Hold.Round(100*time.Millisecond))
		}
		line += fmt.Sprintf(" whole again after %s", f.Recovered.Round(100*time.Millisecond))
		if f.Error != "" {
			line += "  not injected: " + f.Error
		}
		if f.Unrecovered != "" {
			line += "  NOT RECOVERED: " + f.Unrecovered
		}
		fmt.Fprintln(w, line)
	}
	if len(r.Machine) > 0 {
		fmt.Fprintln(w, "\nmachine events (the machine's, not the system's: what clients missed during them is excused):")
		for _, e := range r.Machine {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintln(w, "\ninvariants:")
	for _, c := range r.Checks {
		state := "ok"
		if len(c.Violations) > 0 {
			state = fmt.Sprintf("VIOLATED (%d)", len(c.Violations))
		}
		fmt.Fprintf(w, "  %-4s %s — %s\n", state, c.Invariant, c.Checked)
		for _, v := range c.Violations {
			fmt.Fprintf(w, "         %s\n", v)
		}
	}
	if r.Violations == 0 {
		fmt.Fprintf(w, "\nno violation (%d faults, %d of them could not be injected)\n", len(r.Faults), failed)
	} else {
		fmt.Fprintf(w, "\n%d violations\n", r.Violations)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) (*report, error) {
	topo, err := attach(cfg.dir)
	if err != nil {
		return nil, err
	}
	procs, err := topo.processes(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		if p.State != "running" {
			return nil, fmt.Errorf("%s is %s: chaos starts from a whole topology", p.Name, p.State)
		}
	}
	rep := &report{Seed: cfg.seed, Started: time.Now(), Mix: cfg.mix}
	log.Info("chaos: attached", slog.String("dir", cfg.dir), slog.Int("processes", len(procs)), slog.Bool("ha", topo.ha),
		slog.Uint64("seed", cfg.seed), slog.Duration("duration", cfg.duration))

	// Readers outlive the faults by the settle time.
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	edges := map[string]string{}
	for i, site := range edgeSites {
		edges[site] = topo.edges()[i]
	}
	machine := watchMachine(readCtx)
	followers := []*follower{
		follow(readCtx, topo, "client entering at TPE-1", []string{edges["TPE-1"], edges["KHH-1"]}, edges),
		follow(readCtx, topo, "client entering at KHH-1", []string{edges["KHH-1"], edges["TPE-1"]}, edges),
	}
	dets := watchDetections(readCtx, topo)
	wit, err := startWitness(readCtx, topo, cfg.witness, log)
	if err != nil {
		return nil, err
	}
	notes := newNotifier(topo, 2*time.Second)
	postCtx, stopPosting := context.WithCancel(ctx)
	defer stopPosting()
	notes.run(postCtx, readCtx)

	if err := sleep(ctx, 5*time.Second); err != nil { // the readers are in
		return nil, err
	}
	checkFrom := time.Now()

	// Every process life is sampled through the run (lives): its baseline
	// once it has run for a third of the run, at most two minutes, and its
	// last sample judged against it.
	procLives := newLives(min(cfg.duration/3, 2*time.Minute))
	sampleCtx, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			procLives.add(time.Now(), withoutFleet(topo.usage(sampleCtx)))
			select {
			case <-sampleCtx.Done():
				return
			case <-time.After(leakSampleEvery):
			}
		}
	}()
	defer func() { stopSampling(); <-sampled }()
	in := &injector{topo: topo, mix: cfg.mix, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed)), every: cfg.every,
		hold: cfg.hold, recovery: cfg.recovery, log: log, sight: dets}
	in.run(ctx, checkFrom.Add(cfg.duration))
	rep.Faults = in.records()
	stopPosting()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	log.Info("chaos: faults over; letting the system settle", slog.Int("faults", len(rep.Faults)), slog.Duration("up_to", cfg.settle))
	// Tick continuity is judged up to here; what follows is catching up.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	checkTo := time.Now()
	settleCtx, cancel := context.WithTimeout(ctx, cfg.settle)
	defer cancel()
	wit.Stop()
	notes.waitDelivered(settleCtx)
	witRep := wit.Verify(settleCtx, cfg.settle)

	procs, err = topo.processes(ctx)
	if err != nil {
		return nil, err
	}
	stopSampling()
	<-sampled
	procLives.add(time.Now(), withoutFleet(topo.usage(ctx)))
	stopReading()
	rep.Ended = time.Now()

	// The invariants.
	var unrecovered []string
	for _, f := range rep.Faults {
		if f.Unrecovered != "" {
			unrecovered = append(unrecovered, fmt.Sprintf("after %s %s at %s: %s", f.Kind, f.Target, f.At.Format(time.TimeOnly), f.Unrecovered))
		}
	}
	rep.add("the topology is whole again after every fault", fmt.Sprintf("%d faults, recovery bound %s", len(rep.Faults), cfg.recovery), unrecovered)
	rep.add("every acknowledged packet is in both archives exactly once", witRep.summary(), witRep.violations())
	ids, unverifiable, v := dets.findings(checkTo)
	rep.add("detections have the same IDs on both cores", fmt.Sprintf("%d detection IDs, %d published while the other core's stream was down", ids, unverifiable), v)
	finals, v := dets.reopened()
	rep.add("a final detection never changes again", fmt.Sprintf("%d final detections followed at the cores", finals), v)
	rep.Machine = machine.list()
	var streamV []string
	var summary []string
	for _, f := range followers {
		n, longest, excused, v := f.findings(checkFrom, checkTo, rep.Faults, rep.Machine)
		streamV = append(streamV, v...)
		line := fmt.Sprintf("%s: %d ticks, longest wait %s, %d alert lists", f.name, n, longest.Round(time.Millisecond), f.eewSeen)
		if excused > 0 {
			line += fmt.Sprintf(", %d ticks missed while the machine stalled (not counted)", excused)
		}
		summary = append(summary, line)
	}
	rep.add("clients following the client rules miss no tick, wait within the bound, see each earthquake once", strings.Join(summary, "; "), streamV)
	accepted, redelivered, postFails, v := notes.findings()
	rep.add("notifications are delivered exactly once", fmt.Sprintf("%d accepted (%d posts refused and retried), %d delivered again before their ack took", accepted, postFails, redelivered), v)
	checked, short, v := procLives.findings(leakJudgeAfter)
	var after []string
	for _, p := range procs {
		if p.State != "running" {
			after = append(after, fmt.Sprintf("%s is %s at the end", p.Name, p.State))
		}
	}
	rep.add("no process leaked descriptors or memory; every process runs at the end",
		fmt.Sprintf("%d process lives compared with themselves (baseline after %s, judged at least %s later), %d too short to judge",
			checked, procLives.warm, leakJudgeAfter, short), append(v, after...))
	return rep, nil
}

// sleep waits for d, or returns ctx's error if it ends first: an
// interrupted run stops at once, not after a pause.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

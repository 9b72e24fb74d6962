package chaoscmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"math/rand/v2"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func TestParseMix(t *testing.T) {
	mix, err := parseMix("kill=6, partition=2,edge=0")
	if err != nil || mix[kindKill] != 6 || mix[kindPartition] != 2 || mix[kindEdge] != 0 || len(mix) != 3 {
		t.Fatalf("mix %v, %v", mix, err)
	}
	for _, bad := range []string{"", "kill", "kill=x", "kill=-1", "kill=1001", "quake=1", "kill=0,edge=0"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("mix %q accepted", bad)
		}
	}
}

func TestPickFollowsTheMixAndTheSeed(t *testing.T) {
	in := &injector{mix: map[string]int{kindKill: 3, kindEdge: 1, kindDB: 0}, rng: rand.New(rand.NewPCG(1, 2))}
	kinds := []string{kindDB, kindEdge, kindKill}
	counts := map[string]int{}
	var seq []string
	for range 4000 {
		k := in.pick(kinds)
		counts[k]++
		seq = append(seq, k)
	}
	if counts[kindDB] != 0 || counts[kindKill] < 2800 || counts[kindKill] > 3200 {
		t.Fatalf("picks %v for weights kill 3, edge 1, db 0", counts)
	}
	again := &injector{mix: in.mix, rng: rand.New(rand.NewPCG(1, 2))}
	for i := range seq {
		if k := again.pick(kinds); k != seq[i] {
			t.Fatalf("the same seed picked %s then %s at %d", seq[i], k, i)
		}
	}
}

// TestFollowerFindings: missed and repeated ticks, a wait over the bound
// (with the fault in effect as evidence) and a longer wait while the
// client's own edge was down, which is within its bound.
func TestFollowerFindings(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	edges := map[string]string{"TPE-1": "http://tpe", "KHH-1": "http://khh"}
	f := &follower{name: "c", edges: edges, alerts: map[string]uint32{}}
	add := func(tick int64, after time.Duration, entry string) {
		f.ticks = append(f.ticks, tick)
		f.at = append(f.at, t0.Add(after))
		f.entry = append(f.entry, entry)
	}
	add(500, 0, "http://tpe")
	add(1000, 500*time.Millisecond, "http://tpe")
	add(1500, 10*time.Second, "http://khh") // TPE-1 was down: within 16 s
	add(2500, 10500*time.Millisecond, "http://khh")
	add(2500, 11*time.Second, "http://khh")
	add(3000, 14*time.Second, "http://khh") // 3 s with nothing but a kill elsewhere
	faults := []faultRecord{
		{Kind: kindEdge, Target: "TPE-1-edge", Action: "kill", At: t0.Add(time.Second), Until: t0.Add(9 * time.Second)},
		{Kind: kindKill, Target: "TNN-1-rts", Action: "SIGKILL from outside", At: t0.Add(11500 * time.Millisecond), Until: t0.Add(12 * time.Second)},
	}
	checked, longest, _, v := f.findings(t0, t0.Add(14*time.Second), faults, nil)
	if checked != 5 || longest != 9500*time.Millisecond {
		t.Fatalf("checked %d, longest %s", checked, longest)
	}
	joined := strings.Join(v, "\n")
	for _, want := range []string{"waited 3s for tick 3000 (bound 2s)", "kill TNN-1-rts", "missed ticks: 1 ticks after 1500", "got ticks again or out of order: tick 2500 after 2500"} {
		if !strings.Contains(joined, want) {
			t.Errorf("findings lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "tick 1500") && strings.Contains(joined, "waited 9.5s") {
		t.Errorf("the wait while the client's own edge was down was judged by the 2 s bound:\n%s", joined)
	}
}

// TestMachineEvents: a wake-up seconds late is a stall, a wall clock that
// moved unlike the monotonic one a step; the ticks a client misses during
// either (and up to the slack after) are excused and counted, those
// outside are violations.
func TestMachineEvents(t *testing.T) {
	t0 := time.UnixMilli(1_796_151_614_000)
	w := &machineWatch{}
	w.observe(t0, t0.Add(120*time.Millisecond), 120*time.Millisecond)           // busy, not stalled
	w.observe(t0, t0.Add(21500*time.Millisecond), 21500*time.Millisecond)       // stalled
	w.observe(t0.Add(time.Minute), t0.Add(81*time.Second), 99*time.Millisecond) // stepped
	ev := w.list()
	if len(ev) != 2 || ev[0].Stalled != 21400*time.Millisecond || ev[0].Stepped != 0 || ev[1].Stepped < 20*time.Second || ev[1].Stalled != 0 {
		t.Fatalf("events %+v", ev)
	}
	for _, e := range ev {
		if e.String() == "" {
			t.Fatal("an event without a description")
		}
	}
	f := &follower{name: "c", alerts: map[string]uint32{}}
	add := func(tick int64) {
		f.ticks = append(f.ticks, tick)
		f.at = append(f.at, time.UnixMilli(tick).Add(100*time.Millisecond))
		f.entry = append(f.entry, "http://tpe")
	}
	base := t0.UnixMilli()
	add(base - 500)
	add(base + 21_500) // 43 ticks missed in the stall
	for tick := base + 22_000; tick <= base+30_000; tick += 500 {
		add(tick)
	}
	add(base + 50_000) // 39 missed, nothing happened to the machine
	_, _, excused, v := f.findings(t0.Add(-time.Second), t0.Add(50*time.Second), nil, ev)
	if joined := strings.Join(v, "\n"); excused != 43 || len(v) != 2 || !strings.Contains(joined, "39 ticks after") || !strings.Contains(joined, "waited 20s") {
		t.Fatalf("excused %d, violations %v", excused, v)
	}
}

func TestAlertChecks(t *testing.T) {
	f := &follower{name: "c", alerts: map[string]uint32{}}
	f.checkAlerts(1, `[{"id":"A","serial":2,"eq":{"time":1000,"lat":23.9,"lon":121.6}}]`)
	f.checkAlerts(2, `[{"id":"A","serial":1,"eq":{"time":1000,"lat":23.9,"lon":121.6}},{"id":"B","serial":1,"eq":{"time":3000,"lat":23.95,"lon":121.62}}]`)
	f.checkAlerts(3, `not json`)
	joined := strings.Join(f.problems, "\n")
	for _, want := range []string{"went from serial 2 back to 1", "one earthquake under two IDs at tick 2: A and B", "not JSON"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

// TestLives: every process life is judged against its own baseline — one
// that leaked before it was killed included — and lives too short to judge
// are counted, not compared.
func TestLives(t *testing.T) {
	l := newLives(2 * time.Minute)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sample := func(min int, procs map[string]procUsage) { l.add(at.Add(time.Duration(min)*time.Minute), procs) }
	u := func(pid, fds, files, mib int) procUsage {
		return procUsage{pid: pid, usage: usage{fds: fds, files: files, rssBytes: int64(mib) << 20}}
	}
	sample(0, map[string]procUsage{"a": u(1, 100, 0, 100), "b": u(2, 10, 0, 10), "c": u(3, 10, 0, 10)})
	sample(2, map[string]procUsage{"a": u(1, 100, 0, 100), "b": u(2, 10, 0, 10), "c": u(3, 10, 0, 10)}) // baselines
	// c leaks sockets, then is killed and restarted as pid 9, which holds
	// a lot from its start: its baseline is its own.
	sample(5, map[string]procUsage{"a": u(1, 150, 900, 110), "b": u(2, 70, 0, 500), "c": u(3, 400, 0, 10)})
	sample(6, map[string]procUsage{"a": u(1, 150, 900, 110), "b": u(2, 70, 0, 500), "c": u(9, 900, 0, 900)})
	sample(9, map[string]procUsage{"a": u(1, 300, 1000, 120), "b": u(2, 70, 0, 500), "c": u(9, 900, 0, 900), "d": u(4, 1, 0, 1)})
	sample(10, map[string]procUsage{"a": u(1, 300, 1000, 120), "b": u(2, 70, 0, 500), "c": u(9, 950, 0, 950), "d": u(4, 1, 0, 1)})
	checked, short, v := l.findings(time.Minute)
	joined := strings.Join(v, "\n")
	// a: 300 > 1.5×100+64; files within the cache bound. b: memory. c pid
	// 3: sockets before it was killed. c pid 9: within its own baseline.
	// d: too short.
	if checked != 4 || short != 1 || len(v) != 3 {
		t.Fatalf("checked %d, short %d, violations:\n%s", checked, short, joined)
	}
	for _, want := range []string{"a (pid 1) held 300 descriptors", "b (pid 2) resident memory 500 MiB", "c (pid 3) held 400 descriptors"} {
		if !strings.Contains(joined, want) {
			t.Errorf("violations lack %q:\n%s", want, joined)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-mix", "nope=1"}, {"-duration", "1s"}, {"-witness-stations", "0"}, {"extra"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-dir", t.TempDir()}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no running shindo dev") {
		t.Errorf("no shindo dev: exit %d, %q", code, errb.String())
	}
}

// TestLivesJudgeWhatIsHeld: a process whose last sample has the sockets
// of a thousand clients that just connected is not a leak; one that held
// them through its last leakHeldFor is.
func TestLivesJudgeWhatIsHeld(t *testing.T) {
	l := newLives(time.Minute)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	u := func(fds int) procUsage { return procUsage{pid: 1, usage: usage{fds: fds, rssBytes: 100 << 20}} }
	for s := 0; s <= 180; s += 10 {
		fds := 20
		if s == 180 {
			fds = 1020 // the stations fell back to the WebSocket
		}
		l.add(at.Add(time.Duration(s)*time.Second), map[string]procUsage{"ingest": u(fds)})
	}
	if checked, _, v := l.findings(time.Minute); checked != 1 || len(v) != 0 {
		t.Fatalf("a moment's clients judged a leak: checked %d, %v", checked, v)
	}
	for s := 190; s <= 240; s += 10 {
		l.add(at.Add(time.Duration(s)*time.Second), map[string]procUsage{"ingest": u(1020)})
	}
	if _, _, v := l.findings(time.Minute); len(v) != 1 || !strings.Contains(v[0], "held 1020 descriptors") {
		t.Fatalf("sockets held for a minute not judged a leak: %v", v)
	}
}

// TestDetectionChecks: a final detection that a core's stream lists again
// open, or final with other content, is a violation, once; a core whose
// latest snapshot is stale or lists too few of the fleet is blind.
func TestDetectionChecks(t *testing.T) {
	w := &coreWatch{finals: map[string]*rtsv1.Detection{}}
	open := &rtsv1.Detection{Id: "1-18", Serial: 14, UpdatedMs: 1_000}
	final := &rtsv1.Detection{Id: "1-18", Serial: 15, Final: true, UpdatedMs: 1_500}
	w.checkFinal(open, 1_000)
	w.checkFinal(final, 1_500)
	w.checkFinal(final, 2_000)
	if len(w.changed) != 0 || w.finalsSeen != 1 {
		t.Fatalf("changed %q, finals %d: want none changed, one final", w.changed, w.finalsSeen)
	}
	w.checkFinal(open, 2_500)
	w.checkFinal(open, 3_000)
	if len(w.changed) != 1 || !strings.Contains(w.changed[0], "final at serial 15") || !strings.Contains(w.changed[0], "then serial 14 final false") {
		t.Fatalf("changed %q, want the reopening once", w.changed)
	}

	d := &detections{cores: map[string]*coreWatch{}, most: 1000}
	for _, site := range coreSites {
		d.cores[site] = &coreWatch{latestAt: time.Now(), stations: 990}
	}
	fault := time.Now().Add(-time.Second)
	if b := d.blind(fault); b != "" {
		t.Fatalf("both cores see 990 of 1000: blind %q", b)
	}
	if b := d.blind(time.Now()); !strings.Contains(b, "no snapshot since the fault") {
		t.Fatalf("no snapshot since the fault began: blind %q", b)
	}
	d.cores[coreSites[1]].stations = 0
	if b := d.blind(fault); !strings.Contains(b, "lists 0 of the 1000") {
		t.Fatalf("a core listing no station: blind %q", b)
	}
	d.cores[coreSites[1]].stations = 1000
	d.cores[coreSites[0]].latestAt = time.Now().Add(-5 * time.Second)
	if b := d.blind(time.Now().Add(-time.Minute)); !strings.Contains(b, "no snapshot for") {
		t.Fatalf("a core silent for 5 s: blind %q", b)
	}
}

// An interrupted chaos run stops its pauses at once (the second Ctrl-C is
// for a process that does not).
func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("sleep: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("sleep took %s after its context ended", d)
	}
	if err := sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("sleep: %v", err)
	}
}

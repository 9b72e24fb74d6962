package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
)

// writer posts earthquake reports through the data API as fast as it gets
// answers, remembering every one whose POST succeeded: those are
// acknowledged writes.
type writer struct {
	t     *testing.T
	api   string
	token string
	// client reaches the edge (and, under -tls, as the operator).
	client *http.Client

	mu    sync.Mutex
	acked []string
	last  time.Time // when the newest acknowledged write was sent
	fails int
}

func (w *writer) run(ctx context.Context) {
	client := w.client
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("ha-%05d", n)
		body := fmt.Sprintf(`{"id":%q,"time_ms":%d,"lat":23.8,"lon":121.6,"depth_km":12,"magnitude":5.1,`+
			`"location":"HA test %d","max_level":4,"areas":[{"code":970,"level":4}]}`, id, time.Now().UnixMilli(), n)
		sent := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.api+"/v1/reports", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+w.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		ok := err == nil && resp.StatusCode/100 == 2
		if resp != nil {
			resp.Body.Close()
		}
		w.mu.Lock()
		if ok {
			w.acked = append(w.acked, id)
			w.last = sent
		} else {
			w.fails++
		}
		w.mu.Unlock()
		if !ok {
			// A pause after a refused write, so a database that is down
			// is not asked hundreds of times a second: the writer's pace.
			time.Sleep(100 * time.Millisecond) //nolint:forbidigo // the load's back-off, not a wait
		}
	}
}

// ackedSince returns whether a write sent after t was acknowledged.
func (w *writer) ackedSince(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.After(t)
}

func (w *writer) ackedIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...)
}

// leader returns the member Patroni says leads, and whether the other is a
// running synchronous standby.
func leader(t testing.TB, client *http.Client, rest string) (string, bool) {
	t.Helper()
	resp, err := client.Get(rest + "/cluster")
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var doc struct {
		Members []struct{ Name, Role, State string }
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return "", false
	}
	lead, sync := "", false
	for _, m := range doc.Members {
		switch {
		case m.Role == "leader" && m.State == "running":
			lead = m.Name
		case m.Role == "sync_standby" && (m.State == "running" || m.State == "streaming"):
			sync = true
		}
	}
	return lead, sync
}

// TestMetadataFailover is the HA tier: `shindo dev --ha` (Patroni in
// synchronous mode with a PostgreSQL member at each core, etcd at three
// sites, HAProxy at each core) while a writer posts earthquake reports
// through the data API without pause:
//   - SIGKILL from outside of the primary's PostgreSQL (Patroni restarts
//     it), of the standby's Patroni and of a HAProxy (shindo dev restarts
//     them): writes resume within 30 s each time, and the cluster has a
//     leader with a synchronous standby again;
//   - kill -9 of the primary (Patroni and its PostgreSQL): writes resume
//     within 30 s, and every write acknowledged before, during and after is
//     there;
//   - the old primary restarts and rejoins as the synchronous standby;
//   - with one etcd member down, killing the new primary still fails over.
//
// All of it under -tls, as production runs: Patroni's REST API — which
// HAProxy's checks, the other member and the test ask — is mutual TLS, and
// refuses a client without a certificate of the dev CA.
func TestMetadataFailover(t *testing.T) {
	t.Parallel() // waits more than it works: see doc.go
	d := startDev(t, "-ha", "-tls", "-stations", "1", "-simulate=false")
	ha, stopWriting := startWriting(t, d, d.endpoints.get(t, "KHH-1", "edge", "http"))
	defer stopWriting()
	waitLeader := func(what string, within time.Duration, needSync bool) string {
		t.Helper()
		return ha.waitLeader(t, what, within, needSync)
	}
	failover := func(what string) { t.Helper(); ha.failover(t, what) }

	// Faults nobody announces: SIGKILL from outside, so only the
	// supervisors (Patroni for its PostgreSQL, shindo dev for the rest)
	// learn of them by the exit.
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatal(err)
	}
	writesResume := func(what string, since time.Time) {
		t.Helper()
		t.Logf("%s: writes resumed after %s", what, ha.writesResume(t, what, since).Round(100*time.Millisecond))
	}
	restarted := func(name string, old int) {
		t.Helper()
		if !poll.Within(60*time.Second, func() bool {
			p := processes(t, control)[name]
			return p.State == "running" && p.PID != 0 && p.PID != old
		}) {
			t.Fatalf("%s not restarted within 60 s of its kill:\n%s", name, d.stderr.String())
		}
	}
	lead := waitLeader("before the outside kills", 30*time.Second, true)
	ha.writesFlow(t, "before the outside kills")
	pool, err := certfile.LoadPool(d.endpoints.devCA(t))
	if err != nil {
		t.Fatal(err)
	}
	for site, rest := range ha.rest {
		if !strings.HasPrefix(rest, "https://") {
			t.Fatalf("%s's Patroni REST API at %s under -tls", site, rest)
		}
		anonymous := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		if resp, err := anonymous.Get(rest + "/cluster"); err == nil {
			resp.Body.Close()
			t.Errorf("%s's Patroni REST API answered a client without a certificate: %s", site, resp.Status)
		}
	}
	b, err := os.ReadFile(filepath.Join(d.endpoints.get(t, lead, "patroni", "data_dir"), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	killed := time.Now()
	if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("kill the primary's PostgreSQL (pid %d)", pid)
	}
	writesResume("the primary's PostgreSQL killed from outside, its Patroni alive", killed)
	waitLeader("after the PostgreSQL kill", 60*time.Second, true)
	for _, name := range []string{otherCore(lead) + "-patroni", "TNN-1-haproxy"} {
		old := processes(t, control)[name].PID
		killed := time.Now()
		if old == 0 || syscall.Kill(old, syscall.SIGKILL) != nil {
			t.Fatalf("kill %s (pid %d)", name, old)
		}
		restarted(name, old)
		writesResume(name+" killed from outside", killed)
		waitLeader("after "+name+" came back", 60*time.Second, true)
	}

	failover("first failover")
	fault(t, d, "kill", "TPE-1-etcd")
	failover("with an etcd member down")
	stopWriting()
	ha.allPresent(t)
}

// startWriting starts a writer of reports through entrance, on d's
// replicated metadata database; stop ends it.
func startWriting(t *testing.T, d *dev, entrance string) (ha *haCluster, stop func()) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	rest := map[string]string{}
	for _, c := range []string{"TNN-1", "TYO-1"} {
		rest[c] = d.endpoints.get(t, c, "patroni", "rest")
	}
	w := &writer{t: t, api: entrance, token: strings.TrimSpace(string(raw)), client: d.endpoints.operatorClient(t, 3*time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	return &haCluster{d: d, w: w, rest: rest}, func() { cancel(); <-done }
}

// haCluster is the replicated metadata database of a shindo dev -ha under
// a writer's load: its members' Patroni REST APIs by core.
type haCluster struct {
	d    *dev
	w    *writer
	rest map[string]string
}

// waitLeader waits for a leader (with a synchronous standby if needSync)
// and returns it.
func (h *haCluster) waitLeader(t testing.TB, what string, within time.Duration, needSync bool) string {
	t.Helper()
	var lead string
	if !poll.Within(within, func() bool {
		for _, r := range h.rest {
			if l, sync := leader(t, h.w.client, r); l != "" && (sync || !needSync) {
				lead = l
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s: no leader%s within %s", what, map[bool]string{true: " with a synchronous standby"}[needSync], within)
	}
	return lead
}

// writesFlow waits until the writer has a write acknowledged from now on:
// the database takes writes before a fault is made.
func (h *haCluster) writesFlow(t testing.TB, what string) {
	t.Helper()
	since := time.Now()
	poll.Until(t, 30*time.Second, what+": a write acknowledged before the crash", func() bool { return h.w.ackedSince(since) })
}

// writesResume waits until a write sent after since (a fault) is
// acknowledged, at most 30 s after since, and returns how long after
// since that was.
func (h *haCluster) writesResume(t *testing.T, what string, since time.Time) time.Duration {
	t.Helper()
	if !poll.Within(time.Until(since.Add(30*time.Second)), func() bool { return h.w.ackedSince(since) }) {
		t.Fatalf("%s: no write acknowledged within 30 s", what)
	}
	return time.Since(since)
}

// failover crashes the primary (its Patroni and PostgreSQL), checks that
// writes resume within 30 s at another leader, and brings the old primary
// back as a synchronous standby.
func (h *haCluster) failover(t *testing.T, what string) {
	t.Helper()
	// The cluster whole first: after a test that restarted a whole core
	// (over the emulated WAN, on a busy machine) its member may still be
	// catching up to become the synchronous standby again. Not what is
	// measured here.
	old := h.waitLeader(t, what, 2*time.Minute, true)
	h.writesFlow(t, what)
	fault(t, h.d, "kill", old+"-patroni") // returns once Patroni and its PostgreSQL are dead
	resumed := h.writesResume(t, what+": the primary "+old+" killed", time.Now())
	if l := h.waitLeader(t, what, 5*time.Second, false); l == old {
		t.Fatalf("%s: %s still leads after its crash", what, old)
	}
	t.Logf("%s: primary %s killed; writes resumed after %s", what, old, resumed.Round(100*time.Millisecond))
	// The old primary stays down a while longer, so the new one takes
	// writes that the old must catch up on when it rejoins.
	time.Sleep(2 * time.Second) //nolint:forbidigo // holds the fault, not a wait
	fault(t, h.d, "start", old+"-patroni")
	h.waitLeader(t, what+", rejoined", 60*time.Second, true)
}

// allPresent checks, once the writer has stopped, that every write it had
// acknowledged is there.
func (h *haCluster) allPresent(t *testing.T) {
	t.Helper()
	w := h.w
	client := w.client
	acked := w.ackedIDs()
	for _, id := range acked {
		req, _ := http.NewRequest(http.MethodGet, w.api+"/v1/reports/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+w.token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("get report %s: %v", id, err)
		}
		var doc struct{ Report struct{ ID string } }
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || doc.Report.ID != id {
			t.Errorf("acknowledged report %s lost: status %d, decoded %q (%v)", id, resp.StatusCode, doc.Report.ID, err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	t.Logf("%d reports acknowledged, all present; %d posts failed during the failovers", len(acked), w.fails)
}

func otherCore(site string) string {
	if site == "TNN-1" {
		return "TYO-1"
	}
	return "TNN-1"
}

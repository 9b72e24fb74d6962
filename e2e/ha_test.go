package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writer posts earthquake reports through the data API as fast as it gets
// answers, remembering every one whose POST succeeded: those are
// acknowledged writes.
type writer struct {
	t     *testing.T
	api   string
	token string

	mu    sync.Mutex
	acked []string
	last  time.Time // when the newest acknowledged write was sent
	fails int
}

func (w *writer) run(ctx context.Context) {
	client := &http.Client{Timeout: 3 * time.Second}
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
			time.Sleep(100 * time.Millisecond)
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
func leader(t *testing.T, rest string) (string, bool) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(rest + "/cluster")
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
//   - kill -9 of the primary (Patroni and its PostgreSQL): writes resume
//     within 30 s, and every write acknowledged before, during and after is
//     there;
//   - the old primary restarts and rejoins as the synchronous standby;
//   - with one etcd member down, killing the new primary still fails over.
func TestMetadataFailover(t *testing.T) {
	d := startDev(t, "-ha", "-stations", "1", "-simulate=false")
	raw, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	api := d.endpoints.get(t, "KHH-1", "edge", "http")
	rest := map[string]string{}
	for _, c := range []string{"TNN-1", "TYO-1"} {
		rest[c] = d.endpoints.get(t, c, "patroni", "rest")
	}
	w := &writer{t: t, api: api, token: strings.TrimSpace(string(raw))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)

	waitLeader := func(what string, within time.Duration, needSync bool) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			for _, r := range rest {
				if l, sync := leader(t, r); l != "" && (sync || !needSync) {
					return l
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no leader%s within %s", what, map[bool]string{true: " with a synchronous standby"}[needSync], within)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	failover := func(what string) {
		t.Helper()
		old := waitLeader(what, 30*time.Second, true)
		time.Sleep(2 * time.Second)         // writes flowing before the crash
		fault(t, d, "kill", old+"-patroni") // returns once Patroni and its PostgreSQL are dead
		killed := time.Now()
		deadline := killed.Add(30 * time.Second)
		for !w.ackedSince(killed) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no write acknowledged within 30 s of killing the primary %s", what, old)
			}
			time.Sleep(100 * time.Millisecond)
		}
		resumed := time.Since(killed)
		if l := waitLeader(what, 5*time.Second, false); l == old {
			t.Fatalf("%s: %s still leads after its crash", what, old)
		}
		t.Logf("%s: primary %s killed; writes resumed after %s", what, old, resumed.Round(100*time.Millisecond))
		time.Sleep(2 * time.Second)
		fault(t, d, "start", old+"-patroni")
		waitLeader(what+", rejoined", 60*time.Second, true)
	}

	failover("first failover")
	fault(t, d, "kill", "TPE-1-etcd")
	failover("with an etcd member down")
	cancel()
	time.Sleep(500 * time.Millisecond)

	// Every acknowledged write is there.
	client := &http.Client{Timeout: 5 * time.Second}
	acked := w.ackedIDs()
	for _, id := range acked {
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/reports/"+id, nil)
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

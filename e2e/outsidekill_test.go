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
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/sdk/sse"
)

// tickLog records the RTS events one client following the client rules
// (sdk/sse: retry, Last-Event-ID, switch entrance after three failures)
// received, with when each arrived.
type tickLog struct {
	mu    sync.Mutex
	ticks []int64
	at    []time.Time
}

func followRTS(ctx context.Context, t testing.TB, entrances ...string) *tickLog {
	l := &tickLog{}
	events := make(chan sse.Event, 64)
	go sse.Stream(ctx, sse.Options{Entrances: entrances, Path: "/v1/stream?topics=rts",
		HTTP: &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 3 * time.Second}}}, events)
	go func() {
		for ev := range events {
			if ev.Name != "" || !strings.HasSuffix(ev.ID, "-0") {
				continue // the hello, which carries the position; rts is topic 0
			}
			tick := idTick(t, ev.ID)
			l.mu.Lock()
			l.ticks = append(l.ticks, tick)
			l.at = append(l.at, time.Now())
			l.mu.Unlock()
		}
	}()
	return l
}

// count returns how many ticks arrived.
func (l *tickLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ticks)
}

// moreTicks waits until each of logs has received n more ticks than it
// has now: every client's stream goes on.
func moreTicks(t testing.TB, n int, within time.Duration, logs ...*tickLog) {
	t.Helper()
	had := make([]int, len(logs))
	for i, l := range logs {
		had[i] = l.count()
	}
	poll.Until(t, within, fmt.Sprintf("%d more ticks at every client", n), func() bool {
		for i, l := range logs {
			if l.count() < had[i]+n {
				return false
			}
		}
		return true
	})
}

// check reports ticks missing or repeated, and the longest wait between
// two events that arrived in [from, to].
func (l *tickLog) check(from, to time.Time) (longest time.Duration, problems []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 1; i < len(l.ticks); i++ {
		if d := l.ticks[i] - l.ticks[i-1]; d != 500 {
			problems = append(problems, fmt.Sprintf("tick %d after %d, at %s", l.ticks[i], l.ticks[i-1], l.at[i].Format("15:04:05.000")))
		}
		if !l.at[i].Before(from) && !l.at[i-1].After(to) {
			longest = max(longest, l.at[i].Sub(l.at[i-1]))
		}
	}
	return longest, problems
}

// controlState is one process as shindo dev's control API lists it.
type controlState struct {
	Name, State string
	PID         int
}

func processes(t testing.TB, control string) map[string]controlState {
	t.Helper()
	code, body := httpGet(t, control+"/v1/processes")
	if code != http.StatusOK {
		t.Fatalf("control API: %d %s", code, body)
	}
	var doc struct{ Processes []controlState }
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]controlState{}
	for _, p := range doc.Processes {
		out[p.Name] = p
	}
	return out
}

// devDatabasePID reads the dev database's postmaster from endpoints.json,
// which shindo dev rewrites once a restarted process is ready.
func devDatabasePID(t *testing.T, d *dev) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TNN struct {
			Postgres struct{ PID int } `json:"postgres"`
		} `json:"TNN-1"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.TNN.Postgres.PID
}

// postReportStatus posts a report straight to a data API and returns the
// answer's status.
func postReportStatus(t *testing.T, d *dev, api string) int {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"id":"kill-%d","time_ms":%d,"lat":23.9,"lon":121.6,"depth_km":15,"magnitude":5.0,`+
		`"location":"Hualien County","max_level":4,"areas":[{"code":970,"level":4}]}`, time.Now().UnixNano(), time.Now().UnixMilli())
	req, _ := http.NewRequest(http.MethodPost, api+"/v1/reports", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("post report: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOutsideKills kills each kind of process of `shindo dev` in turn with
// SIGKILL sent from outside — not through `shindo fault`, so the
// supervisor learns of it only as production's would, by the exit — while
// two clients follow the RTS stream, one entering at each edge:
//   - every process comes back by itself, with a new process ID, and the
//     topology keeps running (shindo dev does not stop);
//   - neither client misses or repeats a tick across all the kills;
//   - a client waits at most 2 s for an event while a core's process or the
//     database is down, and at most 3 s (its retry) plus the edge's
//     restart when its own edge is killed (docs/RELIABILITY.md);
//   - while the dev database is down, a write answers 503 and real-time
//     data flows on; once it is back, writes succeed again.
func TestOutsideKills(t *testing.T) {
	d := startDev(t, "-stations", "5")
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	khh := d.endpoints.get(t, "KHH-1", "edge", "http")
	api := d.endpoints.get(t, "TNN-1", "dataapi", "http")
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	atTPE := followRTS(ctx, t, tpe, khh)
	atKHH := followRTS(ctx, t, khh, tpe)
	moreTicks(t, 6, 15*time.Second, atTPE, atKHH) // 3 s of ticks: both clients follow

	const coreBound, edgeBound = 2 * time.Second, 5 * time.Second
	for _, target := range []string{
		"TNN-1-rts", "TNN-1-ingest", "TNN-1-waveform", "TNN-1-dataapi", "TNN-1-nats", "TNN-1-etcd",
		"TPE-1-etcd", "database", "TYO-1-ingest", "TPE-1-edge", "KHH-1-edge",
	} {
		var old int
		if target == "database" {
			old = devDatabasePID(t, d)
		} else {
			old = processes(t, control)[target].PID
		}
		if old == 0 {
			t.Fatalf("%s has no process ID", target)
		}
		if strings.HasSuffix(target, "-ingest") {
			// Killed once it has a checkpoint (every 10 s): its restart
			// must restore from it, not read the journal back.
			cp := filepath.Join(d.dir, "data", target, "checkpoint.bin")
			if !poll.Within(20*time.Second, func() bool { _, err := os.Stat(cp); return err == nil }) {
				t.Fatalf("%s wrote no checkpoint (%s) within 20 s", target, cp)
			}
		}
		killedAt := time.Now()
		t.Logf("kill of %s at %s", target, killedAt.Format("15:04:05.000"))
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s (%d): %v", target, old, err)
		}
		if target == "database" {
			// The write fails fast and says to retry, while the stream
			// goes on (checked below with the rest). Writes succeed until
			// the kill reaches the data API; the first that does not must
			// be that answer.
			var code int
			poll.Within(5*time.Second, func() bool { code = postReportStatus(t, d, api); return code != http.StatusOK })
			if code != http.StatusServiceUnavailable {
				t.Errorf("a write while the database is down answered %d, want 503", code)
			}
		}
		var back time.Duration
		if !poll.Within(45*time.Second, func() bool {
			select {
			case <-d.exited:
				t.Fatalf("shindo dev stopped after %s was killed:\n%s", target, d.stderr.String())
			default:
			}
			if target == "database" {
				if pid := devDatabasePID(t, d); pid != 0 && pid != old {
					back = time.Since(killedAt)
				}
				return back != 0
			}
			if p := processes(t, control)[target]; p.State == "running" && p.PID != old && p.PID != 0 {
				// Running is not ready: endpoints.json gets the new
				// process ID once it is.
				var e endpoints
				if b, err := os.ReadFile(filepath.Join(d.dir, "endpoints.json")); err == nil && json.Unmarshal(b, &e) == nil {
					i := strings.LastIndex(target, "-")
					if e.get(t, target[:i], target[i+1:], "pid") == fmt.Sprint(p.PID) {
						back = time.Since(killedAt)
					}
				}
			}
			return back != 0
		}) {
			t.Fatalf("%s not back within 45 s of its kill:\n%s", target, d.stderr.String())
		}
		if strings.HasSuffix(target, "-ingest") {
			restoredFromCheckpoint(t, filepath.Join(d.dir, "logs", target+".log"), killedAt)
		}
		if target == "database" {
			// Clients retry a 5xx (SPEC §8): a write goes through soon;
			// until then, each is answered 503.
			start := time.Now()
			var code int
			poll.Within(10*time.Second, func() bool { code = postReportStatus(t, d, api); return code != http.StatusServiceUnavailable })
			if code != http.StatusOK {
				t.Fatalf("a write %s after the database came back answered %d", time.Since(start).Round(time.Millisecond), code)
			}
			t.Logf("writes succeed again %s after the database was back", time.Since(start).Round(time.Millisecond))
		}
		// The stream settles on its new path: 3 s of ticks at both
		// clients, whose waits are then checked.
		moreTicks(t, 6, 15*time.Second, atTPE, atKHH)
		settled := time.Now()
		for _, c := range []struct {
			name  string
			log   *tickLog
			bound time.Duration
		}{{"TPE-1", atTPE, coreBound}, {"KHH-1", atKHH, coreBound}} {
			if strings.HasPrefix(target, c.name) && strings.HasSuffix(target, "-edge") {
				c.bound = edgeBound
			}
			longest, _ := c.log.check(killedAt, settled)
			if longest > c.bound {
				t.Errorf("kill of %s: the client entering at %s waited %s for an event (bound %s)", target, c.name, longest.Round(time.Millisecond), c.bound)
			}
			t.Logf("kill of %s: back in %s; longest wait at the client entering at %s: %s",
				target, back.Round(time.Millisecond), c.name, longest.Round(time.Millisecond))
		}
	}
	cancel()
	for name, l := range map[string]*tickLog{"TPE-1": atTPE, "KHH-1": atKHH} {
		l.mu.Lock()
		n, span := len(l.ticks), time.Duration(0)
		if n > 0 {
			span = time.Duration(l.ticks[n-1]-l.ticks[0]) * time.Millisecond
		}
		l.mu.Unlock()
		if n < 60 || span < 30*time.Second {
			t.Fatalf("the client entering at %s received %d ticks spanning %s", name, n, span)
		}
		if _, problems := l.check(time.Time{}, time.Now()); len(problems) > 0 {
			t.Errorf("the client entering at %s: %d ticks out of order: %v", name, len(problems), problems[:min(len(problems), 10)])
		}
	}
}

// restoredFromCheckpoint checks, in an ingest's log, that the process
// started after since restored its replay windows from its checkpoint and
// read back only the records after it.
func restoredFromCheckpoint(t *testing.T, logPath string, since time.Time) {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Time       time.Time `json:"time"`
			Msg        string    `json:"msg"`
			Checkpoint bool      `json:"from_checkpoint"`
			Read       int       `json:"records_read"`
			Took       int64     `json:"took"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "replay windows restored" || e.Time.Before(since) {
			continue
		}
		if !e.Checkpoint {
			t.Errorf("%s: the restart read the journal back (%d records), not from its checkpoint", logPath, e.Read)
		}
		t.Logf("%s restored from its checkpoint, %d records read back in %s", filepath.Base(logPath), e.Read, time.Duration(e.Took))
		return
	}
	t.Errorf("%s: no restore of the replay windows logged after the restart", logPath)
}

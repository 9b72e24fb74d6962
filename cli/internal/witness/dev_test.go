package witness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// devStack is a running `shindo dev`.
type devStack struct {
	dir       string
	cmd       *exec.Cmd
	exited    chan struct{}
	stderr    *lockedBuffer
	endpoints map[string]map[string]json.RawMessage
	token     string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDevStack runs `$SHINDO_BIN/shindo dev` with two simulated stations
// in a fresh directory, on a port base in the 20000s (e2e's are below),
// and waits for its "ready" line.
func startDevStack(t *testing.T, bin string) *devStack {
	t.Helper()
	var lastErr string
	for range 3 {
		d := &devStack{dir: t.TempDir(), exited: make(chan struct{}), stderr: &lockedBuffer{}}
		base := 20000 + rand.IntN(10)*1000
		d.cmd = exec.Command(filepath.Join(bin, "shindo"), "dev", "-dir", d.dir, "-port-base", fmt.Sprint(base), "-stations", "2")
		d.cmd.Stderr = d.stderr
		stdout, err := d.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { d.cmd.Wait(); close(d.exited) }()
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					ready <- true
					io.Copy(io.Discard, stdout)
					return
				}
			}
			ready <- false
		}()
		select {
		case ok := <-ready:
			if ok {
				t.Cleanup(func() { d.stop(t) })
				d.load(t)
				return d
			}
		case <-time.After(90 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			t.Fatalf("shindo dev not ready in 90 s:\n%s", d.stderr.String())
		}
		<-d.exited
		lastErr = d.stderr.String()
		if !strings.Contains(lastErr, "is not free") {
			break // a real failure, not a port taken by someone else
		}
	}
	t.Fatalf("shindo dev failed:\n%s", lastErr)
	return nil
}

func (d *devStack) load(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d.endpoints); err != nil {
		t.Fatalf("endpoints.json: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(d.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	d.token = strings.TrimSpace(string(token))
}

// stop ends shindo dev with SIGTERM, and SIGKILL after 30 s.
func (d *devStack) stop(t *testing.T) {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		t.Errorf("shindo dev ignored SIGTERM for 30 s")
	}
}

// get returns endpoints.json's value of key for a site's service.
func (d *devStack) get(t *testing.T, site, svc, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(d.endpoints[site][svc], &m); err != nil {
		t.Fatalf("endpoints[%s][%s]: %v", site, svc, err)
	}
	v, ok := m[key].(string)
	if !ok {
		t.Fatalf("endpoints[%s][%s][%s] missing", site, svc, key)
	}
	return v
}

// pid returns the process ID of a process of shindo dev (by its control
// API's name, e.g. "TNN-1-waveform") once it is running.
func (d *devStack) pid(t *testing.T, name string) int {
	t.Helper()
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatalf("endpoints has no control API: %v", err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(control + "/v1/processes")
	if err != nil {
		t.Fatalf("control API: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		Processes []struct {
			Name, State string
			PID         int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("control API: %v", err)
	}
	for _, p := range doc.Processes {
		if p.Name == name && p.State == "running" {
			return p.PID
		}
	}
	return 0
}

// runFor lets the witness send for d, or fails if shindo dev stops.
func (d *devStack) runFor(t *testing.T, w *Witness, dur time.Duration) {
	t.Helper()
	select {
	case <-time.After(dur):
	case <-d.exited:
		w.Stop()
		t.Fatalf("shindo dev stopped:\n%s", d.stderr.String())
	}
}

// TestWitnessAgainstShindoDev runs the witness against a real `shindo dev`
// ($SHINDO_BIN/shindo): first undisturbed, then while TNN-1's waveform
// service is killed with SIGKILL from outside (shindo dev restarts it, and
// ingest resends what it had not stored). Both runs must prove the
// invariant. The second run takes over the first run's stations.
func TestWitnessAgainstShindoDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts shindo dev")
	}
	bin := os.Getenv("SHINDO_BIN")
	if bin == "" {
		t.Skip("SHINDO_BIN is not set: the directory of the shindo binaries to run shindo dev from")
	}
	d := startDevStack(t, bin)
	cfg := Config{
		DataAPI:    d.get(t, "TNN-1", "dataapi", "http"),
		AdminToken: d.token,
		Primary:    d.get(t, "TNN-1", "ingest", "udp"),
		PrimaryWS:  d.get(t, "TNN-1", "ingest", "ws"),
		Backup:     d.get(t, "TYO-1", "ingest", "udp"),
		BackupWS:   d.get(t, "TYO-1", "ingest", "ws"),
		Waveform: map[string]string{
			"TNN-1": d.get(t, "TNN-1", "waveform", "grpc"),
			"TYO-1": d.get(t, "TYO-1", "waveform", "grpc"),
		},
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prove := func(name string, w *Witness) {
		t.Helper()
		r := w.Verify(ctx, 45*time.Second)
		t.Logf("%s: %+v; %s", name, w.Stats(), r)
		if v := r.Violations(); len(v) > 0 {
			t.Fatalf("%s: %d violations:\n%s", name, len(v), strings.Join(v, "\n"))
		}
	}

	w, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.runFor(t, w, 12*time.Second)
	w.Stop()
	prove("undisturbed", w)

	w, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.runFor(t, w, 4*time.Second)
	old := d.pid(t, "TNN-1-waveform")
	if old == 0 {
		w.Stop()
		t.Fatal("TNN-1-waveform is not running")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		w.Stop()
		t.Fatalf("kill TNN-1-waveform (%d): %v", old, err)
	}
	killed := time.Now()
	for back := 0; back == 0 || back == old; back = d.pid(t, "TNN-1-waveform") {
		if time.Since(killed) > 45*time.Second {
			w.Stop()
			t.Fatalf("TNN-1-waveform not restarted within 45 s:\n%s", d.stderr.String())
		}
		d.runFor(t, w, 100*time.Millisecond)
	}
	t.Logf("TNN-1-waveform (pid %d) killed and restarted in %s", old, time.Since(killed).Round(time.Millisecond))
	d.runFor(t, w, 6*time.Second)
	w.Stop()
	prove("TNN-1-waveform killed", w)
}

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
)

// binDir is where the binaries under test are.
func binDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SHINDO_BIN")
	if dir == "" {
		dir = filepath.Join("..", "bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "shindo")); err != nil {
		t.Fatalf("binaries not found in %s (run `make build`, or set SHINDO_BIN): %v", abs, err)
	}
	return abs
}

// endpoints mirrors var/dev/endpoints.json.
type endpoints map[string]map[string]json.RawMessage

func (e endpoints) get(t testing.TB, site, svc, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e[site][svc], &m); err != nil {
		t.Fatalf("endpoints[%s][%s]: %v", site, svc, err)
	}
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	}
	t.Fatalf("endpoints[%s][%s][%s] missing", site, svc, key)
	return ""
}

// fleetStatus returns the URL of the simulated fleet's status endpoint.
func (e endpoints) fleetStatus(t testing.TB) string {
	t.Helper()
	var u string
	if err := json.Unmarshal(e["fleet"]["status"], &u); err != nil {
		t.Fatalf("endpoints has no fleet status: %v", err)
	}
	return u
}

// pids lists every process ID in the document: each service's, and the
// fleet's.
func (e endpoints) pids() []int {
	var out []int
	for _, site := range e {
		for key, raw := range site {
			var m map[string]any
			var p float64
			switch {
			case json.Unmarshal(raw, &m) == nil:
				if p, ok := m["pid"].(float64); ok {
					out = append(out, int(p))
				}
			case key == "pid" && json.Unmarshal(raw, &p) == nil:
				out = append(out, int(p))
			}
		}
	}
	return out
}

type devStation struct {
	ID     string  `json:"id"`
	KeyHex string  `json:"key_hex"`
	KeyID  uint32  `json:"key_id"`
	Lat    float64 `json:"lat"`
	Lon    float64 `json:"lon"`
	Code   uint32  `json:"code"`
}

// dev is a running `shindo dev`.
type dev struct {
	cmd       *exec.Cmd
	dir       string
	endpoints endpoints
	stations  []devStation
	stderr    *lockedBuffer
	exited    chan struct{}
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

// portPlans hands out shindo dev's port bases so that topologies running
// at once (tests marked parallel) never share a port: each gets a whole
// plan (1,000 ports) of its own until its test ends. The plans lie between
// `make run`'s (17000) and the ephemeral range (32768 and up), where
// outgoing connections would take the plan's ports; which free plan a test
// gets is random, so a test's ports are not the last test's, still in
// TIME_WAIT.
var portPlans = &planSlots{used: map[int]bool{}}

type planSlots struct {
	mu   sync.Mutex
	used map[int]bool
}

const (
	firstPlan = 18000
	planSpan  = 1000 // cli/internal/devstack's portSpan
	plans     = 14   // 18000–31999
)

// take returns a free plan's base, released when t ends.
func (p *planSlots) take(t testing.TB) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var free []int
	for i := range plans {
		if base := firstPlan + i*planSpan; !p.used[base] {
			free = append(free, base)
		}
	}
	if len(free) == 0 {
		t.Fatalf("all %d port plans are in use", plans)
	}
	base := free[rand.IntN(len(free))]
	p.used[base] = true
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.used, base)
	})
	return base
}

// startDev runs `shindo dev` with args in a fresh directory on a port
// plan of its own and waits for its "ready" line.
func startDev(t testing.TB, args ...string) *dev {
	t.Helper()
	return startDevEnv(t, nil, args...)
}

// startDevEnv is startDev with env ("SHINDO_EDGE_…=…") added to the
// environment, which every process of the topology inherits: a way to set
// an option shindo dev does not pass itself.
func startDevEnv(t testing.TB, env []string, args ...string) *dev {
	t.Helper()
	bin := binDir(t)
	var lastErr string
	for range 3 {
		d := &dev{dir: t.TempDir(), stderr: &lockedBuffer{}, exited: make(chan struct{})}
		base := portPlans.take(t)
		all := append([]string{"dev", "-dir", d.dir, "-port-base", fmt.Sprint(base)}, args...)
		d.cmd = exec.Command(filepath.Join(bin, "shindo"), all...)
		d.cmd.Env = append(os.Environ(), env...)
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
				d.load(t)
				t.Cleanup(func() { d.stop(t) })
				return d
			}
		case <-time.After(90 * time.Second):
			d.cmd.Process.Kill()
			t.Fatalf("shindo dev not ready in 90s:\n%s", d.stderr.String())
		}
		<-d.exited
		lastErr = d.stderr.String()
		if !strings.Contains(lastErr, "is not free") {
			break // a real failure, not a port collision with another test
		}
	}
	t.Fatalf("shindo dev failed:\n%s", lastErr)
	return nil
}

func (d *dev) load(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d.endpoints); err != nil {
		t.Fatalf("endpoints.json: %v", err)
	}
	b, err = os.ReadFile(filepath.Join(d.dir, "stations.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d.stations); err != nil {
		t.Fatalf("stations.json: %v", err)
	}
}

// stop sends SIGTERM and returns how long shindo dev took to exit.
func (d *dev) stop(t testing.TB) time.Duration {
	select {
	case <-d.exited:
		return 0
	default:
	}
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return time.Since(start)
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Errorf("shindo dev ignored SIGTERM for 30s")
		return time.Since(start)
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sseStream reads one SSE connection as events.
type sseEvent struct {
	name, data, id string
	comment        bool
	at             time.Time
}

func openSSE(ctx context.Context, t testing.TB, url string) <-chan sseEvent {
	t.Helper()
	return openSSEWith(ctx, t, http.DefaultClient, url)
}

// openSSEWith is openSSE through client (one trusting a dev CA).
func openSSEWith(ctx context.Context, t testing.TB, client *http.Client, url string) <-chan sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("SSE %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SSE %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" || ev.id != "" || ev.comment {
					ev.at = time.Now()
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.comment = true
				ev.data = line
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "retry: "):
				ev.name = "retry"
				ev.data = strings.TrimPrefix(line, "retry: ")
			}
		}
	}()
	return out
}

// freePort returns a TCP port nobody listens on, and that no other test is
// given while t runs (freeaddr: not one the kernel may hand out meanwhile).
func freePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeaddr.TCP(t))
	n, _ := strconv.Atoi(port)
	return n
}

// runCmd runs a binary to completion (bounded) and returns its exit code
// and output.
func runCmd(t testing.TB, env []string, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v hung (killed after 30s); stderr:\n%s", bin, args, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return code, stdout.String(), stderr.String()
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

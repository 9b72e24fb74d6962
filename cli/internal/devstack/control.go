package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/cli/internal/proc"
	"shindo.dev/cli/internal/wan"
)

// stack is the running topology. Besides starting and stopping it, the
// control API (`shindo fault`) takes processes and whole sites down and up
// and degrades and cuts the network links (links.go), to watch the system
// ride out what SPEC §8 says it must.
type stack struct {
	cfg    Config
	plan   *plan
	log    *slog.Logger
	logDir string
	// writeEndpoints rewrites endpoints.json (process IDs change on
	// restart); set once every process runs, read by the supervisors'
	// goroutines, hence its own lock.
	endpointsMu    sync.Mutex
	writeEndpoints func() error

	// mu guards the processes' proc and down fields.
	mu sync.Mutex
	// actMu serialises control actions: two restarts of one site at once
	// would race for its ports.
	actMu sync.Mutex
	// ctx ends when shindo dev is asked to stop: no restarts after it.
	ctx context.Context
	// failed gets the error of a process the supervisor gave up on.
	failed chan error

	// links are the network paths: through in-process proxies, or with
	// -wan between the sites' network namespaces.
	links []*netLink
	// wan is the network of -wan, nil without: each process runs in its
	// site's namespace.
	wan *wan.Net
}

func newStack(ctx context.Context, cfg Config, plan *plan, log *slog.Logger, logDir string) *stack {
	return &stack{ctx: ctx, cfg: cfg, plan: plan, log: log, logDir: logDir, failed: make(chan error, 1)}
}

// start runs p (again, if restart) and supervises it.
func (s *stack) start(p *process, restart bool) (*proc.Proc, error) {
	pr, err := s.run(p, restart)
	if err != nil {
		return nil, err
	}
	go s.supervise(p, pr)
	return pr, nil
}

func (s *stack) run(p *process, restart bool) (*proc.Proc, error) {
	bin, args, as := p.bin, p.args, p.as
	if s.wan != nil {
		if as != nil {
			// Entering a namespace needs root: the process becomes its
			// user once inside (setpriv executes it in place, so its
			// process ID is the one supervised).
			args = append([]string{"--reuid=" + strconv.Itoa(int(as.Uid)), "--regid=" + strconv.Itoa(int(as.Gid)), "--clear-groups", "--", bin}, args...)
			bin, as = "setpriv", nil
		}
		// Every run, restarts too, enters the site's namespace afresh.
		bin, args = s.wan.Command(p.wanSite(), bin, args)
	}
	pr, err := proc.Run(proc.Spec{Name: p.name, Bin: bin, Args: args, Env: p.env,
		LogPath: filepath.Join(s.logDir, p.name+".log"), Append: restart, As: as})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	p.proc, p.down = pr, false
	s.mu.Unlock()
	return pr, nil
}

// stopAll stops every running process, last started first, within the
// stop timeout, and closes the links' proxies.
func (s *stack) stopAll() {
	deadline := time.Now().Add(s.cfg.StopTimeout)
	procs := s.plan.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		s.mu.Lock()
		p := procs[i]
		pr := p.proc
		p.down = true
		s.mu.Unlock()
		if pr != nil && !pr.Stop(deadline) {
			s.log.Warn("process killed after stop timeout", slog.String("process", p.name))
		}
	}
	s.closeLinks()
}

// ProcessState is one process as the control API reports it.
type ProcessState struct {
	Name  string `json:"name"`
	Site  string `json:"site,omitempty"`
	Role  string `json:"role"`
	PID   int    `json:"pid,omitempty"`
	State string `json:"state"` // running, stopped (asked to), exited
}

func (s *stack) states() []ProcessState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ProcessState
	for _, p := range s.plan.processes() {
		st := ProcessState{Name: p.name, Site: p.site, Role: p.role, State: "running"}
		switch {
		case p.proc == nil:
			st.State = "not started"
		case p.down:
			st.State = "stopped"
		default:
			select {
			case <-p.proc.Done():
				st.State = "exited"
			default:
				st.PID = p.proc.Pid()
			}
		}
		out = append(out, st)
	}
	return out
}

// Actions of the control API.
const (
	actKill  = "kill"  // SIGKILL: a crash
	actStop  = "stop"  // SIGTERM: an orderly shutdown
	actStart = "start" // run again with the same flags and data
)

// act applies action to ps (stops in reverse start order, starts in start
// order, each waiting until ready).
func (s *stack) act(ctx context.Context, action string, ps []*process) error {
	switch action {
	case actKill, actStop:
		for i := len(ps) - 1; i >= 0; i-- {
			s.down(ps[i], action == actKill)
		}
	case actStart:
		for _, p := range ps {
			s.mu.Lock()
			running := p.proc != nil && !p.down && !isDone(p.proc)
			s.mu.Unlock()
			if running {
				continue
			}
			pr, err := s.start(p, true)
			if err != nil {
				return err
			}
			if err := waitReady(ctx, p, pr, s.cfg.ReadyTimeout); err != nil {
				return err
			}
			s.log.Info("restarted", slog.String("process", p.name))
		}
	default:
		return fmt.Errorf("unknown action %q: want kill, stop or start", action)
	}
	return s.endpoints()
}

// endpoints rewrites endpoints.json, once shindo dev has written it first.
func (s *stack) endpoints() error {
	s.endpointsMu.Lock()
	write := s.writeEndpoints
	s.endpointsMu.Unlock()
	if write == nil {
		return nil // until every process runs
	}
	return write()
}

func (s *stack) setEndpoints(write func() error) {
	s.endpointsMu.Lock()
	s.writeEndpoints = write
	s.endpointsMu.Unlock()
}

func (s *stack) down(p *process, kill bool) {
	s.mu.Lock()
	pr := p.proc
	p.down = true
	s.mu.Unlock()
	if pr == nil || isDone(pr) {
		return
	}
	if kill {
		pr.Signal(syscall.SIGKILL)
		<-pr.Done()
		if p.role == "patroni" {
			// A crashed member: its PostgreSQL, which Patroni runs in a
			// session of its own, dies with it.
			killPostmaster(s.plan.ha.members[p.site].dataDir)
		}
	} else {
		pr.Stop(time.Now().Add(s.cfg.StopTimeout))
	}
	s.log.Warn("taken down by the control API", slog.String("process", p.name), slog.Bool("killed", kill))
}

func isDone(pr *proc.Proc) bool {
	select {
	case <-pr.Done():
		return true
	default:
		return false
	}
}

// serveControl serves the control API on the plan's control address until
// ctx ends.
func (s *stack) serveControl(ctx context.Context) (stop func(), err error) {
	ln, err := net.Listen("tcp", s.plan.control)
	if err != nil {
		return nil, fmt.Errorf("control API: %w", err)
	}
	srv := &http.Server{Handler: s.controlMux(ctx), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

func (s *stack) controlMux(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/processes", func(w http.ResponseWriter, r *http.Request) {
		writeControl(w, http.StatusOK, map[string]any{"processes": s.states(), "partitioned": s.isPartitioned()})
	})
	mux.HandleFunc("POST /v1/processes/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		i := slices.IndexFunc(s.plan.processes(), func(p *process) bool { return p.name == name })
		if i < 0 {
			writeControl(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no process %q (GET /v1/processes lists them)", name)})
			return
		}
		s.control(ctx, w, r.PathValue("action"), s.plan.processes()[i:i+1])
	})
	mux.HandleFunc("POST /v1/sites/{site}/{action}", func(w http.ResponseWriter, r *http.Request) {
		site := r.PathValue("site")
		var ps []*process
		for _, p := range s.plan.processes() {
			if p.site == site && p.role != "fleet" {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			writeControl(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no site %q: sites are TNN-1, TYO-1, TPE-1, KHH-1", site)})
			return
		}
		s.control(ctx, w, r.PathValue("action"), ps)
	})
	// Partition and heal are cut and heal of the link between the cores:
	// both directions of both cores' proxies hold their bytes, as a dead
	// path would, and release them when healed.
	mux.HandleFunc("POST /v1/intersite/{action}", func(w http.ResponseWriter, r *http.Request) {
		profile := netprofile.Clear
		switch r.PathValue("action") {
		case "partition":
			profile = netprofile.Cut
		case "heal":
		default:
			writeControl(w, http.StatusBadRequest, map[string]string{"error": "want partition or heal"})
			return
		}
		if _, err := s.setLink("intersite", profile); err != nil {
			writeControl(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeControl(w, http.StatusOK, map[string]any{"partitioned": profile == netprofile.Cut})
	})
	s.linkRoutes(mux)
	return mux
}

func (s *stack) control(ctx context.Context, w http.ResponseWriter, action string, ps []*process) {
	if action != actKill && action != actStop && action != actStart {
		writeControl(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("unknown action %q: want kill, stop or start", action)})
		return
	}
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if err := s.act(ctx, action, ps); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, context.Canceled) {
			code = http.StatusServiceUnavailable
		}
		writeControl(w, code, map[string]string{"error": err.Error()})
		return
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.name)
	}
	writeControl(w, http.StatusOK, map[string]any{"action": action, "processes": names})
}

func writeControl(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

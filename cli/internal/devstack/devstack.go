// Package devstack implements `shindo dev`: it runs the shindo topology on
// this machine as separate OS processes — the same binaries and flags a
// production deployment uses — with a simulated station fleet, writes where
// everything listens to <dir>/endpoints.json and the provisioned stations to
// <dir>/stations.json, prints "ready" once every health check passes,
// restarts any process that exits unasked (supervise.go), and stops every
// process on Ctrl-C or SIGTERM.
//
// It runs both cores (TNN-1 and TYO-1, each with ingest, rts, waveform,
// dataapi and NATS), etcd at TNN-1, TYO-1 and TPE-1, both edges (TPE-1 and
// KHH-1) reading from both cores, and a fleet that sends every packet on
// both uplinks, with WebSocket fallback and its clock synced through the
// edge. The fleet's uplinks and the link between the cores run through
// in-process proxies (links.go) that pass everything, or put the link
// under a network profile (-links, cli/internal/netprofile). With -wan
// (wan.go) each site and the stations run instead in a network namespace
// of their own, and every link between two sites carries the profile
// (cli/internal/wan). Its control API (control.go, driven by `shindo
// fault`) takes processes and sites down and up and degrades, cuts and
// heals the links.
package devstack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/cli/internal/proc"
	"shindo.dev/cli/internal/provision"
	"shindo.dev/cli/internal/wan"
	"shindo.dev/devkit/pgserver"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/service"
	"shindo.dev/seismo/synth"
)

// Config is the configuration of `shindo dev` (env prefix SHINDO_DEV_).
type Config struct {
	Stations     int           `conf:"stations" default:"50" help:"number of simulated stations to provision"`
	Simulate     bool          `conf:"simulate" default:"true" help:"run the simulated fleet; false provisions the stations but sends nothing"`
	Dir          string        `conf:"dir" default:"var/dev" help:"directory for endpoints.json, stations.json and logs"`
	BinDir       string        `conf:"bin-dir" help:"directory holding the service binaries; default: the directory of this shindo binary"`
	Host         string        `conf:"host" default:"127.0.0.1" help:"address every listener binds"`
	PortBase     int           `conf:"port-base" default:"17000" help:"first port of the port plan (see docs/ARCHITECTURE.md)"`
	ReadyTimeout time.Duration `conf:"ready-timeout" default:"60s" help:"how long each process may take to become ready"`
	StopTimeout  time.Duration `conf:"stop-timeout" default:"10s" help:"how long processes get to stop before they are killed"`
	LogLevel     string        `conf:"log-level" default:"info" help:"log level of the services"`
	Scenario     string        `conf:"scenario" help:"built-in earthquake for the fleet to play (hualien, hualien-m6, meinong-m6, chishang-m7, taitung-offshore-m5, yilan-m4); empty for a quiet network"`
	ScenarioIn   time.Duration `conf:"scenario-in" default:"20s" help:"origin time of the scenario after the fleet starts"`
	Motion       string        `conf:"motion" default:"stochastic" help:"how the scenario's amplitudes fall off: stochastic (the synthetic model's own, which the detector's magnitude table is fitted to) or lin2009 (Lin (2009)'s PGA relation for Taiwan, with its scatter)"`
	HA           bool          `conf:"ha" help:"replicated metadata database: a PostgreSQL member at each core under Patroni (synchronous mode, etcd quorum) behind HAProxy; needs Debian's patroni and haproxy"`
	Links        string        `conf:"links" help:"network profile every link (the stations' uplinks, the link between the cores; with -wan every link) is under from the start: clear, wan, lossy, typhoon or cut (see shindo fault links); default clear, or wan with -wan"`
	WAN          bool          `conf:"wan" help:"run each site and the stations in a network namespace of its own, joined by links with the one-way delay, jitter and loss of -links (default wan); needs root (see docs/ARCHITECTURE.md)"`
	OTel         string        `conf:"otel" help:"OTLP/gRPC trace collector host:port every service exports its spans to (their -otlp-endpoint); empty exports nothing. With -wan the services reach it from their sites' namespaces"`
	TLS          bool          `conf:"tls" help:"encrypt what the public reaches: the edges serve HTTPS (plain HTTP beside redirects), the stations' WebSocket fallback is wss://; a local CA issues every certificate at start (kept in DIR/tls, its certificate ca.pem is the trust bundle; reused while valid)"`
	TraceEvery   uint64        `conf:"trace-every" default:"1000" help:"each ingest traces one accepted intensity packet in this many through RTS to the edges (its -trace-every; 1: every one, 0: none)"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Stations < 1 || c.Stations > 100_000 {
		errs = append(errs, errors.New("stations must be between 1 and 100000"))
	}
	if c.PortBase < 1024 || c.PortBase+portSpan > 65535 {
		errs = append(errs, fmt.Errorf("port-base must be between 1024 and %d", 65535-portSpan))
	}
	if net.ParseIP(c.Host) == nil {
		errs = append(errs, fmt.Errorf("host %q is not an IP address", c.Host))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir must not be empty"))
	}
	if c.ReadyTimeout <= 0 || c.StopTimeout <= 0 {
		errs = append(errs, errors.New("ready-timeout and stop-timeout must be positive"))
	}
	if c.Scenario != "" {
		if _, err := synth.Scenario(c.Scenario); err != nil {
			errs = append(errs, fmt.Errorf("scenario: %w", err))
		}
	}
	if _, err := synth.ParseMotion(c.Motion); err != nil {
		errs = append(errs, err)
	}
	if _, err := netprofile.Lookup(c.linksProfile()); err != nil {
		errs = append(errs, fmt.Errorf("links: %w", err))
	}
	if c.OTel != "" {
		if _, _, err := net.SplitHostPort(c.OTel); err != nil {
			errs = append(errs, fmt.Errorf("otel %q: want host:port", c.OTel))
		}
	}
	return errors.Join(errs...)
}

// Main runs `shindo dev`.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg Config
	if err := conf.Load(&cfg, "DEV", args, conf.Options{Name: "shindo dev", Help: stdout}); err != nil {
		return service.ExitCode(stderr, "shindo dev", err)
	}
	if cfg.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return service.ExitCode(stderr, "shindo dev", fmt.Errorf("locate binaries: %w", err))
		}
		cfg.BinDir = filepath.Dir(exe)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return service.ExitCode(stderr, "shindo dev", run(ctx, cfg, stdout, log))
}

func run(ctx context.Context, cfg Config, stdout io.Writer, log *slog.Logger) error {
	plan := newPlan(cfg)
	var network *wan.Net
	if cfg.WAN {
		// Before anything starts, and removed after everything stopped
		// (deferred first, runs last).
		n, hosts, err := buildWAN(log)
		if err != nil {
			return err
		}
		defer func() {
			if err := n.Close(); err != nil {
				log.Error("network namespaces not all removed", slog.Any("error", err))
			}
		}()
		network, plan = n, newPlanOn(cfg, hosts)
	}
	if err := plan.checkBinaries(); err != nil {
		return err
	}
	if cfg.HA {
		if err := checkHA(); err != nil {
			return err
		}
	}
	if err := plan.checkPorts(); err != nil {
		return err
	}
	logDir := filepath.Join(cfg.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", logDir, err)
	}
	// Each run starts from nothing: its stations and keys are new.
	if err := os.RemoveAll(plan.dataDir); err != nil {
		return fmt.Errorf("clear %s: %w", plan.dataDir, err)
	}
	stations := provision.Fleet("SIM", cfg.Stations)

	// ctx ends before anything is stopped, so nothing stopped is restarted.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := newStack(ctx, cfg, plan, log, logDir)
	st.wan = network
	var pg *metadata
	var dsn string
	base, scratch, err := pgBase(cfg.Dir)
	if err != nil {
		return err
	}
	var dbTLS *pgserver.TLS
	if cfg.HA {
		if scratch {
			defer os.RemoveAll(filepath.Dir(base))
		}
		if err := plan.writeHA(filepath.Join(base, "ha")); err != nil {
			return fmt.Errorf("replicated metadata database: %w", err)
		}
	} else if cfg.TLS {
		if dbTLS, err = plan.databaseTLS(filepath.Join(base, tnn.name)); err != nil {
			return err
		}
	}
	// Before the database, whose certificate is among them.
	if cfg.TLS {
		if err := issueCertificates(plan, log); err != nil {
			return err
		}
		// Readiness over mutual TLS (Patroni's REST API) asks as the
		// operator.
		readyTLS, err := provision.ClientTLS(plan.caFile, plan.operatorCert, plan.operatorKey)
		if err != nil {
			return err
		}
		for _, p := range plan.processes() {
			if strings.HasPrefix(p.readyURL, "https://") {
				p.readyTLS = readyTLS
			}
		}
	}
	if !cfg.HA {
		var err error
		if pg, dsn, err = startMetadata(ctx, cfg, cfg.PortBase+tnn.block+postgresPort, base, scratch, dbTLS, log); err != nil {
			return err
		}
		supervised := make(chan struct{})
		go func() {
			defer close(supervised)
			pg.supervise(ctx, log, st.fail, func() {
				if err := st.endpoints(); err != nil {
					log.Warn("endpoints.json not rewritten after the database restarted", slog.Any("error", err))
				}
			})
		}()
		// After every service: deferred first, runs last.
		defer func() {
			cancel()
			<-supervised
			pg.stop()
		}()
		log.Info("metadata database up", slog.String("url", dsn))
		if network != nil {
			pgPort := cfg.PortBase + tnn.block + postgresPort
			stopRelay, err := relayDatabase(network, hostPort(plan.host(tnn.name), pgPort), hostPort(cfg.Host, pgPort), log)
			if err != nil {
				return err
			}
			defer stopRelay()
		}
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	if err := os.WriteFile(plan.tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", plan.tokenFile, err)
	}
	notifyToken, err := newToken()
	if err != nil {
		return err
	}
	if err := os.WriteFile(plan.notifyTokenFile, []byte(notifyToken+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", plan.notifyTokenFile, err)
	}

	defer st.stopAll()
	defer cancel() // before stopAll
	if err := st.openLinks(cfg.linksProfile()); err != nil {
		return err
	}
	for i, group := range plan.groups {
		if i == plan.databaseBefore {
			var err error
			if dsn, err = plan.makeDatabase(ctx, log); err != nil {
				return err
			}
		}
		if i == plan.provisionBefore {
			// The cores' backends are up: provision the stations through
			// the data API, as an operator would, and hand the issued keys
			// to the fleet.
			start := time.Now()
			var tlsCfg *tls.Config
			if plan.cfg.TLS {
				// The data API under mutual TLS serves operators' certificates.
				var err error
				if tlsCfg, err = provision.ClientTLS(plan.caFile, plan.operatorCert, plan.operatorKey); err != nil {
					return err
				}
			}
			if err := provision.All(ctx, plan.provisioner.listeners["http"], token, tlsCfg, stations, log); err != nil {
				return err
			}
			if err := writeJSON(plan.stationsFile, stations); err != nil {
				return err
			}
			log.Info("stations provisioned", slog.Int("stations", len(stations)), slog.Duration("took", time.Since(start)))
		}
		runs := make([]*proc.Proc, len(group))
		for i, p := range group {
			var err error
			if runs[i], err = st.start(p, false); err != nil {
				return err
			}
		}
		for i, p := range group {
			if err := waitReady(ctx, p, runs[i], cfg.ReadyTimeout); err != nil {
				return err
			}
		}
		log.Info("started", slog.Any("processes", names(group)))
	}
	st.setEndpoints(func() error {
		st.mu.Lock()
		defer st.mu.Unlock()
		doc := plan.endpoints(func(p *process) int {
			if p.proc == nil || isDone(p.proc) {
				return 0
			}
			return p.proc.Pid()
		})
		if pg != nil {
			doc[tnn.name].(map[string]any)["postgres"] = map[string]any{"url": dsn, "pid": pg.Pid(), "data_dir": pg.DataDir()}
		}
		if plan.ha != nil {
			// Where each member's PostgreSQL keeps its postmaster.pid: a
			// tool crashing the primary kills it with its Patroni.
			for site, m := range plan.ha.members {
				if e, ok := doc[site].(map[string]any)["patroni"].(map[string]any); ok && m.dataDir != "" {
					e["data_dir"] = m.dataDir
				}
			}
		}
		doc["links"] = st.linksDoc()
		if network != nil {
			for _, s := range network.Sites() {
				if e, ok := doc[s.Name].(map[string]any); ok {
					e["netns"], e["address"] = s.Netns, s.Addr.String()
				}
				if s.Name == stationsSite {
					if f, ok := doc["fleet"].(map[string]any); ok {
						f["netns"], f["address"] = s.Netns, s.Addr.String()
					}
				}
			}
		}
		dev := map[string]any{"admin_token_file": plan.tokenFile, "notify_token_file": plan.notifyTokenFile, "database_url": dsn, "ha": cfg.HA,
			"stations_file": plan.stationsFile, "control": "http://" + plan.control}
		if network != nil {
			dev["wan"] = wanDoc(network)
		}
		if cfg.TLS {
			dev["ca"] = plan.caFile
			dev["operator_cert"], dev["operator_key"] = plan.operatorCert, plan.operatorKey
		}
		doc["dev"] = dev
		return writeJSON(plan.endpointsFile, doc)
	})
	if err := st.endpoints(); err != nil {
		return err
	}
	stopControl, err := st.serveControl(ctx)
	if err != nil {
		return err
	}
	defer stopControl()
	for _, line := range plan.summary() {
		log.Info(line)
	}
	fmt.Fprintln(stdout, "ready")

	// Run until asked to stop. A process that dies unasked is restarted
	// (supervise.go); shindo dev ends only when one keeps failing.
	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-st.failed:
		return err
	}
}

func names(ps []*process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// waitReady polls the readiness URL of p, running as pr, until it answers
// 200.
func waitReady(ctx context.Context, p *process, pr *proc.Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	if p.readyTLS != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = p.readyTLS
		defer tr.CloseIdleConnections()
		client.Transport = tr
	}
	var last string
	for {
		select {
		case <-pr.Done():
			return fmt.Errorf("%s exited while starting (%s); last lines of %s:\n%s", p.name, pr.ExitDescription(), pr.LogPath, pr.Tail(5))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := client.Get(p.readyURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (%s); see %s", p.name, timeout, last, pr.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

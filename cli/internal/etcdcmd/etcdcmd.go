// Package etcdcmd implements `shindo etcd`: one member of the quorum store
// (TNN-1, TYO-1 and TPE-1, SPEC §5), the etcd server of the etcd project run
// in-process, so `shindo dev` needs no separate install; production may run
// Debian's etcd-server with the same settings. Patroni elects the metadata
// database's primary through it, and edges move notification ownership with
// its compare-and-swap. Three members: any one can be lost.
package etcdcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"shindo.dev/lib/conf"
	"shindo.dev/lib/logging"
	"shindo.dev/lib/service"
)

type config struct {
	Name           string        `conf:"name" default:"TNN-1" help:"member name (the site)"`
	DataDir        string        `conf:"data-dir" help:"member data directory"`
	ClientURL      string        `conf:"client-url" default:"http://127.0.0.1:2379" help:"URL clients (and /health) use"`
	PeerURL        string        `conf:"peer-url" default:"http://127.0.0.1:2380" help:"URL the other members use"`
	InitialCluster string        `conf:"initial-cluster" help:"every member as name=peer-url, comma-separated"`
	ClusterState   string        `conf:"cluster-state" default:"new" help:"new to bootstrap, existing to join"`
	Token          string        `conf:"cluster-token" default:"shindo" help:"bootstrap token, unique per cluster"`
	StartTimeout   time.Duration `conf:"start-timeout" default:"60s" help:"how long to wait for the cluster to form"`
	LogFormat      string        `conf:"log-format" default:"json" help:"log format: json or text"`
	LogLevel       string        `conf:"log-level" default:"info" help:"log level"`
}

func (c *config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir is required"))
	}
	for name, u := range map[string]string{"client-url": c.ClientURL, "peer-url": c.PeerURL} {
		if p, err := url.Parse(u); err != nil || p.Scheme != "http" || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want http://host:port", name, u))
		}
	}
	if c.InitialCluster == "" {
		c.InitialCluster = c.Name + "=" + c.PeerURL
	}
	if !strings.Contains(c.InitialCluster, c.Name+"=") {
		errs = append(errs, fmt.Errorf("initial-cluster does not list this member %q", c.Name))
	}
	if c.ClusterState != "new" && c.ClusterState != "existing" {
		errs = append(errs, errors.New("cluster-state must be new or existing"))
	}
	return errors.Join(errs...)
}

// Main runs `shindo etcd` until ctx ends.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "shindo etcd"
	var cfg config
	if err := conf.Load(&cfg, "ETCD", args, conf.Options{Name: name, Help: stdout}); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	log, err := logging.New(stderr, cfg.LogFormat, cfg.LogLevel, slog.String("service", "shindo-etcd"), slog.String("site", cfg.Name))
	if err != nil {
		return service.ExitCode(stderr, name, &conf.UsageError{Err: err})
	}
	return service.ExitCode(stderr, name, run(ctx, cfg, log))
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	client, _ := url.Parse(cfg.ClientURL)
	peer, _ := url.Parse(cfg.PeerURL)
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.InitialCluster = cfg.InitialCluster
	ec.ClusterState = cfg.ClusterState
	ec.InitialClusterToken = cfg.Token
	ec.LogLevel = "warn"
	// Elections within a second or two on a LAN or one machine.
	ec.TickMs, ec.ElectionMs = 100, 1000
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(cfg.StartTimeout):
		return fmt.Errorf("etcd member %s: cluster did not form within %s (are the other members up?)", cfg.Name, cfg.StartTimeout)
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	}
	log.Info("serving", slog.String("client", cfg.ClientURL), slog.String("peer", cfg.PeerURL))
	select {
	case <-ctx.Done():
		log.Info("shutdown requested")
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	}
}

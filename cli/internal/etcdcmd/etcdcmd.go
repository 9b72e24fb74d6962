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

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
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
	Compaction     time.Duration `conf:"auto-compaction" default:"1h" help:"history kept: older revisions are compacted away periodically, so notification churn does not grow the store without end"`
	QuotaBytes     int64         `conf:"quota-bytes" default:"2147483648" help:"store size at which the member raises the NOSPACE alarm and refuses writes (shindo_etcd_alarm on /metrics of the client URL)"`
	LogFormat      string        `conf:"log-format" default:"json" help:"log format: json or text"`
	LogLevel       string        `conf:"log-level" default:"info" help:"log level"`
	TLSCert        string        `conf:"tls-cert" help:"the member's certificate (PEM): clients and the other members connect over mutual TLS only (https:// client and peer URLs), each with a certificate of -tls-ca; empty: plain http"`
	TLSKey         string        `conf:"tls-key" help:"the key of -tls-cert (PEM)"`
	TLSCA          string        `conf:"tls-ca" help:"the CA certificates (PEM) of clients and members"`
	MetricsURL     string        `conf:"metrics-url" help:"plain http://host:port serving /health and /metrics only (for probes that hold no certificate); empty: none beyond the client URL"`
}

func (c *config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir is required"))
	}
	scheme := "http"
	if c.TLSCert != "" {
		scheme = "https"
	}
	for name, u := range map[string]string{"client-url": c.ClientURL, "peer-url": c.PeerURL} {
		if p, err := url.Parse(u); err != nil || p.Scheme != scheme || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want %s://host:port", name, u, scheme))
		}
	}
	if c.MetricsURL != "" {
		if p, err := url.Parse(c.MetricsURL); err != nil || p.Scheme != "http" || p.Host == "" {
			errs = append(errs, fmt.Errorf("metrics-url %q: want http://host:port", c.MetricsURL))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") || (c.TLSCert == "") != (c.TLSCA == "") {
		errs = append(errs, errors.New("tls-cert, tls-key and tls-ca go together"))
	}
	if c.InitialCluster == "" {
		c.InitialCluster = c.Name + "=" + c.PeerURL
	}
	if !strings.Contains(c.InitialCluster, c.Name+"=") {
		errs = append(errs, fmt.Errorf("initial-cluster does not list this member %q", c.Name))
	}
	if c.Compaction < time.Second || c.QuotaBytes < 1<<20 {
		errs = append(errs, errors.New("auto-compaction must be at least 1s, quota-bytes at least 1 MiB"))
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
	ec.AutoCompactionMode, ec.AutoCompactionRetention = "periodic", cfg.Compaction.String()
	ec.QuotaBackendBytes = cfg.QuotaBytes
	if cfg.TLSCert != "" {
		// Every client and member shows a certificate of the network;
		// etcd knows no roles, so any of the network's may read and
		// write (docs/SECURITY.md).
		tlsInfo := transport.TLSInfo{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, TrustedCAFile: cfg.TLSCA, ClientCertAuth: true}
		ec.ClientTLSInfo, ec.PeerTLSInfo = tlsInfo, tlsInfo
		ec.TlsMinVersion = "TLS1.3"
	}
	if cfg.MetricsURL != "" {
		m, _ := url.Parse(cfg.MetricsURL)
		ec.ListenMetricsUrls = []url.URL{*m}
	}
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
	// etcd serves the default registry on the client URL's /metrics; its
	// alarms are not among its metrics.
	alarms := alarmGauge(e)
	prometheus.MustRegister(alarms)
	defer prometheus.Unregister(alarms)
	log.Info("serving", slog.String("client", cfg.ClientURL), slog.String("peer", cfg.PeerURL))
	select {
	case <-ctx.Done():
		log.Info("shutdown requested")
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	}
}

// alarmGauge exports the member's raised alarms: shindo_etcd_alarm is 1 for
// each kind raised anywhere in the cluster (NOSPACE: the quota is reached
// and writes are refused until compaction, defragmentation and a disarm;
// CORRUPT), 0 otherwise.
func alarmGauge(e *embed.Etcd) prometheus.Collector {
	return &alarmCollector{e: e, desc: prometheus.NewDesc("shindo_etcd_alarm",
		"1 while the cluster has an alarm of this kind raised (NOSPACE: store quota reached, writes refused).",
		[]string{"alarm"}, nil)}
}

type alarmCollector struct {
	e    *embed.Etcd
	desc *prometheus.Desc
}

func (c *alarmCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *alarmCollector) Collect(ch chan<- prometheus.Metric) {
	raised := map[etcdserverpb.AlarmType]bool{}
	for _, a := range c.e.Server.Alarms() {
		raised[a.Alarm] = true
	}
	for _, kind := range []etcdserverpb.AlarmType{etcdserverpb.AlarmType_NOSPACE, etcdserverpb.AlarmType_CORRUPT} {
		v := 0.0
		if raised[kind] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, kind.String())
	}
}

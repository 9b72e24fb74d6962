// Package natscmd implements `shindo nats`: a NATS server with JetStream,
// the message system of one core. It is the nats-server of the NATS project
// run in-process, so `shindo dev` needs no separate download; production
// may run the official nats-server with the same settings.
//
// Each core runs its own server and JetStream domain (named after the
// site): nothing is clustered across sites, so neither core's messaging
// depends on the other's, and a partition between them leaves both fully
// working. Cores reach each other by connecting as clients to the peer's
// server. JetStream writes are fsynced at once (sync_interval always):
// streams kept here must not lose what they acknowledged.
package natscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"shindo.dev/lib/certfile"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/logging"
	"shindo.dev/lib/service"
)

type config struct {
	Site      string `conf:"site" default:"TNN-1" help:"site of this server; also its JetStream domain"`
	Addr      string `conf:"client-addr" default:"127.0.0.1:4222" help:"client listen address"`
	HTTPAddr  string `conf:"http-addr" default:"127.0.0.1:8222" help:"monitoring listen address (/healthz, /varz, /jsz)"`
	StoreDir  string `conf:"store-dir" help:"JetStream storage directory"`
	LogFormat string `conf:"log-format" default:"json" help:"log format: json or text"`
	LogLevel  string `conf:"log-level" default:"info" help:"log level"`
	TLSCert   string `conf:"tls-cert" help:"the server's certificate (PEM) naming its site and role: clients connect over mutual TLS only, each with a certificate of -tls-ca, and may do what its role may (docs/SECURITY.md); empty: plain, anyone may do anything"`
	TLSKey    string `conf:"tls-key" help:"the key of -tls-cert (PEM)"`
	TLSCA     string `conf:"tls-ca" help:"the CA certificates (PEM) the clients' certificates chain to"`
}

func (c *config) Validate() error {
	var errs []error
	for name, a := range map[string]string{"client-addr": c.Addr, "http-addr": c.HTTPAddr} {
		if _, p, err := net.SplitHostPort(a); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, a))
		}
	}
	if c.StoreDir == "" {
		errs = append(errs, errors.New("store-dir is required"))
	}
	if c.Site == "" {
		errs = append(errs, errors.New("site must not be empty"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") || (c.TLSCert == "") != (c.TLSCA == "") {
		errs = append(errs, errors.New("tls-cert, tls-key and tls-ca go together"))
	}
	return errors.Join(errs...)
}

// Main runs `shindo nats` until ctx ends.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "shindo nats"
	var cfg config
	if err := conf.Load(&cfg, "NATS", args, conf.Options{Name: name, Help: stdout}); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	log, err := logging.New(stderr, cfg.LogFormat, cfg.LogLevel, slog.String("service", "shindo-nats"), slog.String("site", cfg.Site))
	if err != nil {
		return service.ExitCode(stderr, name, &conf.UsageError{Err: err})
	}
	return service.ExitCode(stderr, name, run(ctx, cfg, log))
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	host, port, _ := net.SplitHostPort(cfg.Addr)
	httpHost, httpPort, _ := net.SplitHostPort(cfg.HTTPAddr)
	p, _ := strconv.Atoi(port)
	hp, _ := strconv.Atoi(httpPort)
	opts := &server.Options{
		ServerName:      cfg.Site,
		Host:            host,
		Port:            p,
		HTTPHost:        httpHost,
		HTTPPort:        hp,
		JetStream:       true,
		JetStreamDomain: domain(cfg.Site),
		StoreDir:        cfg.StoreDir,
		// fsync every write: what JetStream acknowledges must survive a
		// crash of the machine (the default syncs every two minutes).
		SyncAlways:    true,
		NoSigs:        true,
		MaxPayload:    4 << 20,
		WriteDeadline: 10 * time.Second,
	}
	if cfg.TLSCert != "" {
		cert, err := certfile.Load(cfg.TLSCert, cfg.TLSKey, log)
		if err != nil {
			return fmt.Errorf("tls-cert: %w", err)
		}
		cas, err := certfile.LoadPool(cfg.TLSCA)
		if err != nil {
			return fmt.Errorf("tls-ca: %w", err)
		}
		rctx, stopReload := context.WithCancel(ctx)
		defer stopReload()
		// Replaced files (and SIGHUP) swap the certificate for the next
		// handshake; Run ends, returning nil, when the server does.
		go func() { _ = cert.Run(rctx, 5*time.Second) }()
		opts.TLSConfig = certfile.MutualServerConfig(cert, cas)
		opts.TLSVerify = true
		// A client that does not finish its handshake in 2 s is dropped.
		opts.TLSTimeout = 2
		opts.CustomClientAuthentication = roleAuth{site: cfg.Site, log: log}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	srv.SetLoggerV2(logger{log}, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats server on %s not ready within 15s (is the port free?)", cfg.Addr)
	}
	log.Info("serving", slog.String("clients", srv.ClientURL()), slog.String("monitoring", cfg.HTTPAddr),
		slog.String("jetstream_domain", domain(cfg.Site)))
	<-ctx.Done()
	log.Info("shutdown requested")
	done := make(chan struct{})
	go func() { srv.Shutdown(); srv.WaitForShutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		return errors.New("nats server did not stop within 8s")
	}
	log.Info("stopped")
	return nil
}

// domain turns a site name into a JetStream domain (letters, digits, _).
func domain(site string) string {
	b := []byte(site)
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// logger sends the server's log to slog.
type logger struct{ log *slog.Logger }

func (l logger) Noticef(format string, v ...any) {
	l.log.Info("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}
func (l logger) Warnf(format string, v ...any) {
	l.log.Warn("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}
func (l logger) Fatalf(format string, v ...any) {
	l.log.Error("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}
func (l logger) Errorf(format string, v ...any) {
	l.log.Error("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}
func (l logger) Debugf(format string, v ...any) {
	l.log.Debug("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}
func (l logger) Tracef(format string, v ...any) {
	l.log.Debug("nats server", slog.String("detail", fmt.Sprintf(format, v...)))
}

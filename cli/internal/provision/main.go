package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"shindo.dev/lib/conf"
	"shindo.dev/lib/service"
)

type config struct {
	DataAPI    string `conf:"data-api" help:"base URL of a core's data API, e.g. http://127.0.0.1:7401"`
	AdminToken string `conf:"admin-token" secret:"true" help:"admin token of that data API"`
	Stations   int    `conf:"stations" default:"50" help:"how many stations to create"`
	Prefix     string `conf:"id-prefix" default:"SIM" help:"station IDs are the prefix and a five-digit number; also their network label (net); their SEED codes are the registry's choice (SH and, if free, the number)"`
	Out        string `conf:"out" default:"stations.json" help:"file to write the stations and their keys to (for shindo sim -stations-file)"`
	CAFile     string `conf:"ca-file" help:"CA certificates (PEM) to trust the https:// data API by (empty: the system's)"`
	Cert       string `conf:"cert" help:"client certificate (PEM) to present: a data API under mutual TLS serves an operator's or an edge's alone"`
	Key        string `conf:"key" help:"the key of -cert (PEM)"`
}

func (c *config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.DataAPI); c.DataAPI == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("data-api must be an http:// or https:// base URL"))
	}
	if c.AdminToken == "" {
		errs = append(errs, errors.New("admin-token is required (or SHINDO_PROVISION_ADMIN_TOKEN)"))
	}
	if c.Stations < 1 || c.Stations > 100_000 {
		errs = append(errs, errors.New("stations must be between 1 and 100000"))
	}
	if c.Prefix == "" || len(c.Prefix) > 32 {
		errs = append(errs, errors.New("id-prefix must be 1 to 32 characters"))
	}
	if (c.Cert == "") != (c.Key == "") {
		errs = append(errs, errors.New("cert and key go together"))
	}
	if c.Out == "" {
		errs = append(errs, errors.New("out must not be empty"))
	}
	return errors.Join(errs...)
}

// Main runs `shindo provision`: it creates a simulated fleet's stations
// through a data API and writes them, with their keys, for `shindo sim`.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "shindo provision"
	var cfg config
	if err := conf.Load(&cfg, "PROVISION", args, conf.Options{Name: name, Help: stdout}); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	tlsCfg, err := ClientTLS(cfg.CAFile, cfg.Cert, cfg.Key)
	if err != nil {
		return service.ExitCode(stderr, name, err)
	}
	stations := Fleet(cfg.Prefix, cfg.Stations)
	if err := All(ctx, cfg.DataAPI, cfg.AdminToken, tlsCfg, stations, log); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	b, err := json.MarshalIndent(stations, "", "  ")
	if err != nil {
		return service.ExitCode(stderr, name, err)
	}
	tmp := filepath.Join(filepath.Dir(cfg.Out), "."+filepath.Base(cfg.Out)+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return service.ExitCode(stderr, name, fmt.Errorf("write %s: %w", cfg.Out, err))
	}
	if err := os.Rename(tmp, cfg.Out); err != nil {
		return service.ExitCode(stderr, name, fmt.Errorf("write %s: %w", cfg.Out, err))
	}
	fmt.Fprintf(stdout, "provisioned %d stations; keys in %s\n", len(stations), cfg.Out)
	return 0
}

// Package migratecmd implements `shindo migrate`: it brings the metadata
// database's schema up to the version this build knows (metadb.Migrate)
// and says what it did. Services migrate at start too; the command is for
// operators who migrate ahead of a rollout, or check that nothing is left
// to do.
//
// It prints the versions it applied, or "schema up to date at version N".
// A configuration mistake exits 2, anything else that fails exits 1, each
// with one line on stderr.
package migratecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/lib/conf"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/service"
)

const name = "shindo migrate"

type config struct {
	DatabaseURL string        `conf:"database-url" secret:"true" help:"metadata database, as a PostgreSQL URL or key=value string (postgres://user:password@host:5432/shindo)"`
	Timeout     time.Duration `conf:"timeout" default:"1m" help:"give up connecting and migrating after this long"`
}

func (c *config) Validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("database-url is required"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Main runs the command with args (after "migrate") and returns the exit
// status: 0, 1 if migrating failed, 2 for bad flags or environment.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg config
	if err := conf.Load(&cfg, "MIGRATE", args, conf.Options{Name: name, Help: stdout}); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	return service.ExitCode(stderr, name, run(ctx, cfg, stdout))
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		// pgx masks the password in its parse errors.
		return fmt.Errorf("database-url: %w", err)
	}
	poolCfg.MaxConns = 2 // Migrate works on one connection
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("database-url: %w", err)
	}
	defer pool.Close()
	// Pinging first tells "cannot reach the database" apart from "cannot
	// migrate it".
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("connect to the metadata database: %w", err)
	}
	applied, err := metadb.Migrate(ctx, pool)
	if len(applied) > 0 {
		// Those versions are committed even if a later one failed.
		fmt.Fprintf(stdout, "applied schema versions %s\n", join(applied))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema up to date at version %d\n", metadb.LatestVersion())
	return nil
}

func join(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

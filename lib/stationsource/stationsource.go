// Package stationsource opens the station registry a service is configured
// with: the metadata database (the normal case: provisioned through the data
// API, refreshed on every change) or a JSON file (for a deployment without
// the database, and for tests). Services embed Config in theirs.
package stationsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/service"
)

// Config chooses the registry; exactly one of Registry and DatabaseURL.
type Config struct {
	Registry         string        `conf:"registry" help:"station registry JSON file (instead of -database-url)"`
	DatabaseURL      string        `conf:"database-url" secret:"true" help:"metadata database URL (postgres://…), the station registry's home"`
	RegistryInterval time.Duration `conf:"registry-interval" default:"5s" help:"how often the registry is re-read in full (the database also notifies changes)"`
}

// Validate checks that exactly one source is configured.
func (c *Config) Validate() error {
	switch {
	case c.Registry == "" && c.DatabaseURL == "":
		return errors.New("database-url (or registry, a JSON file) is required")
	case c.Registry != "" && c.DatabaseURL != "":
		return errors.New("give database-url or registry, not both")
	case c.RegistryInterval <= 0:
		return errors.New("registry-interval must be positive")
	}
	return nil
}

// Opened is an open registry.
type Opened struct {
	Source registry.Source
	// Pool is the database pool, nil for a file registry.
	Pool *pgxpool.Pool
}

// Close releases the pool.
func (o *Opened) Close() {
	if o.Pool != nil {
		o.Pool.Close()
	}
}

// Open loads the registry. For the database it waits up to wait for the
// server, applies pending schema migrations (serialized across services by
// an advisory lock) and loads the stations.
func Open(ctx context.Context, c Config, wait time.Duration, log *slog.Logger) (*Opened, error) {
	if c.Registry != "" {
		f, err := registry.Open(c.Registry, log)
		if err != nil {
			return nil, fmt.Errorf("load %w", err)
		}
		return &Opened{Source: f}, nil
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("metadata database: %w", err)
	}
	o := &Opened{Pool: pool}
	if err := ping(ctx, pool, wait); err != nil {
		o.Close()
		return nil, fmt.Errorf("metadata database not reachable within %s: %w", wait, err)
	}
	if applied, err := metadb.Migrate(ctx, pool); err != nil {
		o.Close()
		return nil, fmt.Errorf("metadata database schema: %w", err)
	} else if len(applied) > 0 {
		log.InfoContext(ctx, "schema migrated", slog.Any("versions", applied))
	}
	src, err := metadb.NewSource(ctx, pool, log)
	if err != nil {
		o.Close()
		return nil, fmt.Errorf("load station registry: %w", err)
	}
	o.Source = src
	return o, nil
}

// ping waits up to wait for the pool to reach the primary: the server
// answers, and it is not a standby. Behind HAProxy a service that starts
// with its site (a whole core restarted) can be led to a standby for a
// moment — a freshly started HAProxy takes its members for up until their
// first checks — and a migration there fails as a read-only transaction;
// the pool's connections are dropped and made again until they reach the
// primary.
func ping(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		var standby bool
		if last = pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); last == nil {
			if !standby {
				return nil
			}
			last = errStandby
			pool.Reset()
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errStandby: the server the pool reached is a standby.
var errStandby = errors.New("reached a standby, not the primary")

// Attach opens the registry for svc: the connection is closed at shutdown,
// the registry is kept fresh as one of svc's components, and, for the
// database, readiness includes it.
func Attach(ctx context.Context, svc *service.Service, c Config, wait time.Duration) (*Opened, error) {
	o, err := Open(ctx, c, wait, svc.Logger())
	if err != nil {
		return nil, err
	}
	svc.OnShutdown("station registry", func(context.Context) error { o.Close(); return nil })
	svc.Go("station registry refresh", service.ComponentFunc(func(ctx context.Context) error {
		return o.Source.Run(ctx, c.RegistryInterval)
	}))
	if o.Pool != nil {
		svc.AddReadiness("metadata database", func(ctx context.Context) error { return o.Pool.Ping(ctx) })
	}
	return o, nil
}

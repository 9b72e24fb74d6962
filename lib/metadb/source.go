package metadb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/lib/registry"
)

// Channel is the PostgreSQL notification channel the schema's triggers
// notify, with the changed station's ID as payload, on every change to a
// station or its keys.
const Channel = "shindo_stations"

// ReportsChannel is the channel notified, with the report's ID as payload
// (empty: every report), on every change to a report or its areas.
const ReportsChannel = "shindo_reports"

// ListenerApplicationName is the application_name of a Source's listening
// connection, so operators can tell it apart in pg_stat_activity.
const ListenerApplicationName = "shindo-metadb-listen"

const (
	// debounce gathers a burst of notifications (a batch of stations
	// provisioned one transaction each) into one reload.
	debounce = 50 * time.Millisecond
	// reloadTimeout bounds one Snapshot, so a hung database cannot stop
	// the periodic reloads.
	reloadTimeout = 30 * time.Second
	// The listener reconnects after minBackoff, doubling up to maxBackoff
	// while the database stays unreachable.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

var _ registry.Source = (*Source)(nil)

// Source is the station registry of a service backed by the database: a
// registry.Source that serves an in-memory snapshot and refreshes it without
// a restart when stations change.
type Source struct {
	store   *Store
	connCfg *pgx.ConnConfig
	log     *slog.Logger
	current atomic.Pointer[registry.Set]
}

// NewSource loads the registry from the database behind pool. It fails if
// the first snapshot cannot be loaded: a service must not start without
// its stations. Call Run to keep it fresh.
func NewSource(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*Source, error) {
	connCfg := pool.Config().ConnConfig
	if connCfg.RuntimeParams == nil {
		connCfg.RuntimeParams = map[string]string{}
	}
	connCfg.RuntimeParams["application_name"] = ListenerApplicationName
	s := &Source{store: NewStore(pool), connCfg: connCfg, log: log}
	set, err := s.store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("load station registry: %w", err)
	}
	s.current.Store(set)
	return s, nil
}

// Current returns the latest successfully loaded set.
func (s *Source) Current() *registry.Set { return s.current.Load() }

// Lookup finds a station in the current set.
func (s *Source) Lookup(id string) (*registry.Station, bool) { return s.Current().Lookup(id) }

// Run keeps the registry fresh until ctx ends, then returns nil. It listens
// on its own connection for the schema's change notifications and reloads
// shortly after one arrives (notifications close together make one
// reload), and after every (re)connection of the listener, since changes
// made while it was away were not notified to it. As a fallback it also
// reloads every interval whatever happens. The listener reconnects, with
// backoff, when its connection is lost (a database restart or failover). A
// reload that fails is logged and the previous set stays in use.
func (s *Source) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("station registry: reload interval %s must be positive", interval)
	}
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.listen(ctx, changed) })
	defer wg.Wait()

	tick := time.NewTicker(interval)
	defer tick.Stop()
	settle := time.NewTimer(debounce)
	settle.Stop()
	defer settle.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			if !pending {
				pending = true
				settle.Reset(debounce)
			}
		case <-settle.C:
			pending = false
			s.reload(ctx, "notified")
		case <-tick.C:
			s.reload(ctx, "periodic")
		}
	}
}

func (s *Source) reload(ctx context.Context, reason string) {
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	set, err := s.store.Snapshot(ctx)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.log.WarnContext(ctx, "station registry reload failed, keeping the loaded one",
				slog.String("reason", reason), slog.Any("error", err))
		}
		return
	}
	s.current.Store(set)
	s.log.DebugContext(ctx, "station registry reloaded", slog.String("reason", reason), slog.Int("stations", set.Len()))
}

// listen holds a LISTEN connection until ctx ends, signalling changed for
// every notification and after every successful (re)connection.
func (s *Source) listen(ctx context.Context, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default: // a reload is already due
		}
	}
	Listen(ctx, s.connCfg, []string{Channel}, s.log, signal, func(string, string) { signal() })
}

// Listen holds a connection listening on channels until ctx ends, then
// returns. It calls listening after every successful (re)connection —
// changes made while it was away were not notified to it, so the caller
// reads everything again — and notified for every notification, with its
// channel and payload, from one goroutine. A lost connection (a database
// restart or failover) is logged and made again after minBackoff,
// doubling up to maxBackoff while the database stays unreachable.
// Notifications reach only sessions of the server they were sent on, so
// connCfg must name the primary.
func Listen(ctx context.Context, connCfg *pgx.ConnConfig, channels []string, log *slog.Logger, listening func(), notified func(channel, payload string)) {
	backoff := minBackoff
	for {
		err := listenOnce(ctx, connCfg, channels, func() { backoff = minBackoff; listening() }, notified)
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "database listener lost, reconnecting", slog.Any("channels", channels),
			slog.Duration("after", backoff), slog.Any("error", translate(err)))
		wait := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listenOnce connects, listens, calls listening once it does, and calls
// notified for every notification until the connection fails or ctx ends.
func listenOnce(ctx context.Context, connCfg *pgx.ConnConfig, channels []string, listening func(), notified func(channel, payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notified(n.Channel, n.Payload)
	}
}

// Package watch serves DataService.WatchReports and WatchStations: the
// metadata database's reports and stations pushed to the edges as they
// change. One connection listens for the schema's change notifications
// (metadb.ReportsChannel, metadb.Channel) — whichever core wrote, the
// database notifies every core's listener at commit — and the changed rows
// are read from the primary and sent to every watcher. A watcher first
// gets the state (the newest page of reports, every station), so an edge
// that connects or reconnects needs nothing else.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/service"
	"shindo.dev/svc-dataapi/internal/reports"
)

// Store is what the watches read (metadb.Store on the primary: a
// notified change is visible there at once, not yet perhaps on a standby).
type Store interface {
	ListReports(ctx context.Context, f metadb.ReportFilter) ([]metadb.Report, error)
	GetReport(ctx context.Context, id string) (*metadb.Report, error)
	Snapshot(ctx context.Context) (*registry.Set, error)
}

// Options bound the watches.
type Options struct {
	// MaxWatchers is how many watches of each kind may be open at once.
	MaxWatchers int
	// Buffer is how many changes a watcher may fall behind before it is
	// dropped.
	Buffer int
	// Interval is how often everything is read again whatever was
	// notified: a fallback, as after every reconnection of the listener.
	Interval time.Duration
	// Timeout bounds one read of the database.
	Timeout time.Duration
	// Heartbeat is how often a watcher hears from the core when nothing
	// changes.
	Heartbeat time.Duration
}

// Defaults returns the options shindo runs with.
func Defaults() Options {
	return Options{MaxWatchers: 64, Buffer: 64, Interval: time.Minute, Timeout: 5 * time.Second, Heartbeat: 10 * time.Second}
}

// ReportPage is how many of the newest reports a watcher gets first: the
// page an edge announces from.
const ReportPage = 50

const (
	// debounce gathers the notifications of a burst (a report stored with
	// its areas, a batch of stations) into one read.
	debounce = 50 * time.Millisecond
	// retryAfter is when a failed read is made again.
	retryAfter = time.Second
	// maxNotified bounds the report IDs gathered between two reads; past
	// it the newest page is read instead.
	maxNotified = 256
	// maxKnown bounds the reports whose md5 is remembered.
	maxKnown = 20 * ReportPage
)

// Server serves the watches; Run keeps them fed.
type Server struct {
	store    Store
	connCfg  *pgx.ConnConfig
	opts     Options
	stopping <-chan struct{}
	log      *slog.Logger

	reports  *hub[*datav1.WatchReportsResponse]
	stations *hub[*datav1.WatchStationsResponse]
	station  func(*registry.Station) *datav1.Station

	// pending is what was notified since the last read.
	mu      sync.Mutex
	pending pending
	wake    chan struct{}

	// Owned by Run's goroutine: the md5 of each report last sent, and each
	// station last sent.
	knownReports  map[string]string
	knownStations map[string]*datav1.Station

	received prometheus.Counter
}

type pending struct {
	reportIDs  map[string]bool
	allReports bool
	stations   bool
}

// New returns a server reading store, listening with connCfg (the
// primary's), converting stations with station (as GetStation does).
// Watches end with Unavailable once stopping closes.
func New(store Store, connCfg *pgx.ConnConfig, station func(*registry.Station) *datav1.Station, opts Options, stopping <-chan struct{}, log *slog.Logger) *Server {
	return &Server{
		store: store, connCfg: connCfg, opts: opts, stopping: stopping, log: log, station: station,
		reports:       newHub("reports", &datav1.WatchReportsResponse{}, opts.MaxWatchers, opts.Buffer, opts.Heartbeat),
		stations:      newHub("stations", &datav1.WatchStationsResponse{}, opts.MaxWatchers, opts.Buffer, opts.Heartbeat),
		pending:       pending{reportIDs: map[string]bool{}},
		wake:          make(chan struct{}, 1),
		knownReports:  map[string]string{},
		knownStations: map[string]*datav1.Station{},
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_dataapi_watch_notifications_total",
			Help: "Change notifications of reports and stations received from the database."}),
	}
}

// Collectors are the watches' metrics.
func (s *Server) Collectors() []prometheus.Collector {
	return append(append([]prometheus.Collector{s.received}, s.reports.collectors()...), s.stations.collectors()...)
}

// WatchReports serves DataService.WatchReports.
func (s *Server) WatchReports(_ *datav1.WatchReportsRequest, stream grpc.ServerStreamingServer[datav1.WatchReportsResponse]) error {
	return service.EndOnStop(s.stopping, func() error { return s.reports.serve(stream.Context(), stream.Send) })
}

// WatchStations serves DataService.WatchStations.
func (s *Server) WatchStations(_ *datav1.WatchStationsRequest, stream grpc.ServerStreamingServer[datav1.WatchStationsResponse]) error {
	return service.EndOnStop(s.stopping, func() error { return s.stations.serve(stream.Context(), stream.Send) })
}

// Run reads the reports and stations, then listens and sends every change
// to the watchers until ctx ends. A read that fails is logged and made
// again a moment later; the watchers keep what they have meanwhile.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.markAll()
	wg.Go(func() {
		metadb.Listen(ctx, s.connCfg, []string{metadb.ReportsChannel, metadb.Channel}, s.log, s.markAll, s.notified)
	})

	every := time.NewTicker(s.opts.Interval)
	defer every.Stop()
	settle := time.NewTimer(0) // the first read, at once
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			settle.Reset(debounce)
			continue
		case <-every.C:
			s.markAll()
			continue
		case <-settle.C:
		}
		err := s.read(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !failing {
				s.log.Warn("watch read failed; retrying", slog.Duration("after", retryAfter), slog.Any("error", err))
			}
			settle.Reset(retryAfter)
		case failing:
			s.log.Info("watch read recovered")
		}
		failing = err != nil
	}
}

// markAll asks for everything to be read again: at start, after every
// (re)connection of the listener, and every interval.
func (s *Server) markAll() {
	s.mu.Lock()
	s.pending.allReports, s.pending.stations = true, true
	s.mu.Unlock()
	s.signal()
}

// notified records one notification.
func (s *Server) notified(channel, payload string) {
	s.received.Inc()
	s.mu.Lock()
	switch {
	case channel == metadb.Channel:
		s.pending.stations = true
	case payload == "" || len(s.pending.reportIDs) >= maxNotified:
		s.pending.allReports = true
	default:
		s.pending.reportIDs[payload] = true
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Server) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// read reads what was notified and publishes it. What it could not read
// stays pending.
func (s *Server) read(ctx context.Context) error {
	s.mu.Lock()
	p := s.pending
	s.pending = pending{reportIDs: map[string]bool{}}
	s.mu.Unlock()
	var errs []error
	if p.stations {
		if err := s.readStations(ctx); err != nil {
			errs = append(errs, err)
			s.mu.Lock()
			s.pending.stations = true
			s.mu.Unlock()
		}
	}
	if p.allReports || len(p.reportIDs) > 0 {
		if err := s.readReports(ctx, p.reportIDs); err != nil {
			errs = append(errs, err)
			// The page read again covers the new reports, not an old one
			// revised: those are read again by ID.
			s.mu.Lock()
			s.pending.allReports = true
			for id := range p.reportIDs {
				if len(s.pending.reportIDs) < maxNotified {
					s.pending.reportIDs[id] = true
				}
			}
			s.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// readReports reads the newest page, and the notified reports not on it
// (an old report revised), and sends those whose md5 changed.
func (s *Server) readReports(ctx context.Context, ids map[string]bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	list, err := s.store.ListReports(ctx, metadb.ReportFilter{Limit: ReportPage})
	if err != nil {
		return err
	}
	page := make([]*datav1.Report, 0, len(list))
	onPage := map[string]bool{}
	for i := range list {
		page = append(page, listed(&list[i]))
		onPage[list[i].ID] = true
	}
	changed := []*datav1.Report{}
	for _, r := range page {
		if s.knownReports[r.GetId()] != r.GetMd5() {
			changed = append(changed, r)
		}
	}
	for id := range ids {
		if onPage[id] {
			continue
		}
		r, err := s.store.GetReport(ctx, id)
		if errors.Is(err, metadb.ErrNotFound) {
			continue // deleted since, or the ID of a failed write
		}
		if err != nil {
			return err
		}
		if p := listed(r); s.knownReports[id] != p.GetMd5() {
			changed = append(changed, p)
		}
	}
	if len(s.knownReports)+len(changed) > maxKnown {
		// What is not on the page is forgotten: an old report revised is
		// sent when it changes, known or not.
		clear(s.knownReports)
		for _, r := range page {
			s.knownReports[r.GetId()] = r.GetMd5()
		}
	}
	for _, r := range changed {
		s.knownReports[r.GetId()] = r.GetMd5()
	}
	s.reports.publish(&datav1.WatchReportsResponse{Reports: page, Initial: true},
		&datav1.WatchReportsResponse{Reports: changed}, len(changed) > 0)
	return nil
}

// listed is a report as ListReports gives it: without its areas.
func listed(r *metadb.Report) *datav1.Report {
	p := reports.ReportProto(r)
	p.Areas = nil
	return p
}

// readStations reads every station and sends those created, changed or
// removed.
func (s *Server) readStations(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	set, err := s.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	all := make([]*datav1.Station, 0, set.Len())
	change := &datav1.WatchStationsResponse{}
	now := make(map[string]*datav1.Station, set.Len())
	for _, st := range set.All() {
		p := s.station(st)
		all = append(all, p)
		now[p.GetId()] = p
		if old, ok := s.knownStations[p.GetId()]; !ok || !proto.Equal(old, p) {
			change.Stations = append(change.Stations, p)
		}
	}
	for id := range s.knownStations {
		if now[id] == nil {
			change.RemovedIds = append(change.RemovedIds, id)
		}
	}
	s.knownStations = now
	s.stations.publish(&datav1.WatchStationsResponse{Stations: all, Initial: true}, change,
		len(change.Stations)+len(change.RemovedIds) > 0)
	return nil
}

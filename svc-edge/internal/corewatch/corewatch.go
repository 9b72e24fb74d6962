// Package corewatch follows what the cores push to an edge on their data
// API's watch streams: the earthquake reports the report topic announces
// (Feed), each at a tick every edge chooses alike, and the station set
// the edge's station checks read.
package corewatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

const (
	// A watch that ended is opened again after watchMinBackoff, doubling
	// up to watchMaxBackoff while the core stays away; a watch that
	// delivered a message starts again from the minimum.
	watchMinBackoff = 200 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
	// watchSilence is how long a watch may say nothing before the core is
	// taken for gone: the cores send a heartbeat every 10 s.
	watchSilence = 30 * time.Second
	// maxStationsMessage bounds a message of the station watch: the first
	// holds every station (about 100 bytes each).
	maxStationsMessage = 64 << 20
)

// Watch follows every core's WatchReports and WatchStations: the
// reports go to the report feed, which takes each once whichever core
// pushed it, and the stations to the station set. A watch that ends — the
// core stopped, restarted or was cut off — is opened again with backoff;
// its first message is the core's whole state again, so nothing is lost
// meanwhile.
type Watch struct {
	targets  []string
	cores    []datav1.DataServiceClient
	reports  *Feed
	stations *stationSet
	log      *slog.Logger
	silence  time.Duration // watchSilence

	reconnects *prometheus.CounterVec
}

func New(targets []string, conns []*grpc.ClientConn, reports *Feed, log *slog.Logger) *Watch {
	w := &Watch{targets: targets, reports: reports, stations: newStationSet(len(conns)), log: log, silence: watchSilence,
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_edge_core_watch_reconnects_total",
			Help: "Watches of a core's reports or stations opened again after they ended."}, []string{"core", "watch"}),
	}
	for _, c := range conns {
		w.cores = append(w.cores, datav1.NewDataServiceClient(c))
	}
	return w
}

func (w *Watch) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{w.reconnects}, w.reports.Collectors()...)
}

// Exists tells whether a station exists, from the stations the cores
// pushed: an error when no core's stations have come yet.
func (w *Watch) Exists(ctx context.Context, id string) (bool, error) {
	return w.stations.exists(ctx, id)
}

// Run follows every core's watches until ctx ends.
func (w *Watch) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i, core := range w.cores {
		wg.Go(func() {
			w.follow(ctx, w.targets[i], "reports", func(ctx context.Context, got func()) error { return w.watchReports(ctx, core, got) })
		})
		wg.Go(func() {
			w.follow(ctx, w.targets[i], "stations", func(ctx context.Context, got func()) error { return w.watchStations(ctx, i, core, got) })
		})
	}
	wg.Wait()
	return nil
}

// follow runs watch again and again until ctx ends. watch calls got for
// every message; one that ends without silence from the core is logged
// once per run of failures.
func (w *Watch) follow(ctx context.Context, target, kind string, watch func(context.Context, func()) error) {
	backoff := watchMinBackoff
	failing := false
	for {
		delivered := false
		err := w.silenced(ctx, func(ctx context.Context, heard func()) error {
			return watch(ctx, func() { heard(); delivered = true })
		})
		if ctx.Err() != nil {
			return
		}
		if delivered {
			backoff, failing = watchMinBackoff, false
		}
		if !failing {
			w.log.Warn("core watch ended; opening it again", slog.String("core", target), slog.String("watch", kind),
				slog.Duration("after", backoff), slog.Any("error", err))
		}
		failing = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchMaxBackoff)
		w.reconnects.WithLabelValues(target, kind).Inc()
	}
}

// errSilent ends a watch whose core said nothing for too long.
var errSilent = errors.New("no message from the core, not even a heartbeat")

// silenced runs watch, cancelling it when it goes w.silence without
// calling heard.
func (w *Watch) silenced(ctx context.Context, watch func(context.Context, func()) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(w.silence, func() { cancel(errSilent) })
	defer timer.Stop()
	err := watch(ctx, func() { timer.Reset(w.silence) })
	if cause := context.Cause(ctx); errors.Is(cause, errSilent) {
		return cause
	}
	return err
}

func (w *Watch) watchReports(ctx context.Context, core datav1.DataServiceClient, got func()) error {
	stream, err := core.WatchReports(ctx, &datav1.WatchReportsRequest{})
	if err != nil {
		return err
	}
	return receiveAll(stream, got, func(m *datav1.WatchReportsResponse) {
		if m.GetInitial() || len(m.GetReports()) > 0 {
			w.reports.receive(m.GetReports(), m.GetInitial(), time.Now())
		}
	})
}

func (w *Watch) watchStations(ctx context.Context, i int, core datav1.DataServiceClient, got func()) error {
	stream, err := core.WatchStations(ctx, &datav1.WatchStationsRequest{}, grpc.MaxCallRecvMsgSize(maxStationsMessage))
	if err != nil {
		return err
	}
	return receiveAll(stream, got, func(m *datav1.WatchStationsResponse) { w.stations.apply(i, m) })
}

// receiveAll hands every message of a stream to take, after calling got,
// until the stream ends.
func receiveAll[M any](stream grpc.ServerStreamingClient[M], got func(), take func(*M)) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		got()
		take(m)
	}
}

// stationSet is the stations every core pushed: each core's own set (the
// cores read one database, so they agree but for a moment), nil until its
// first message.
type stationSet struct {
	mu    sync.Mutex
	cores []map[string]bool
}

func newStationSet(cores int) *stationSet { return &stationSet{cores: make([]map[string]bool, cores)} }

// apply takes a message of core i's station watch.
func (s *stationSet) apply(i int, m *datav1.WatchStationsResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.GetInitial():
		s.cores[i] = make(map[string]bool, len(m.GetStations()))
	case s.cores[i] == nil:
		return // a watch starts with every station; a change alone says too little
	}
	for _, st := range m.GetStations() {
		s.cores[i][st.GetId()] = true
	}
	for _, id := range m.GetRemovedIds() {
		delete(s.cores[i], id)
	}
}

// errStationsUnknown: no core has sent its stations yet.
var errStationsUnknown = errors.New("no core's stations received yet")

// exists tells whether a station exists (retired ones too, as GetStation
// finds them) in any core's set; an error while no core sent its set.
func (s *stationSet) exists(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	known := false
	for _, set := range s.cores {
		if set == nil {
			continue
		}
		known = true
		if set[id] {
			return true, nil
		}
	}
	if !known {
		return false, errStationsUnknown
	}
	return false, nil
}

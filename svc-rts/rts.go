// Package rts is svc-rts: it receives a core's verified station stream from
// svc-ingest, computes a real-time shaking snapshot every 500 ms tick —
// stations, the areas they light, and detections of earthquakes in
// progress — and streams the snapshots to the edges.
package rts

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/natsconn"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationsource"
	"shindo.dev/svc-rts/internal/area"
	"shindo.dev/svc-rts/internal/detect"
	"shindo.dev/svc-rts/internal/natspub"
	"shindo.dev/svc-rts/internal/peerstate"
	"shindo.dev/svc-rts/internal/rtsgrpc"
	"shindo.dev/svc-rts/internal/shake"
	"shindo.dev/svc-rts/internal/ticklog"
)

// Name is the binary and service name.
const Name = "shindo-rts"

// Config is svc-rts's configuration (env prefix SHINDO_RTS_).
type Config struct {
	service.Common
	stationsource.Config
	TickMaxDelay   time.Duration `conf:"tick-max-delay" default:"150ms" help:"latest a tick is emitted after its time when some stations have not reported"`
	TickQuorum     float64       `conf:"tick-quorum" default:"0.995" help:"share of the stations online at the previous tick whose frames let a tick close after tick-quorum-grace, without the last few (1: wait for every station up to tick-max-delay)"`
	TickGrace      time.Duration `conf:"tick-quorum-grace" default:"20ms" help:"how long a tick that has its quorum waits for the next of the remaining stations' frames (again after each that comes, up to tick-max-delay)"`
	AlertIntensity float64       `conf:"alert-intensity" default:"1.5" help:"real-time intensity at which a station counts as triggered"`
	MaxAhead       time.Duration `conf:"max-ahead" default:"1m" help:"frames ending further than this after the server clock are ignored (0: no bound)"`
	DisplayDecay   float64       `conf:"display-decay" default:"0.15" help:"decay of the display intensity after shaking, units per second"`
	Areas          string        `conf:"areas" help:"JSON file of the areas (boxes) triggered stations light; empty: the grid of SPEC §4"`
	NATS           string        `conf:"nats" help:"this core's NATS server URL: snapshots and detections are published there, and the peer core's questions for the detection state answered; empty: gRPC only"`
	PeerNATS       string        `conf:"peer-nats" help:"the peer core's NATS server URL, where this core asks for the peer's detection state after a break of its own input (a rebuild that gave up, an ingest outage); empty: never asks"`
	PeerSite       string        `conf:"peer-site" help:"the peer core's site name (TYO-1 for TNN-1 and the other way round)"`
	ArchiveDir     string        `conf:"archive-dir" help:"directory of the archive of every snapshot sent, for replays of past ticks (one process per directory); empty: no archive"`
	Retention      time.Duration `conf:"archive-retention" default:"168h" help:"how long snapshots are archived"`
	RebuildWindow  time.Duration `conf:"rebuild-window" default:"6m" help:"at start, the records of this last span are replayed from ingest's journal to rebuild the detections in progress before the first tick (0: start afresh); at least detect-max-duration + detect-linger"`
	RebuildWait    time.Duration `conf:"rebuild-wait" default:"30s" help:"longest wait for the replay at start, after which the detections start afresh"`

	// The network trigger (package detect documents the rules).
	DetectStations    int           `conf:"detect-stations" default:"3" help:"triggered stations, pairwise within detect-radius-km, that make a detection"`
	DetectRadiusKm    float64       `conf:"detect-radius-km" default:"60" help:"largest distance between a detection's first stations, and from a joining station to one of its stations, km"`
	DetectWindow      time.Duration `conf:"detect-window" default:"10s" help:"span within which the first stations of a detection must trigger"`
	DetectEndAfter    time.Duration `conf:"detect-end-after" default:"10s" help:"a detection is final once none of its stations has been triggered for this long"`
	DetectLinger      time.Duration `conf:"detect-linger" default:"30s" help:"how long a final detection stays in the snapshots"`
	DetectMaxDuration time.Duration `conf:"detect-max-duration" default:"5m" help:"a detection is final this long after its first trigger at the latest"`
}

func (c *Config) detectConfig() detect.Config {
	return detect.Config{
		MinStations: c.DetectStations, RadiusKm: c.DetectRadiusKm, Window: c.DetectWindow,
		EndAfter: c.DetectEndAfter, Linger: c.DetectLinger, MaxDuration: c.DetectMaxDuration,
		AlertIntensity: c.AlertIntensity,
	}.WithDefaults()
}

// DefaultConfig returns the configuration with svc-rts's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7202", AdminAddr: "127.0.0.1:7209"}}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.ValidateCommon())
	errs = append(errs, c.Config.Validate())
	if c.TickMaxDelay <= 0 || c.TickMaxDelay >= shake.TickMs*time.Millisecond {
		errs = append(errs, errors.New("tick-max-delay must be between 0 and 500ms"))
	}

	if !(c.TickQuorum >= 0.9 && c.TickQuorum <= 1) {
		errs = append(errs, errors.New("tick-quorum must be between 0.9 and 1"))
	}
	if c.TickGrace < 0 || c.TickGrace >= c.TickMaxDelay {
		errs = append(errs, errors.New("tick-quorum-grace must be at least 0 and less than tick-max-delay"))
	}
	if c.Retention < time.Hour || c.Retention > 90*24*time.Hour {
		errs = append(errs, errors.New("archive-retention: 1h to 90 days"))
	}
	if c.MaxAhead < 0 {
		errs = append(errs, errors.New("max-ahead must not be negative"))
	}
	if c.DisplayDecay <= 0 {
		errs = append(errs, errors.New("display-decay must be positive"))
	}
	if !(c.AlertIntensity > -3 && c.AlertIntensity <= 7) {
		errs = append(errs, errors.New("alert-intensity must be above -3 and at most 7"))
	}
	if c.DetectStations <= 0 || c.DetectRadiusKm <= 0 || c.DetectWindow <= 0 || c.DetectEndAfter <= 0 || c.DetectLinger < 0 || c.DetectMaxDuration <= 0 {
		errs = append(errs, errors.New("detect-stations, detect-radius-km, detect-window, detect-end-after and detect-max-duration must be positive, detect-linger not negative"))
	} else if err := c.detectConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RebuildWindow != 0 && (c.RebuildWindow < c.DetectMaxDuration+c.DetectLinger || c.RebuildWindow > time.Hour) {
		errs = append(errs, errors.New("rebuild-window must be 0, or from detect-max-duration + detect-linger to 1h (ingest's journal keeps at least 10m)"))
	}
	if c.RebuildWait < time.Second || c.RebuildWait > 10*time.Minute {
		errs = append(errs, errors.New("rebuild-wait must be between 1s and 10m"))
	}
	if c.PeerNATS != "" && c.PeerSite == "" {
		errs = append(errs, errors.New("peer-site is required with peer-nats"))
	}
	if c.Areas != "" {
		if _, err := area.Load(c.Areas); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run runs svc-rts until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		return wire(ctx, svc, cfg)
	})
}

func wire(ctx context.Context, svc *service.Service, cfg Config) error {
	reg, err := stationsource.Attach(ctx, svc, cfg.Config, cfg.DependencyWait)
	if err != nil {
		return err
	}
	areas := area.Default()
	if cfg.Areas != "" {
		if areas, err = area.Load(cfg.Areas); err != nil {
			return err
		}
	}
	engine := shake.New(shake.Config{
		AlertIntensity:     cfg.AlertIntensity,
		MaxAheadMs:         cfg.MaxAhead.Milliseconds(),
		TickQuorum:         cfg.TickQuorum,
		DisplayDecayPerSec: cfg.DisplayDecay,
		Areas:              areas,
		Detect:             cfg.detectConfig(),
		Locate: func(id string) (shake.Place, bool) {
			st, ok := reg.Source.Lookup(id)
			if !ok {
				return shake.Place{}, false
			}
			return shake.Place{Lat: st.Lat, Lon: st.Lon, Code: st.Code}, true
		},
	})
	srv := rtsgrpc.New(engine, cfg.Site, cfg.TickMaxDelay, svc.Stopping(), svc.Metrics(), svc.Logger())
	// Rebuilding is not unreadiness: the replay comes through the Ingest
	// stream, and an ingest that waited for this core to be ready would
	// never send it. Edges take the other core meanwhile, as they do for
	// any core without fresh ticks.
	srv.SetRebuild(cfg.RebuildWindow, cfg.RebuildWait)
	srv.SetQuorumGrace(cfg.TickGrace)
	if cfg.ArchiveDir != "" {
		log, err := ticklog.Open(cfg.ArchiveDir, cfg.Retention, svc.Logger())
		if err != nil {
			return err
		}
		svc.Go("snapshot archive", log)
		svc.Metrics().MustRegister(archiveCollector{log})
		srv.SetArchive(archive{log})
	}
	if cfg.NATS != "" {
		nc, err := natsconn.Connect(ctx, cfg.NATS, "shindo-rts "+cfg.Site, cfg.DependencyWait, svc.ClientTLS())
		if err != nil {
			return err
		}
		svc.OnShutdown("nats", func(context.Context) error { return nc.Drain() })
		pub, err := natspub.New(ctx, nc, cfg.Site, svc.Metrics(), svc.Logger())
		if err != nil {
			nc.Close()
			return err
		}
		srv.SetPublisher(pub)
		svc.Go("peer state answers", service.ComponentFunc(func(ctx context.Context) error {
			return peerstate.Serve(ctx, nc, cfg.Site, srv, svc.Metrics(), svc.Logger())
		}))
	}
	if cfg.PeerNATS != "" {
		// In the background: the peer may be away, and is asked only
		// after a break.
		peer, err := natsconn.Connect(ctx, cfg.PeerNATS, "shindo-rts "+cfg.Site+" peer", 0, svc.ClientTLS())
		if err != nil {
			return err
		}
		svc.OnShutdown("peer nats", func(context.Context) error { peer.Close(); return nil })
		srv.SetPeer(peerstate.NewClient(peer, cfg.PeerSite), max(cfg.RebuildWindow, cfg.DetectMaxDuration+cfg.DetectLinger))
	}
	rtsv1.RegisterRTSServiceServer(svc.GRPC(), srv)
	// Fed by this core's ingest alone; followed by the edges, the data
	// APIs (snapshots of both cores) and operators' tools.
	svc.Authorize(peerid.Policy{
		"/" + rtsv1.RTSService_ServiceDesc.ServiceName + "/": peerid.Allow(peerid.Edge, peerid.DataAPI, peerid.Operator),
		rtsv1.RTSService_Ingest_FullMethodName:               peerid.AllowSameSite(peerid.Ingest),
	})
	svc.SetServingStatus(rtsv1.RTSService_ServiceDesc.ServiceName, true)
	svc.Go("tick loop", srv)
	return nil
}

// archive is the snapshot archive as the gRPC server reads it.
type archive struct{ *ticklog.Log }

func (a archive) At(ms int64) (*rtsv1.Snapshot, error) {
	s, err := a.Log.At(ms)
	switch {
	case errors.Is(err, ticklog.ErrNotFound):
		return nil, rtsgrpc.ErrNotArchived
	case errors.Is(err, ticklog.ErrFuture):
		return nil, rtsgrpc.ErrNotYet
	}
	return s, err
}

// archiveCollector exports the archive's counters.
type archiveCollector struct{ log *ticklog.Log }

var (
	archiveBlocks  = prometheus.NewDesc("shindo_rts_archive_blocks_total", "Blocks of snapshots written to the archive.", nil, nil)
	archiveBytes   = prometheus.NewDesc("shindo_rts_archive_bytes_total", "Bytes written to the archive.", nil, nil)
	archiveDropped = prometheus.NewDesc("shindo_rts_archive_dropped_blocks_total", "Blocks of snapshots not archived (the writer fell behind or failed).", nil, nil)
)

func (c archiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- archiveBlocks
	ch <- archiveBytes
	ch <- archiveDropped
}

func (c archiveCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.log.Stats()
	ch <- prometheus.MustNewConstMetric(archiveBlocks, prometheus.CounterValue, float64(st.Blocks))
	ch <- prometheus.MustNewConstMetric(archiveBytes, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(archiveDropped, prometheus.CounterValue, float64(st.Dropped))
}

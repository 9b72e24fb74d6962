// Package ingest is svc-ingest: it terminates station uplinks (UDP and
// WebSocket), verifies and acks each packet, and forwards the accepted ones
// to the core's RTS and waveform services over batched gRPC streams.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/natsconn"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationsource"
	"shindo.dev/svc-ingest/internal/checkpoint"
	"shindo.dev/svc-ingest/internal/forward"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/links"
	"shindo.dev/svc-ingest/internal/listen"
	"shindo.dev/svc-ingest/internal/peersync"
	"shindo.dev/svc-ingest/internal/recordwire"
	"shindo.dev/svc-ingest/internal/verify"
)

// Name is the binary and service name.
const Name = "shindo-ingest"

// Config is svc-ingest's configuration (env prefix SHINDO_INGEST_).
type Config struct {
	service.Common
	stationsource.Config
	UDPAddr      string        `conf:"udp-addr" help:"station UDP listen address"`
	WSAddr       string        `conf:"ws-addr" help:"station WebSocket listen address (path /v1/station/ws)"`
	WSCert       string        `conf:"ws-tls-cert" help:"certificate (PEM, leaf first) to serve the station WebSocket over TLS (wss://) with, reloaded when the file changes and on SIGHUP; empty: ws://"`
	WSKey        string        `conf:"ws-tls-key" help:"the certificate's private key (PEM)"`
	RTS          string        `conf:"rts" help:"svc-rts gRPC address of this core"`
	Waveform     string        `conf:"waveform" help:"svc-waveform gRPC address of this core"`
	Freshness    time.Duration `conf:"freshness" default:"30s" help:"largest accepted difference between a packet's sent_at and the server clock"`
	ReplayWindow int           `conf:"replay-window" default:"4096" help:"seqs remembered per station for replay protection"`
	MaxSeqJump   uint64        `conf:"max-seq-jump" default:"100000000" help:"how far above a station's highest recorded seq a new one may be (0: no bound); an admin resets a station whose counter restarted"`
	StationRate  float64       `conf:"station-rate" default:"20" help:"packets per second one station may send (0: no bound); beyond, dropped and counted"`
	StationBurst float64       `conf:"station-burst" default:"100" help:"packets one station may send at once"`
	WSFirst      time.Duration `conf:"ws-first-within" default:"5s" help:"how long a new WebSocket uplink has to send its first message, which must be a valid signed packet"`
	WSIdle       time.Duration `conf:"ws-idle" default:"1m" help:"a WebSocket uplink silent this long is closed"`
	WSPerAddr    int           `conf:"ws-max-per-ip" default:"256" help:"most WebSocket uplinks from one client address (0: no bound)"`
	WSPerStation int           `conf:"ws-max-per-station" default:"2" help:"most WebSocket uplinks of one station; a newer one replaces the oldest"`
	Readers      int           `conf:"udp-readers" default:"0" help:"UDP reader goroutines; 0 means one per CPU"`
	DataDir      string        `conf:"data-dir" help:"directory of the record journal (what was acked is kept here)"`
	Retention    time.Duration `conf:"journal-retention" default:"2h" help:"how long journal records are kept, at least, for the peer core's backfill and a restarted svc-rts's replay (which asks for 6m)"`
	MaxLag       uint64        `conf:"max-lag" default:"20000000" help:"journal records a downstream service may fall behind before stations stop being acked"`
	NATS         string        `conf:"nats" help:"this core's NATS server URL, where the peer core asks for what it lacks; empty: no sync"`
	PeerNATS     string        `conf:"peer-nats" help:"the peer core's NATS server URL, where this core asks for what it lacks; empty: no sync"`
	PeerSite     string        `conf:"peer-site" help:"the peer core's site name (TYO-1 for TNN-1 and the other way round)"`
	SyncInterval time.Duration `conf:"sync-interval" default:"1s" help:"how often to ask the peer core for missing records"`
	SyncWindow   int           `conf:"sync-window" default:"4096" help:"seqs per station compared in a long sync exchange (the backfill horizon)"`
	MaxBatch     int           `conf:"forward-batch" default:"512" help:"most records per forwarded batch"`
	Window       int           `conf:"forward-window" default:"64" help:"most unacked batches per downstream service"`
	TraceEvery   uint64        `conf:"trace-every" default:"1000" help:"trace one accepted intensity packet in this many, through RTS to the edges (1: every one; 0: none)"`
}

// DefaultConfig returns the configuration with svc-ingest's default ports.
func DefaultConfig() Config {
	return Config{
		Common:  service.Common{GRPCAddr: ":7102", AdminAddr: "127.0.0.1:7109"},
		UDPAddr: ":7100",
		WSAddr:  ":7101",
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	errs = append(errs, c.Config.Validate())
	for name, v := range map[string]string{"rts": c.RTS, "waveform": c.Waveform} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	for name, addr := range map[string]string{"udp-addr": c.UDPAddr, "ws-addr": c.WSAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, addr))
		}
	}
	if (c.WSCert == "") != (c.WSKey == "") {
		errs = append(errs, errors.New("ws-tls-cert and ws-tls-key go together"))
	}
	if c.Freshness <= 0 {
		errs = append(errs, errors.New("freshness must be positive"))
	}
	if c.ReplayWindow < 64 {
		errs = append(errs, errors.New("replay-window must be at least 64"))
	}
	if c.WSFirst < 100*time.Millisecond || c.WSIdle < time.Second || c.WSPerAddr < 0 || c.WSPerStation < 1 {
		errs = append(errs, errors.New("ws-first-within at least 100ms, ws-idle at least 1s, ws-max-per-ip not negative, ws-max-per-station at least 1"))
	}
	if !(c.StationRate >= 0 && c.StationRate <= 1e6) || !(c.StationBurst >= 1 && c.StationBurst <= 1e6) {
		errs = append(errs, errors.New("station-rate: 0 to 1000000 per second; station-burst: 1 to 1000000"))
	}
	if c.MaxBatch < 1 || c.Window < 1 || c.MaxLag < 1 {
		errs = append(errs, errors.New("forward-batch, forward-window and max-lag must be positive"))
	}
	if c.PeerNATS != "" && c.PeerSite == "" {
		errs = append(errs, errors.New("peer-site is required with peer-nats"))
	}
	if c.SyncInterval <= 0 || c.SyncWindow < 64 || c.SyncWindow > c.ReplayWindow {
		errs = append(errs, errors.New("sync-interval must be positive and sync-window between 64 and replay-window"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir is required"))
	}
	if c.Retention < 10*time.Minute {
		errs = append(errs, errors.New("journal-retention must be at least 10m: a restarted svc-rts rebuilds its detections from the last minutes of records"))
	}
	if c.Readers < 0 {
		errs = append(errs, errors.New("udp-readers must not be negative"))
	}
	return errors.Join(errs...)
}

// Run runs svc-ingest until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		return wire(ctx, svc, cfg)
	})
}

func wire(ctx context.Context, svc *service.Service, cfg Config) error {
	log := svc.Logger()
	reg, err := stationsource.Attach(ctx, svc, cfg.Config, cfg.DependencyWait)
	if err != nil {
		return err
	}
	// Neither is needed to accept stations: what is acked waits in the
	// journal until they come.
	rtsConn, err := svc.Connect(ctx, "rts", cfg.RTS, cfg.DependencyWait)
	if err != nil {
		return err
	}
	svc.OnShutdown("rts connection", func(context.Context) error { return rtsConn.Close() })
	wfConn, err := svc.Connect(ctx, "waveform", cfg.Waveform, cfg.DependencyWait)
	if err != nil {
		return err
	}
	svc.OnShutdown("waveform connection", func(context.Context) error { return wfConn.Close() })

	opening := time.Now()
	j, err := journal.Open(cfg.DataDir, journal.Options{Retention: cfg.Retention, Log: log})
	if err != nil {
		return err
	}
	log.Info("journal opened", slog.Uint64("first", j.First()), slog.Uint64("next", j.Next()), slog.Duration("took", time.Since(opening)))
	// Closed last: after the listeners stopped appending and the
	// forwarders stopped reading.
	svc.OnShutdown("journal", func(context.Context) error { return j.Close() })
	svc.Go("journal upkeep", service.ComponentFunc(func(ctx context.Context) error { return j.Run(ctx, time.Second) }))
	svc.Metrics().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shindo_ingest_journal_rotate_failures_total",
		Help: "Journal segments that could not be started (out of descriptors even with the journal's spares): the full one is written on.",
	}, func() float64 { return float64(j.RotateFailures()) }))
	svc.Metrics().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shindo_ingest_journal_lost_records_total",
		Help: "Journal records found unreadable on disk (damaged sectors), passed over by every reader; the peer core holds the same packets.",
	}, func() float64 { return float64(j.Lost()) }))

	fm := forward.NewMetrics(svc.Metrics())
	toRTS := forward.New("rts", rtsOpener(rtsConn), j, forward.Options{MaxBatch: cfg.MaxBatch, Window: cfg.Window,
		Want: recordwire.Intensity}, fm, log)
	toWaveform := forward.New("waveform", waveformOpener(wfConn), j, forward.Options{MaxBatch: cfg.MaxBatch, Window: cfg.Window}, fm, log)
	svc.Go("forward to rts", toRTS)
	svc.Go("forward to waveform", toWaveform)

	linkTable := links.New(cfg.Site)
	svc.Metrics().MustRegister(linkTable.Collector())
	in := &intake{
		site: cfg.Site, gate: verify.New(cfg.Site, reg.Source, verify.Limits{
			Freshness: cfg.Freshness, Window: cfg.ReplayWindow, MaxSeqJump: cfg.MaxSeqJump, Rate: cfg.StationRate, Burst: cfg.StationBurst}), journal: j,
		links: linkTable, counts: newPacketCounter(svc.Metrics(), cfg.Site), log: log,
		overloaded: func() bool { return max(toRTS.Lag(), toWaveform.Lag()) > cfg.MaxLag },
		sampler:    newPacketSampler(cfg.TraceEvery),
		guard:      &checkpoint.Guard{},
	}
	var syncer *peersync.Syncer
	if cfg.NATS != "" || cfg.PeerNATS != "" {
		// A component, so it runs only once wire returns, after the
		// restore below: until then it neither asks the peer nor answers.
		syncer, err = startSync(ctx, svc, cfg, in, reg.Source)
		if err != nil {
			return err
		}
		in.indexed = syncer.Indexed
	}
	// One pass for the replay windows and the sync's index, from the
	// checkpoint on when there is one.
	cp := newCheckpointer(cfg.DataDir, j, in.gate, syncer, in.guard, svc.Metrics(), log)
	if err := in.rebuild(log, cp); err != nil {
		return err
	}
	svc.Go("checkpoint", cp)
	// Closers run in reverse: this one after the listeners and the sync
	// stopped, before the journal closes, so a clean restart reads nothing
	// back.
	svc.OnShutdown("checkpoint", func(context.Context) error { return cp.Save() })
	handle := in.handle

	udp, err := listen.ListenUDP(cfg.UDPAddr, cfg.Readers, handle, log)
	if err != nil {
		return err
	}
	svc.OnShutdown("udp socket", func(context.Context) error { return udp.Close() })
	svc.Go("udp listener", udp)
	wsRefused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_ingest_ws_refused_total", Help: "WebSocket uplinks refused or closed unstarted, by reason.",
	}, []string{"reason"})
	svc.Metrics().MustRegister(wsRefused)
	var wsOpts []service.ListenOption
	if cfg.WSCert != "" {
		certs, err := svc.Certificate(cfg.WSCert, cfg.WSKey)
		if err != nil {
			return err
		}
		tlsCfg := certfile.ServerConfig(certs)
		tlsCfg.NextProtos = []string{"http/1.1"} // a WebSocket upgrades an HTTP/1.1 request
		wsOpts = append(wsOpts, service.WithTLS(tlsCfg))
	}
	wsAddr, err := svc.Listen("station websocket", cfg.WSAddr, listen.WebSocket(handle, listen.WSOptions{
		FirstWithin: cfg.WSFirst, Idle: cfg.WSIdle, PerAddr: cfg.WSPerAddr, PerStation: cfg.WSPerStation,
		Refused: func(reason string) { wsRefused.WithLabelValues(reason).Inc() },
	}, log), wsOpts...)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "station listeners", slog.String("udp", udp.Addr().String()), slog.String("ws", wsAddr.String()))

	ingestv1.RegisterIngestServiceServer(svc.GRPC(), &linkServer{links: linkTable})
	// Link quality is read by the cores' data APIs (both cores', merged).
	svc.Authorize(peerid.Policy{"/" + ingestv1.IngestService_ServiceDesc.ServiceName + "/": peerid.Allow(peerid.DataAPI, peerid.Operator)})
	svc.SetServingStatus(ingestv1.IngestService_ServiceDesc.ServiceName, true)
	svc.AddReadiness("rts", func(ctx context.Context) error { return service.WaitServing(ctx, rtsConn, time.Second) })
	svc.AddReadiness("waveform", func(ctx context.Context) error { return service.WaitServing(ctx, wfConn, time.Second) })
	return nil
}

// packetCounter is shindo_ingest_packets_total with every series created up
// front, so dashboards show zeros rather than gaps.
type packetCounter struct {
	series map[ingestv1.Transport][]prometheus.Counter
	bytes  map[ingestv1.Transport]prometheus.Counter
}

func newPacketCounter(reg prometheus.Registerer, site string) *packetCounter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_ingest_packets_total",
		Help: "Station datagrams received, by transport and result.",
	}, []string{"site", "transport", "result"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_ingest_bytes_total",
		Help: "Bytes of station datagrams received, by transport (the station traffic inter-site sync is measured against).",
	}, []string{"site", "transport"})
	reg.MustRegister(vec, bytes)
	pc := &packetCounter{series: map[ingestv1.Transport][]prometheus.Counter{}, bytes: map[ingestv1.Transport]prometheus.Counter{}}
	for tr, name := range map[ingestv1.Transport]string{ingestv1.Transport_TRANSPORT_UDP: "udp", ingestv1.Transport_TRANSPORT_WS: "ws"} {
		for _, r := range verify.Results() {
			pc.series[tr] = append(pc.series[tr], vec.WithLabelValues(site, name, r.String()))
		}
		pc.bytes[tr] = bytes.WithLabelValues(site, name)
	}
	return pc
}

func (pc *packetCounter) inc(tr ingestv1.Transport, r verify.Result) { pc.series[tr][r].Inc() }

func (pc *packetCounter) received(tr ingestv1.Transport, n int) { pc.bytes[tr].Add(float64(n)) }

type linkServer struct {
	ingestv1.UnimplementedIngestServiceServer
	links *links.Table
}

func (s *linkServer) ListLinks(_ context.Context, req *ingestv1.ListLinksRequest) (*ingestv1.ListLinksResponse, error) {
	return &ingestv1.ListLinksResponse{Links: s.links.List(req.GetStationId())}, nil
}

// The generated stream types differ per service; these adapters give the
// forwarder one shape. Both send journal records as they are
// (forward.SendBatch).

type rtsStream struct {
	s grpc.BidiStreamingClient[rtsv1.IngestRequest, rtsv1.IngestResponse]
}

func (r rtsStream) Send(id uint64, recs [][]byte) error {
	return forward.SendBatch(r.s, id, recs, false)
}

func (r rtsStream) Recv() (uint64, error) {
	resp, err := r.s.Recv()
	return resp.GetAckedBatchId(), err
}

// svc-rts speaks first, to ask for the records of its detections' span
// again when it has restarted.

func (r rtsStream) Hello() (int64, error) {
	resp, err := r.s.Recv()
	return resp.GetReplaySinceMs(), err
}

func (r rtsStream) SendCaughtUp(id uint64, recs [][]byte) error {
	return forward.SendBatch(r.s, id, recs, true)
}

func (r rtsStream) CloseSend() error { return r.s.CloseSend() }

func rtsOpener(conn *grpc.ClientConn) forward.Opener {
	client := rtsv1.NewRTSServiceClient(conn)
	return func(ctx context.Context) (forward.Stream, error) {
		s, err := client.Ingest(ctx, forward.PassThrough())
		return rtsStream{s}, err
	}
}

type waveformStream struct {
	s grpc.BidiStreamingClient[waveformv1.IngestRequest, waveformv1.IngestResponse]
}

func (w waveformStream) Send(id uint64, recs [][]byte) error {
	return forward.SendBatch(w.s, id, recs, false)
}

func (w waveformStream) Recv() (uint64, error) {
	resp, err := w.s.Recv()
	return resp.GetAckedBatchId(), err
}

func (w waveformStream) CloseSend() error { return w.s.CloseSend() }

func waveformOpener(conn *grpc.ClientConn) forward.Opener {
	client := waveformv1.NewWaveformServiceClient(conn)
	return func(ctx context.Context) (forward.Stream, error) {
		s, err := client.Ingest(ctx, forward.PassThrough())
		return waveformStream{s}, err
	}
}

// startSync connects to this core's and the peer's NATS and starts the
// exchange of missing records. The local server must be up (it is part of
// this core); the peer may be down, and is retried for as long as it is.
func startSync(ctx context.Context, svc *service.Service, cfg Config, in *intake, src registry.Source) (*peersync.Syncer, error) {
	var local, peer *nats.Conn
	var err error
	if cfg.NATS != "" {
		if local, err = natsconn.Connect(ctx, cfg.NATS, "shindo-ingest "+cfg.Site+" local", cfg.DependencyWait, svc.ClientTLS()); err != nil {
			return nil, err
		}
		svc.OnShutdown("local nats", func(context.Context) error { local.Close(); return nil })
		svc.AddReadiness("nats", func(context.Context) error {
			if !local.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		})
	}
	if cfg.PeerNATS != "" {
		if peer, err = natsconn.Connect(ctx, cfg.PeerNATS, "shindo-ingest "+cfg.Site+" peer", 0, svc.ClientTLS()); err != nil {
			return nil, err
		}
		svc.OnShutdown("peer nats", func(context.Context) error { peer.Close(); return nil })
	}
	syncer := peersync.New(peersync.Config{
		Site: cfg.Site, PeerSite: cfg.PeerSite, Local: local, Peer: peer, Gate: in.gate, Journal: in.journal, Guard: in.guard,
		Stations: func() []string {
			all := src.Current().All()
			ids := make([]string, len(all))
			for i, st := range all {
				ids[i] = st.ID
			}
			return ids
		},
		Interval: cfg.SyncInterval, ShortWindow: 32, LongWindow: cfg.SyncWindow, LongEvery: 30 * time.Second,
		MaxRecords: 200_000, Log: svc.Logger(), Metrics: svc.Metrics(),
	})
	svc.Go("peer sync", syncer)
	return syncer, nil
}

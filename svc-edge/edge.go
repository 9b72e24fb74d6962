// Package edge is svc-edge: an entrance that subscribes to the cores and
// pushes real-time data — shaking snapshots and early-warning alerts — to
// browsers and apps over Server-Sent Events on the compatible routes of
// SPEC §7.
package edge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"shindo.dev/gen/openapi"
	edgev1 "shindo.dev/gen/shindo/edge/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/apierror"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/compatjson"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/service"
	"shindo.dev/lib/timesync"
	"shindo.dev/svc-edge/internal/corewatch"
	"shindo.dev/svc-edge/internal/eew"
	"shindo.dev/svc-edge/internal/keycheck"
	"shindo.dev/svc-edge/internal/notify"
	"shindo.dev/svc-edge/internal/route"
	"shindo.dev/svc-edge/internal/source"
	"shindo.dev/svc-edge/internal/sse"
	"shindo.dev/svc-edge/internal/tcproute"
	"shindo.dev/svc-edge/internal/wavelive"
	"shindo.dev/svc-edge/internal/wsapi"
)

// Name is the binary and service name.
const Name = "shindo-edge"

// Config is svc-edge's configuration (env prefix SHINDO_EDGE_).
type Config struct {
	service.Common
	HTTPAddr     string        `conf:"http-addr" help:"public HTTP listen address (SSE and compatible routes)"`
	TLSCert      string        `conf:"tls-cert" help:"certificate (PEM, the leaf first, then intermediates) to serve HTTPS with on http-addr, reloaded when the file changes and on SIGHUP; empty: plain HTTP"`
	TLSKey       string        `conf:"tls-key" help:"the certificate's private key (PEM)"`
	PlainAddr    string        `conf:"http-plain-addr" help:"with tls-cert, a plain-HTTP listen address beside HTTPS, redirecting to it (empty: none)"`
	PlainServe   bool          `conf:"http-plain-serve" help:"serve everything on http-plain-addr instead of redirecting to HTTPS"`
	HSTS         time.Duration `conf:"hsts-max-age" help:"with tls-cert, the max-age of a Strict-Transport-Security header on every HTTPS response (0: none)"`
	HTTPShared   bool          `conf:"http-reuse-port" help:"let several edge processes listen on http-addr together (SO_REUSEPORT), the kernel spreading connections across them: for more clients than one process may hold descriptors"`
	RTS          []string      `conf:"rts" help:"svc-rts gRPC addresses of the cores, comma-separated, preferred first"`
	Hedge        time.Duration `conf:"rts-hedge" default:"100ms" help:"how long the next tick waits for the serving core once another core delivered it, seeing as many stations, before that core's copy is served (0: until the serving core is 750ms late)"`
	Retry        time.Duration `conf:"sse-retry" default:"3s" help:"reconnect delay announced to SSE clients"`
	KeepAlive    time.Duration `conf:"sse-keepalive" default:"15s" help:"interval of SSE keep-alive comments"`
	ClientBuffer int           `conf:"sse-buffer" default:"16" help:"events an SSE client may fall behind before it is dropped"`
	WriteTimeout time.Duration `conf:"sse-write-timeout" default:"10s" help:"longest one write to an SSE client may take"`
	MaxClients   int           `conf:"sse-max-clients" default:"60000" help:"most SSE clients per stream"`
	History      time.Duration `conf:"sse-history" default:"120s" help:"how long events are kept for clients resuming with Last-Event-ID"`
	MaxPerAddr   int           `conf:"sse-max-per-ip" default:"200" help:"most SSE connections from one client address"`
	MaxQueued    int           `conf:"sse-max-queued" default:"1048576" help:"bytes a stream's socket may hold unread by its client for sse-max-stall before the client is dropped (0: no bound)"`
	MaxStall     time.Duration `conf:"sse-max-stall" default:"15s" help:"how long a stream's client may leave more than sse-max-queued bytes unread"`
	EEWAuthor    string        `conf:"eew-author" default:"trem" help:"the author of the alerts this network issues from its detections (/api/v2/eq/eew): the apps accept trem (a network's own alerts) and cwa"`

	DataAPI          []string      `conf:"data-api" help:"data API base URLs of the cores (http://host:port; https:// with mtls-cert), comma-separated, preferred first; empty serves no data API"`
	Offload          float64       `conf:"api-offload" default:"0.3" help:"share of data-API requests sent to the next core while the preferred one is overloaded"`
	OverloadLatency  time.Duration `conf:"api-overload-latency" default:"250ms" help:"smoothed core latency at which a core counts as overloaded"`
	OverloadInFlight int           `conf:"api-overload-inflight" default:"256" help:"requests in flight at which a core counts as overloaded"`
	EjectAfter       int           `conf:"api-eject-after" default:"3" help:"consecutive failed requests or probes that eject a core"`
	ReadmitAfter     int           `conf:"api-readmit-after" default:"2" help:"consecutive passing probes that readmit an ejected core"`
	ProbeInterval    time.Duration `conf:"api-probe-interval" default:"1s" help:"interval of the health probes of the cores' data APIs"`

	SeedLinkAddr    string   `conf:"seedlink-addr" help:"SeedLink listen address (TCP, and SeedLink over WebSocket on the same port), routed to the cores' SeedLink (-seedlink) in the data API's order; empty: none"`
	SeedLinkTLSAddr string   `conf:"seedlink-tls-addr" help:"SeedLink over TLS listen address (18500 by SeedLink's convention; WebSocket over TLS on the same port), with tls-cert's certificate, routed like seedlink-addr; empty: none"`
	SeedLink        []string `conf:"seedlink" help:"the cores' SeedLink addresses (host:port), comma-separated, in the order of -data-api"`
	SeedLinkClients int      `conf:"seedlink-max-clients" default:"4000" help:"most SeedLink connections routed at once"`

	DataGRPC    []string      `conf:"data-grpc" help:"svc-dataapi gRPC addresses of the cores, comma-separated: their reports and stations are pushed to this edge (the report topic, the station check of live waveforms); empty: no report topic"`
	ReportDelay time.Duration `conf:"report-delay" default:"5s" help:"how long after a report changed it is announced on the report topic: the same tick at every edge, so longer than a report takes to reach them all"`

	Waveform         []string `conf:"waveform" help:"svc-waveform gRPC addresses of the cores, comma-separated; empty serves no live waveforms"`
	WaveformStations int      `conf:"waveform-max-stations" default:"2000" help:"most stations whose live waveforms are streamed at once"`

	NATS         []string `conf:"nats" help:"NATS URLs of the cores (one per core), comma-separated: where notifications are stored; with -etcd, enables notifications"`
	Etcd         []string `conf:"etcd" help:"etcd endpoints (http://host:port), comma-separated: notification order and delivery ownership"`
	NotifyTokens []string `conf:"notify-tokens" secret:"true" help:"bearer tokens app servers post notifications with (POST /v1/notify), comma-separated, at least 16 characters each"`
	// Each subscription writes to etcd; see subscribeLimit.
	SubscribeRate      float64 `conf:"notify-subscribe-rate" default:"1" help:"notification subscriptions per second one client address (IPv6: /64) may open (0: unlimited)"`
	SubscribeBurst     int     `conf:"notify-subscribe-burst" default:"10" help:"burst of notify-subscribe-rate"`
	SubscribeEdgeRate  float64 `conf:"notify-subscribe-edge-rate" default:"200" help:"notification subscriptions per second this edge opens in all (0: unlimited)"`
	SubscribeEdgeBurst int     `conf:"notify-subscribe-edge-burst" default:"400" help:"burst of notify-subscribe-edge-rate"`

	Entrances []string `conf:"entrances" help:"public base URLs of every edge (http://host:port), comma-separated, this one included: where the dashboard switches to after 3 failed reconnects; empty: this edge only"`
}

// notifyConfig is the notification settings.
func (c *Config) notifyConfig() notify.Config {
	n := notify.Defaults()
	n.Site, n.NATS, n.Etcd, n.Tokens = c.Site, c.NATS, c.Etcd, c.NotifyTokens
	return n
}

// routeOptions are the data-API routing settings.
func (c *Config) routeOptions() route.Options {
	o := route.Defaults()
	o.Offload, o.OverloadLatency, o.OverloadInFlight = c.Offload, c.OverloadLatency, c.OverloadInFlight
	o.EjectAfter, o.ReadmitAfter, o.ProbeInterval = c.EjectAfter, c.ReadmitAfter, c.ProbeInterval
	o.ProbeTimeout = min(o.ProbeTimeout, c.ProbeInterval)
	return o
}

// DefaultConfig returns the configuration with svc-edge's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{Site: "TPE-1", GRPCAddr: ":8082", AdminAddr: "127.0.0.1:8089"}, HTTPAddr: ":8080"}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr %q: want host:port", c.HTTPAddr))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls-cert and tls-key go together"))
	}
	if c.TLSCert == "" && (c.PlainAddr != "" || c.PlainServe || c.HSTS != 0) {
		errs = append(errs, errors.New("http-plain-addr, http-plain-serve and hsts-max-age need tls-cert"))
	}
	if c.PlainAddr != "" {
		if _, _, err := net.SplitHostPort(c.PlainAddr); err != nil {
			errs = append(errs, fmt.Errorf("http-plain-addr %q: want host:port", c.PlainAddr))
		}
	}
	if c.HSTS < 0 {
		errs = append(errs, errors.New("hsts-max-age must not be negative"))
	}
	if len(c.RTS) == 0 {
		errs = append(errs, errors.New("rts needs at least one core address"))
	}
	if c.Retry < 100*time.Millisecond || c.KeepAlive < time.Second || c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("sse-retry must be at least 100ms, sse-keepalive at least 1s, sse-write-timeout positive"))
	}
	if !validAuthor(c.EEWAuthor) {
		errs = append(errs, fmt.Errorf("eew-author %q: 1 to 32 lowercase letters, digits, '-' or '_'", c.EEWAuthor))
	}
	if c.Hedge < 0 || c.Hedge > 500*time.Millisecond {
		errs = append(errs, errors.New("rts-hedge: 0 to 500ms"))
	}
	if c.MaxQueued < 0 || c.MaxStall < time.Second {
		errs = append(errs, errors.New("sse-max-queued must not be negative, sse-max-stall at least 1s"))
	}
	if c.ClientBuffer < 1 || c.MaxClients < 1 || c.MaxPerAddr < 1 {
		errs = append(errs, errors.New("sse-buffer, sse-max-clients and sse-max-per-ip must be positive"))
	}
	if c.SubscribeRate < 0 || c.SubscribeEdgeRate < 0 || c.SubscribeBurst < 1 || c.SubscribeEdgeBurst < 1 {
		errs = append(errs, errors.New("notify-subscribe rates must not be negative, their bursts must be positive"))
	}
	if (len(c.NATS) > 0) != (len(c.Etcd) > 0) {
		errs = append(errs, errors.New("notifications need both nats and etcd (or neither)"))
	}
	if len(c.NATS) > 0 {
		errs = append(errs, c.notifyConfig().Validate())
	}
	if c.WaveformStations < 1 {
		errs = append(errs, errors.New("waveform-max-stations must be positive"))
	}
	if c.History < time.Minute {
		errs = append(errs, errors.New("sse-history must be at least 1m (clients resume over 60 s)"))
	}
	if len(c.DataAPI) > 0 {
		errs = append(errs, c.routeOptions().Validate())
	}
	for _, u := range c.DataAPI {
		// Under mutual TLS the data APIs serve nothing but TLS.
		if c.MTLSCert != "" && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("data-api %q: with mtls-cert the data APIs serve HTTPS only; use https://", u))
		}
	}
	if (c.SeedLinkAddr != "" || c.SeedLinkTLSAddr != "") && len(c.SeedLink) != len(c.DataAPI) {
		errs = append(errs, errors.New("seedlink-addr, seedlink-tls-addr: give -seedlink, one address per -data-api core, in the same order"))
	}
	if c.SeedLinkTLSAddr != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("seedlink-tls-addr needs tls-cert"))
	}
	for _, a := range c.SeedLink {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("seedlink %q: want host:port", a))
		}
	}
	if c.SeedLinkClients < 1 {
		errs = append(errs, errors.New("seedlink-max-clients must be positive"))
	}
	if c.ReportDelay < time.Second || c.ReportDelay > 10*time.Minute {
		errs = append(errs, errors.New("report-delay: 1s to 10m"))
	}
	for _, a := range c.DataGRPC {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("data-grpc %q: want host:port", a))
		}
	}
	for _, e := range c.Entrances {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("entrance %q: want http://host:port", e))
		}
	}
	return errors.Join(errs...)
}

// Run runs svc-edge until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		return wire(ctx, svc, cfg)
	})
}

func wire(ctx context.Context, svc *service.Service, cfg Config) error {
	st, err := newStreams(cfg.Site, cfg.EEWAuthor, sse.Options{
		Retry: cfg.Retry, KeepAlive: cfg.KeepAlive, Buffer: cfg.ClientBuffer,
		WriteTimeout: cfg.WriteTimeout, MaxClients: cfg.MaxClients, Stop: svc.Stopping(),
		History: cfg.History, MaxHistory: int(cfg.History/(250*time.Millisecond)) + 16,
		WebSocket: wsapi.Frame, MaxQueued: cfg.MaxQueued, MaxStall: cfg.MaxStall,
	}, cfg.MaxPerAddr)
	if err != nil {
		return err
	}
	svc.Metrics().MustRegister(st.collectors()...)

	conns, err := connectAll(ctx, svc, "rts", cfg.RTS, cfg.DependencyWait)
	if err != nil {
		return err
	}
	sel := source.New(cfg.Site, cfg.RTS, conns, st.serve, svc.Logger())
	// A restarted edge holds, from its first tick, the history its clients
	// resume from; a gap in the stream is filled the same way.
	sel.Fill = cfg.History
	filled := prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_ticks_filled_total",
		Help: "Ticks fetched from the cores' archives: the history before the first live tick, and gaps in the stream."})
	svc.Metrics().MustRegister(filled)
	sel.OnFill = func(n int) { filled.Add(float64(n)) }
	hedged := prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_ticks_hedged_total",
		Help: "Ticks served from another core because the serving core was late with them (-rts-hedge)."})
	svc.Metrics().MustRegister(hedged)
	sel.Hedge, sel.OnHedge = cfg.Hedge, hedged.Inc
	svc.Go("core subscriptions", sel)

	status := &statusServer{site: cfg.Site, sel: sel, hub: st.hub, latest: st.latestTick.Load}
	edgev1.RegisterEdgeServiceServer(svc.GRPC(), status)
	svc.Authorize(peerid.Policy{"/" + edgev1.EdgeService_ServiceDesc.ServiceName + "/": peerid.Allow(peerid.Operator, peerid.Edge)})
	svc.SetServingStatus(edgev1.EdgeService_ServiceDesc.ServiceName, true)
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true},
	}), runtime.WithErrorHandler(apierror.Gateway), runtime.WithRoutingErrorHandler(apierror.Routing))
	if err := edgev1.RegisterEdgeServiceHandlerServer(ctx, gw, status); err != nil {
		return fmt.Errorf("register gateway: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /v1/edge/status", gw)
	// The document of what this edge answers: its own routes and, with
	// cores to route to, the data API's.
	doc, err := openapi.Select(func(path string) bool { return len(cfg.DataAPI) > 0 || path == "/v1/edge/status" })
	if err != nil {
		return fmt.Errorf("openapi document: %w", err)
	}
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})
	var bal *route.Balancer
	if len(cfg.DataAPI) > 0 {
		// The data APIs' REST is an internal hop: under -mtls-cert the edge
		// presents its certificate, and trusts the network's CA alone.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = svc.ClientTLS()
		bal, err = route.New(cfg.DataAPI, cfg.routeOptions(), otelhttp.NewTransport(tr), svc.Logger())
		if err != nil {
			return err
		}
		svc.Go("data API probes", bal)
		svc.Metrics().MustRegister(routeCollector{bal})
		// Everything of the data API the edge does not answer itself goes
		// to a core; the more specific patterns above and below win.
		api := bal.Handler()
		mux.Handle("/v1/", api)
		mux.Handle("/api/", api)
		mux.Handle("/resource/", api) // the newest TREM-Lite's station list (CSV)
		mux.Handle("/fdsnws/", api)   // FDSN web services (station metadata)

		// The WebSocket API of subscribed apps: its tokens are the data
		// API's keys.
		wo := wsapi.Defaults()
		wo.Hub, wo.Keys, wo.Log = st.hub, keycheck.New(bal), svc.Logger()
		wo.Addr, wo.Acquire, wo.Release = clientAddr, st.perAddr.acquire, st.perAddr.release
		wo.MaxClients = cfg.MaxClients
		ws := wsapi.New(wo)
		svc.Metrics().MustRegister(ws.Collectors()...)
		svc.Go("websocket api", service.ComponentFunc(ws.Run))
		mux.Handle("GET /ws", ws)
		mux.Handle("GET /websocket", ws) // the path ExpTech's own edges answer on

		if cfg.SeedLinkAddr != "" || cfg.SeedLinkTLSAddr != "" {
			if err := routeSeedLink(svc, cfg, bal, st.perAddr); err != nil {
				return err
			}
		}
	}
	var stationExists func(context.Context, string) (bool, error)
	if len(cfg.DataGRPC) > 0 {
		// Reports and stations are pushed by the cores' data APIs.
		conns, err := connectAll(ctx, svc, "data api", cfg.DataGRPC, cfg.DependencyWait)
		if err != nil {
			return err
		}
		watch := corewatch.New(cfg.DataGRPC, conns, corewatch.NewFeed(cfg.ReportDelay, cfg.History/2, st.queueReports, svc.Logger()), svc.Logger())
		svc.Metrics().MustRegister(watch.Collectors()...)
		svc.Go("core watches", watch)
		st.reports = true
		stationExists = watch.Exists
	}
	if len(cfg.Waveform) > 0 {
		ws, err := waveforms(ctx, svc, cfg, st, stationExists)
		if err != nil {
			return err
		}
		mux.HandleFunc("GET /v1/stream/waveform", ws.serve)
	}
	if len(cfg.NATS) > 0 {
		ncfg := cfg.notifyConfig()
		ncfg.TLS = svc.ClientTLS()
		n, err := notify.New(ctx, ncfg, svc.Logger())
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		svc.Go("notifications", n)
		svc.OnShutdown("notifications", func(context.Context) error { return n.Close() })
		svc.Metrics().MustRegister(n.Collectors()...)
		svc.AddReadiness("notifications", n.Ready)
		n.Register(mux)
		mux.HandleFunc("OPTIONS /v1/notify/ack", allowAckPreflight)
		st.notify = n
		st.subscribe = newSubscribeLimit(cfg.SubscribeRate, cfg.SubscribeBurst, cfg.SubscribeEdgeRate, cfg.SubscribeEdgeBurst)
		svc.Metrics().MustRegister(st.subscribe.refused)
		svc.Go("subscription buckets", service.ComponentFunc(func(ctx context.Context) error { return st.subscribe.buckets.Run(ctx, time.Minute) }))
	}
	mux.HandleFunc("GET /ntp", timesync.ServeNTP)
	mux.HandleFunc("GET /v1/time", serveTime)
	st.register(mux)
	registerDashboard(mux, cfg.Site, cfg.Entrances)
	err = listenPublic(svc, cfg, allowCrossOrigin(mux))
	svc.AddReadiness("rts source", func(context.Context) error {
		if st.hub.Latest(topicRTS) == nil {
			return errors.New("no snapshot received yet")
		}
		return nil
	})
	return err
}

// connectAll connects to a service of every core, closing each connection
// at shutdown. An edge starts with the cores it reaches; the others come
// later (service.Connect).
func connectAll(ctx context.Context, svc *service.Service, what string, targets []string, wait time.Duration) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, len(targets))
	for _, target := range targets {
		conn, err := svc.Connect(ctx, what, target, wait)
		if err != nil {
			return nil, err
		}
		svc.OnShutdown(what+" connection "+target, func(context.Context) error { return conn.Close() })
		conns = append(conns, conn)
	}
	return conns, nil
}

// waveforms connects to the cores' waveform services for the live
// waveform route.
func waveforms(ctx context.Context, svc *service.Service, cfg Config, st *streams, exists func(context.Context, string) (bool, error)) (*waveformStream, error) {
	conns, err := connectAll(ctx, svc, "waveform", cfg.Waveform, cfg.DependencyWait)
	if err != nil {
		return nil, err
	}
	live := wavelive.New(ctx, cfg.Waveform, conns, wavelive.Options{
		SSE: sse.Options{Retry: cfg.Retry, KeepAlive: cfg.KeepAlive, Buffer: 64, WriteTimeout: cfg.WriteTimeout,
			MaxClients: cfg.MaxClients, Stop: svc.Stopping(), History: time.Minute, MaxHistory: 130,
			MaxQueued: cfg.MaxQueued, MaxStall: cfg.MaxStall},
		Linger: time.Minute, MaxStations: cfg.WaveformStations,
	}, svc.Logger())
	svc.Metrics().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shindo_edge_waveform_stations", Help: "Stations whose live waveforms are streamed.",
	}, func() float64 { return float64(live.Watched()) }))
	return &waveformStream{live: live, streams: st, exists: exists}, nil
}

// Topics of the edge's streams, with their index in event IDs.
const (
	topicRTS       = "rts"
	topicEEW       = "eew"
	topicReport    = "report"
	topicIntensity = "intensity"
	topicLPGM      = "lpgm"
	// The v1 topics of GET /api/v1/trem/sse (the newest TREM-Lite): every
	// tick's rts.v1, the ticks with a triggered station, and the intensity
	// flashes as TREM XML.
	topicRTSv1        = "rts.v1"
	topicRTSv1Alert   = "rts.v1.alert"
	topicIntensityXML = "intensity.v1"
)

// topicNotify is a client's own notifications (/v1/stream with client=);
// its events are not in the shared history and carry the client's
// position as their ID.
const topicNotify = "notify"

// streamTopics are the topics /v1/stream serves (notify apart).
var streamTopics = map[string]bool{topicRTS: true, topicEEW: true, topicReport: true, topicIntensity: true, topicLPGM: true}

var topicIndex = map[string]int{topicRTS: 0, topicEEW: 1, topicReport: 2, topicIntensity: 3, topicLPGM: 4,
	topicRTSv1: 5, topicRTSv1Alert: 6, topicIntensityXML: 7}

// streams hold the edge's events: one hub, every event tagged with its
// topic and an ID from its data (the tick), kept for the SSE history. The
// RTS topic gets one event per tick. The EEW topic gets one per change of
// the alert list (an alert appears, gets a new serial, or leaves),
// deduplicated by detection ID and serial across switches of core (package
// eew), and, while alerts are listed, the list again at every tick:
// TREM-Lite expires old alerts only when a list arrives (data.js:346-366)
// and its stream parser passes one read in three (http.js:55-97), so a
// list sent once may be lost to it. The intensity and LPGM topics get one
// event per change of the flashes and long-period stations of the served
// detections. The report topic gets one event per batch of new or revised
// earthquake reports, at a tick chosen from their data (corewatch.Feed). The
// compatible routes and /v1/stream serve from it.
type streams struct {
	hub    *sse.Hub
	feed   *eew.Feed
	site   string // this edge's
	author string // of the alerts
	// The flashes and long-period stations last published, and each
	// detection's flash last sent as XML; guarded by publishing.
	lastIntensity, lastLPGM []byte
	sentXML                 map[string]flashVersion
	info                    *sse.Event
	perAddr                 *addrLimit
	notify                  *notify.Service // nil: this edge serves no notifications
	subscribe               *subscribeLimit // with notify
	reports                 bool            // the report topic is fed

	// publishing guards the reports waiting for their tick, queued by the
	// report feed's goroutine and published by the source's.
	publishing     sync.Mutex
	pendingReports map[string]corewatch.Pending

	latestTick   atomic.Int64
	ticks        prometheus.Counter
	alerts       prometheus.Counter
	reportEvents prometheus.Counter
}

func newStreams(site, author string, opts sse.Options, maxPerAddr int) (*streams, error) {
	hello, err := json.Marshal(map[string]string{"location": site})
	if err != nil {
		return nil, err
	}
	return &streams{
		hub:     sse.NewHub(opts),
		feed:    eew.New(),
		site:    site,
		author:  author,
		info:    sse.NewEvent("info", hello),
		perAddr: newAddrLimit(maxPerAddr),
		ticks:   prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_rts_ticks_total", Help: "RTS snapshots served."}),
		alerts:  prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_edge_eew_updates_total", Help: "Changes of the EEW alert list served."}),
		reportEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_report_events_total", Help: "Events of the report topic served."}),
		pendingReports: map[string]corewatch.Pending{},
		sentXML:        map[string]flashVersion{},
	}, nil
}

// flashVersion is what of a flash its XML depends on.
type flashVersion struct {
	serial uint32
	final  bool
}

func (s *streams) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		s.ticks, s.alerts, s.reportEvents,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shindo_edge_sse_clients", Help: "Connected SSE clients.",
		}, func() float64 { n, _ := s.hub.Stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_edge_sse_dropped_total", Help: "SSE clients dropped for falling behind.",
		}, func() float64 { _, d := s.hub.Stats(); return float64(d) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_edge_sse_repeats_skipped_total", Help: "Events not sent to an SSE client that already had them (published again at or before where it resumed).",
		}, func() float64 { return float64(s.hub.Repeats()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_edge_sse_refused_total", Help: "Stream clients (SSE and the WebSocket API) refused with 503: the edge held -sse-max-clients.",
		}, func() float64 { return float64(s.hub.Refused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_edge_per_address_refused_total", Help: "Connections refused with 429 or closed by the per-address limit of streams, the WebSocket API and the SeedLink route.",
		}, func() float64 { return float64(s.perAddr.turnedAway()) }),
	}
}

// serve publishes a snapshot the source serves (in tick order, from one
// goroutine at a time).
func (s *streams) serve(snap *rtsv1.Snapshot) {
	t := snap.GetTimeMs()
	s.publishing.Lock()
	defer s.publishing.Unlock()
	s.latestTick.Store(t)
	s.hub.Publish(sse.NewEventID(topicRTS, sse.ID(t, topicIndex[topicRTS]), "", compatjson.RTS(snap)))
	s.ticks.Inc()
	alerts, changed := s.feed.Update(t, snap.GetDetections())
	if changed || len(alerts) > 0 {
		s.hub.Publish(sse.NewEventID(topicEEW, sse.ID(t, topicIndex[topicEEW]), "", compatjson.EEW(s.author, alerts)))
	}
	if changed {
		s.alerts.Inc()
	}
	// Reports before the topics with higher indices: within a tick, events
	// go out in the order of their IDs, which resuming clients rely on.
	s.publishReportsLocked(t)
	if b := compatjson.Intensity(s.author, alerts); s.lastIntensity == nil || !bytes.Equal(b, s.lastIntensity) {
		s.lastIntensity = b
		s.hub.Publish(sse.NewEventID(topicIntensity, sse.ID(t, topicIndex[topicIntensity]), "", b))
	}
	if b := compatjson.LPGM(s.author, alerts); s.lastLPGM == nil || !bytes.Equal(b, s.lastLPGM) {
		s.lastLPGM = b
		s.hub.Publish(sse.NewEventID(topicLPGM, sse.ID(t, topicIndex[topicLPGM]), "", b))
	}
	s.publishV1Locked(t, snap, alerts)
}

// publishV1Locked publishes the v1 topics of tick t: the rts.v1 payload,
// again on the alert topic when a station is triggered, and the XML of one
// flash that changed — the earliest detection's; another that changed in
// the same tick goes at the next, so every event keeps its own ID.
func (s *streams) publishV1Locked(t int64, snap *rtsv1.Snapshot, alerts []*rtsv1.Detection) {
	rts := compatjson.RTSv1(snap)
	s.hub.Publish(sse.NewEventID(topicRTSv1, sse.ID(t, topicIndex[topicRTSv1]), "trem.rts.v1", rts))
	if slices.ContainsFunc(snap.GetStations(), (*rtsv1.StationState).GetAlert) {
		s.hub.Publish(sse.NewEventID(topicRTSv1Alert, sse.ID(t, topicIndex[topicRTSv1Alert]), "trem.rts.v1", rts))
	}
	listed := map[string]bool{}
	var due *rtsv1.Detection
	for _, d := range alerts { // by first trigger
		listed[d.GetId()] = true
		v := flashVersion{serial: d.GetAreaSerial(), final: d.GetFinal()}
		if len(d.GetAreas()) > 0 && s.sentXML[d.GetId()] != v && due == nil {
			due = d
		}
	}
	for id := range s.sentXML {
		if !listed[id] {
			delete(s.sentXML, id)
		}
	}
	if due != nil {
		s.sentXML[due.GetId()] = flashVersion{serial: due.GetAreaSerial(), final: due.GetFinal()}
		s.hub.Publish(sse.NewEventID(topicIntensityXML, sse.ID(t, topicIndex[topicIntensityXML]), "trem.intensity.v1", compatjson.IntensityXML(due)))
	}
}

// queueReports holds reports for their ticks (corewatch.Feed); a report
// queued again before its tick is replaced by the newer version.
func (s *streams) queueReports(rs []corewatch.Pending) {
	s.publishing.Lock()
	defer s.publishing.Unlock()
	for _, r := range rs {
		s.pendingReports[r.ID] = r
	}
}

// publishReportsLocked publishes the reports due by tick t as one event of
// the report topic, a JSON array of reports ordered by due tick and ID,
// with the ID of tick t: after the tick's snapshot and alerts, before its
// intensity flash and the later topics. s.publishing is held.
func (s *streams) publishReportsLocked(t int64) {
	var due []corewatch.Pending
	for id, r := range s.pendingReports {
		if r.Due <= t {
			due = append(due, r)
			delete(s.pendingReports, id)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b corewatch.Pending) int {
		return cmp.Or(cmp.Compare(a.Due, b.Due), strings.Compare(a.ID, b.ID))
	})
	data := []byte{'['}
	for i, r := range due {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, r.Data...)
	}
	data = append(data, ']')
	s.hub.Publish(sse.NewEventID(topicReport, sse.ID(t, topicIndex[topicReport]), "", data))
	s.reportEvents.Inc()
}

// register adds the compatible routes of SPEC §7 — GET /api/v2/trem/rts,
// /api/v2/eq/eew, /api/v2/trem/intensity and /api/v2/trem/lpgm, each with
// ?sse=1 and &compress=1 — and /v1/stream.
func (s *streams) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/trem/rts", s.compat(topicRTS))
	mux.HandleFunc("GET /api/v2/eq/eew", s.compat(topicEEW))
	mux.HandleFunc("GET /api/v2/trem/intensity", s.compat(topicIntensity))
	mux.HandleFunc("GET /api/v2/trem/lpgm", s.compat(topicLPGM))
	mux.HandleFunc("GET /v1/stream", s.stream)
	mux.HandleFunc("GET /api/v1/trem/sse", s.tremSSE)
}

// compat serves one topic: its latest event as a JSON document, or as a
// stream that starts with the latest event when the client asks with sse=1
// or, as TREM-Lite does (src/js/index/data/http.js:165-168 of
// ExpTechTW/TREM-Lite at 9bbaccf: no query, only the header), with
// Accept: text/event-stream. sse=0 asks for the document whatever the
// header says.
func (s *streams) compat(topic string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := parseStreamQuery(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.Header().Add("Vary", "Accept")
		if q.sse || !q.sseGiven && acceptsEventStream(r.Header.Values("Accept")) {
			lastID, err := lastEventID(r)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			s.serveSSE(w, r, sse.ServeOptions{Compressed: q.compress, Hello: []*sse.Event{s.info}, LastID: lastID,
				Latest: true, Want: func(t string) bool { return t == topic }})
			return
		}
		latest := s.hub.Latest(topic)
		if latest == nil {
			if topic != topicRTS && s.hub.Latest(topicRTS) != nil {
				// Snapshots flow and none carried an alert: quiet.
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte("[]"))
				return
			}
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "no snapshot yet")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(latest.Data())
	}
}

// stream serves GET /v1/stream?topics=rts,eew,report,notify: every event with its id,
// resuming after Last-Event-ID (header, or last_event_id for clients that
// cannot set headers) from the history.
func (s *streams) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, notifications, err := parseTopics(q.Get("topics"), s.reports)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	compress := q.Get("compress") == "1"
	lastID, err := lastEventID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	o := sse.ServeOptions{Compressed: compress, Hello: []*sse.Event{s.info}, LastID: lastID,
		Latest: lastID == "", Want: func(t string) bool { return want[t] }}
	if !notifications {
		s.serveSSE(w, r, o)
		return
	}
	if s.notify == nil {
		writeError(w, http.StatusBadRequest, "topic notify: this edge serves no notifications")
		return
	}
	if !s.subscribe.admit(w, r) {
		return
	}
	// The subscription outlives the request's handler (the hub takes the
	// connection over), so it ends with the stream, through OnClose.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	ch, err := s.notify.Subscribe(ctx, q.Get("client"))
	switch {
	case errors.Is(err, notify.ErrBadClient):
		cancel()
		writeError(w, http.StatusBadRequest, "client: "+err.Error())
		return
	case err != nil:
		cancel()
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusServiceUnavailable, "notifications: "+err.Error())
		return
	}
	private := make(chan *sse.Event)
	go func() {
		defer close(private)
		for n := range ch {
			select {
			case private <- sse.NewEvent(topicNotify, n.JSON()):
			case <-ctx.Done():
				return
			}
		}
	}()
	o.Private, o.OnClose = private, cancel
	s.serveSSE(w, r, o)
}

// parseTopics reads /v1/stream's topics= (comma-separated): the hub
// topics wanted, and whether notifications are; reports tells whether this
// edge serves reports. An unknown topic is an error naming it.
func parseTopics(topics string, reports bool) (want map[string]bool, notifications bool, err error) {
	want = map[string]bool{}
	for _, part := range strings.Split(topics, ",") {
		part = strings.TrimSpace(part)
		switch public := streamTopics[part]; {
		case part == "":
			continue
		case part == topicNotify:
			notifications = true
		case part == topicReport && !reports:
			return nil, false, errors.New("topic report: this edge serves no reports (it watches no data API)")
		case !public:
			return nil, false, fmt.Errorf("unknown topic %q: this edge serves rts, eew, intensity, lpgm, report and notify", truncate(part, 64))
		default:
			want[part] = true
		}
	}
	if len(want) == 0 && !notifications {
		return nil, false, errors.New("topics: give one or more of rts, eew, intensity, lpgm, report, notify (comma-separated)")
	}
	return want, notifications, nil
}

// truncate cuts an echoed value from outside to at most n bytes, at a
// rune's start.
func truncate(v string, n int) string {
	if len(v) <= n {
		return v
	}
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n] + "…"
}

// tremTopics are the topics of GET /api/v1/trem/sse and the hub topics
// they carry (with mode=live, or without, asleep).
var tremTopics = map[string]struct{ live, asleep string }{
	"trem.rts.v1":       {topicRTSv1, topicRTSv1Alert},
	"trem.intensity.v1": {topicIntensityXML, topicIntensityXML},
}

// maxTremTopics bounds the topics one TREM stream names, granted or
// denied: each denied one is echoed in the opening info event.
const maxTremTopics = 16

// parseTremTopics reads /api/v1/trem/sse's topics= and mode=: the hub
// topics wanted, the TREM topics granted in their order, and those denied
// with why.
func parseTremTopics(topics, mode string) (want map[string]bool, granted []string, denied map[string]string, err error) {
	live := false
	switch mode {
	case "live":
		live = true
	case "":
	default:
		return nil, nil, nil, errors.New("mode: live, or none for alert frames only")
	}
	want, denied = map[string]bool{}, map[string]string{}
	for _, name := range strings.Split(topics, ",") {
		name = strings.TrimSpace(name)
		if name == "" || slices.Contains(granted, name) {
			continue
		}
		if _, again := denied[name]; again {
			continue
		}
		if len(granted)+len(denied) >= maxTremTopics {
			return nil, nil, nil, fmt.Errorf("topics: at most %d", maxTremTopics)
		}
		t, ok := tremTopics[name]
		if !ok {
			denied[name] = "unknown topic: this edge serves trem.rts.v1 and trem.intensity.v1"
			continue
		}
		granted = append(granted, name)
		if live {
			want[t.live] = true
		} else {
			want[t.asleep] = true
		}
	}
	if len(granted) == 0 {
		return nil, nil, nil, errors.New("topics: give trem.rts.v1 and/or trem.intensity.v1 (comma-separated)")
	}
	return want, granted, denied, nil
}

// tremSSE serves GET /api/v1/trem/sse?topics=trem.intensity.v1,trem.rts.v1
// [&mode=live], the stream of the newest TREM-Lite
// (packages/core/src/features/data/dataHttp.ts of ExpTechTW/TREM-Lite at
// 2400a0e): one named event per topic, rts.v1 as JSON and the intensity
// flashes as TREM XML, opened by an info event naming the topics granted
// and denied. With mode=live every tick's rts.v1; without, asleep, only the
// ticks with a triggered station. Resumes with Last-Event-ID like
// /v1/stream.
func (s *streams) tremSSE(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, granted, denied, err := parseTremTopics(q.Get("topics"), q.Get("mode"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	lastID, err := lastEventID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	greeting := map[string]any{"location": s.site, "topics": granted}
	if len(denied) > 0 {
		greeting["denied"] = denied
	}
	hello, _ := json.Marshal(greeting)
	s.serveSSE(w, r, sse.ServeOptions{Hello: []*sse.Event{sse.NewEvent("info", hello)}, LastID: lastID,
		Latest: lastID == "" && q.Get("mode") == "live", Want: func(t string) bool { return want[t] }})
}

// serveSSE serves a stream within the per-address connection limit.
func (s *streams) serveSSE(w http.ResponseWriter, r *http.Request, o sse.ServeOptions) {
	addr := clientAddr(r)
	if !s.perAddr.acquire(addr) {
		if o.OnClose != nil {
			o.OnClose()
		}
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusTooManyRequests, "too many streams from this address")
		return
	}
	closed := o.OnClose
	o.OnClose = func() {
		s.perAddr.release(addr)
		if closed != nil {
			closed()
		}
	}
	s.hub.Serve(w, r, o)
}

// lastEventID reads the position to resume from: the Last-Event-ID header
// or the last_event_id parameter; anything but an event ID is refused.
func lastEventID(r *http.Request) (string, error) {
	id := r.Header.Get("Last-Event-ID")
	if id == "" {
		id = r.URL.Query().Get("last_event_id")
	}
	if id != "" && !sse.ValidID(id) {
		return "", errors.New("Last-Event-ID: not an event ID of this stream (<ms>-<topic>)")
	}
	return id, nil
}

// validAuthor reports whether a is a sane alert author: the apps compare
// it with short lowercase names.
func validAuthor(a string) bool {
	if a == "" || len(a) > 32 {
		return false
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// acceptsEventStream reports whether an Accept header names
// text/event-stream with a non-zero quality. A client that also accepts
// JSON but names the stream explicitly wants the stream: nobody lists it
// by accident.
func acceptsEventStream(accept []string) bool {
	for _, h := range accept {
		for _, part := range strings.Split(h, ",") {
			media, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(media), "text/event-stream") {
				continue
			}
			refused := false
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(p, "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f <= 0 {
						refused = true
					}
				}
			}
			if !refused {
				return true
			}
		}
	}
	return false
}

type streamQuery struct{ sse, sseGiven, compress bool }

// parseStreamQuery reads sse= and compress=, each "0" or "1"; other
// parameters are ignored, as clients add cache-busters.
func parseStreamQuery(r *http.Request) (streamQuery, error) {
	var q streamQuery
	vals := r.URL.Query()
	q.sseGiven = len(vals["sse"]) > 0
	for name, dst := range map[string]*bool{"sse": &q.sse, "compress": &q.compress} {
		switch v := vals[name]; {
		case len(v) == 0:
		case len(v) > 1:
			return q, fmt.Errorf("%s given more than once", name)
		case v[0] == "1":
			*dst = true
		case v[0] == "0":
		default:
			return q, fmt.Errorf("%s must be 0 or 1", name)
		}
	}
	return q, nil
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(b)
}

type statusServer struct {
	edgev1.UnimplementedEdgeServiceServer
	site   string
	sel    *source.Selector
	hub    *sse.Hub
	latest func() int64
}

func (s *statusServer) GetStatus(context.Context, *edgev1.GetStatusRequest) (*edgev1.GetStatusResponse, error) {
	clients, _ := s.hub.Stats()
	resp := &edgev1.GetStatusResponse{Site: s.site, SseClients: uint32(clients), LatestTickMs: s.latest()}
	for _, c := range s.sel.Status() {
		resp.Sources = append(resp.Sources, &edgev1.Source{Target: c.Target, Site: c.Site, Connected: c.Connected, Serving: c.Serving, Snapshots: c.Snapshots})
	}
	return resp, nil
}

// routeSeedLink carries SeedLink connections to the cores in the data
// API's order: a core the balancer ejected is tried last. Under mutual
// TLS the hop to the core is encrypted with the edge's certificate; the
// public side is plain on seedlink-addr and TLS on seedlink-tls-addr,
// with the HTTPS certificate (and its reloads).
func routeSeedLink(svc *service.Service, cfg Config, bal *route.Balancer, perAddr *addrLimit) error {
	proxy, err := tcproute.New(tcproute.Options{
		Targets: cfg.SeedLink, Order: bal.Order, DialTimeout: 2 * time.Second, TLS: svc.ClientTLS(),
		Acquire: perAddr.acquire, Release: perAddr.release, MaxConns: cfg.SeedLinkClients, Name: "seedlink",
	}, svc.Logger())
	if err != nil {
		return err
	}
	svc.Metrics().MustRegister(proxy.Collectors()...)
	if cfg.SeedLinkAddr != "" {
		ln, err := net.Listen("tcp", cfg.SeedLinkAddr)
		if err != nil {
			return fmt.Errorf("listen seedlink %s: %w", cfg.SeedLinkAddr, err)
		}
		svc.Go("seedlink routing", service.ComponentFunc(func(ctx context.Context) error { return proxy.Serve(ctx, ln) }))
	}
	if cfg.SeedLinkTLSAddr != "" {
		certs, err := svc.Certificate(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", cfg.SeedLinkTLSAddr)
		if err != nil {
			return fmt.Errorf("listen seedlink-tls %s: %w", cfg.SeedLinkTLSAddr, err)
		}
		tc := certfile.ServerConfig(certs)
		// SeedLink, or WebSocket over HTTP/1.1: the core speaks no HTTP/2.
		tc.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, tc)
		svc.Go("seedlink-tls routing", service.ComponentFunc(func(ctx context.Context) error { return proxy.Serve(ctx, ln) }))
	}
	return nil
}

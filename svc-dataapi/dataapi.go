// Package dataapi is svc-dataapi: a core's public data API, served over
// gRPC and, through grpc-gateway, as REST with an OpenAPI document —
// stations, earthquake reports, detections, API clients — beside the
// compatible routes of SPEC §7, and with -waveform the core's waveform
// archive, reached over svc-waveform's gRPC service
// (internal/waveforms). With -nats it also keeps the metadata
// database's detections and reports up to date from the core's detection
// stream.
//
// Every HTTP request passes, outermost first: the guard (credentials, rate
// limits, body size; httpapi.Guard), conditional GETs (ETag,
// httpapi.Conditional), then the routes. Errors are JSON
// {"error":"…","code":…,"message":"…"} with the status their cause calls
// for; gRPC clients get the same statuses. Rate limits apply to HTTP only:
// the gRPC listener serves the other services of the core.
package dataapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/encoding/protojson"

	"shindo.dev/gen/openapi"
	datav1 "shindo.dev/gen/shindo/data/v1"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/apierror"
	"shindo.dev/lib/cidr"
	"shindo.dev/lib/cors"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/natsconn"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/ratelimit"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationsource"
	"shindo.dev/lib/timesync"
	"shindo.dev/svc-dataapi/internal/auth"
	"shindo.dev/svc-dataapi/internal/clients"
	"shindo.dev/svc-dataapi/internal/compat"
	"shindo.dev/svc-dataapi/internal/detectsync"
	"shindo.dev/svc-dataapi/internal/fdsnavailability"
	"shindo.dev/svc-dataapi/internal/fdsndataselect"
	"shindo.dev/svc-dataapi/internal/fdsnevent"
	"shindo.dev/svc-dataapi/internal/fdsnstation"
	"shindo.dev/svc-dataapi/internal/httpapi"
	"shindo.dev/svc-dataapi/internal/links"
	"shindo.dev/svc-dataapi/internal/maptiles"
	"shindo.dev/svc-dataapi/internal/playback"
	"shindo.dev/svc-dataapi/internal/reports"
	"shindo.dev/svc-dataapi/internal/stations"
	"shindo.dev/svc-dataapi/internal/watch"
	"shindo.dev/svc-dataapi/internal/waveforms"
)

// Name is the binary and service name.
const Name = "shindo-dataapi"

// Config is svc-dataapi's configuration (env prefix SHINDO_DATAAPI_).
type Config struct {
	service.Common
	stationsource.Config
	HTTPAddr    string        `conf:"http-addr" help:"REST listen address"`
	Ingest      string        `conf:"ingest" help:"svc-ingest gRPC address of this core, for /v1/links; empty: links not served"`
	PeerIngest  []string      `conf:"peer-ingest" help:"svc-ingest gRPC addresses of the other cores, comma-separated: /v1/links adds the links they see (each left out if it does not answer within 1s)"`
	RTS         []string      `conf:"rts" help:"svc-rts gRPC addresses, this core's first, then the other cores', comma-separated: the replay routes (/api/v2/trem/rts/{t}, …) read their archives of past ticks; empty: no replays"`
	EEWAuthor   string        `conf:"eew-author" default:"trem" help:"the author of this network's alerts in replays of /api/v2/eq/eew (as the edges' -eew-author)"`
	Waveform    string        `conf:"waveform" help:"svc-waveform gRPC address of this core (host:port): /v1/waveforms/… are served from its archive; empty: waveforms not served"`
	WaveformDir string        `conf:"waveform-dir" help:"this core's svc-waveform data directory (its -data-dir), where this process can read it: fdsnws-dataselect sends stored records from the day files itself instead of through -waveform's stream; empty: all through the stream"`
	AdminTokens []string      `conf:"admin-tokens" secret:"true" help:"tokens that authorize provisioning calls (authorization: Bearer <token>), comma-separated"`
	NATS        string        `conf:"nats" help:"this core's NATS server URL: detections are consumed from its DETECTIONS stream into the database (needs -database-url); empty: off"`
	DBTimeout   time.Duration `conf:"db-timeout" default:"5s" help:"upper bound on a request's database work; past it the request gets 503"`
	ReadDBURL   string        `conf:"read-database-url" secret:"true" help:"this core's own PostgreSQL member (postgres://…), standby or primary, for reads; one it cannot serve goes to -database-url; empty: reads go to -database-url"`

	RateLimitAddr  float64  `conf:"rate-limit-ip" default:"50" help:"requests per second per client address without a key (0: unlimited)"`
	RateBurstAddr  int      `conf:"rate-burst-ip" default:"200" help:"burst per client address"`
	RateLimitKey   float64  `conf:"rate-limit-key" default:"100" help:"requests per second per API key whose client has no limit of its own (0: unlimited)"`
	RateBurstKey   int      `conf:"rate-burst-key" default:"200" help:"burst per API key whose client has none of its own"`
	RateBuckets    int      `conf:"rate-buckets" default:"100000" help:"most rate-limit buckets kept in memory (idle ones are dropped first)"`
	TrustedProxies []string `conf:"trusted-proxies" help:"CIDRs or addresses of the proxies (the edges) whose X-Forwarded-For names the client, comma-separated; empty: no one is trusted and every client is its peer address"`
	MaxBody        int64    `conf:"max-body" default:"65536" help:"largest request body accepted, bytes"`
	MaxWatchers    int      `conf:"max-watchers" default:"64" help:"most open watches of the reports, and of the stations (WatchReports, WatchStations: the edges, two per edge process and core)"`
}

// DefaultConfig returns the configuration with svc-dataapi's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7402", AdminAddr: "127.0.0.1:7409"}, HTTPAddr: ":7401"}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr %q: want host:port", c.HTTPAddr))
	}
	errs = append(errs, c.Config.Validate())
	if _, _, err := net.SplitHostPort(c.Waveform); c.Waveform != "" && err != nil {
		errs = append(errs, fmt.Errorf("waveform %q: want host:port", c.Waveform))
	}
	if c.WaveformDir != "" && c.Waveform == "" {
		errs = append(errs, errors.New("waveform-dir needs -waveform: the spans of its day files come over svc-waveform's stream"))
	}
	for _, t := range c.AdminTokens {
		if len(t) < 16 {
			errs = append(errs, errors.New("admin-tokens: each at least 16 characters"))
			break
		}
	}
	if c.NATS != "" {
		if u, err := url.Parse(c.NATS); err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			errs = append(errs, fmt.Errorf("nats %q: want nats://host:port", c.NATS))
		} else if c.DatabaseURL == "" {
			errs = append(errs, errors.New("nats: detections go to the metadata database; give -database-url too"))
		}
	}
	if len(c.PeerIngest) > 0 && c.Ingest == "" {
		errs = append(errs, errors.New("peer-ingest: the other cores' links join this core's; give -ingest too"))
	}
	if c.EEWAuthor == "" || len(c.EEWAuthor) > 32 || strings.ContainsFunc(c.EEWAuthor, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		errs = append(errs, fmt.Errorf("eew-author %q: 1 to 32 lowercase letters, digits, '-' or '_'", c.EEWAuthor))
	}
	for _, a := range append(append([]string{c.Ingest}, c.PeerIngest...), c.RTS...) {
		if _, _, err := net.SplitHostPort(a); a != "" && err != nil {
			errs = append(errs, fmt.Errorf("ingest address %q: want host:port", a))
		}
	}
	if c.ReadDBURL != "" {
		if _, err := pgxpool.ParseConfig(c.ReadDBURL); err != nil {
			errs = append(errs, errors.New("read-database-url: want postgres://user@host:port/database"))
		} else if c.DatabaseURL == "" {
			errs = append(errs, errors.New("read-database-url: reads of the metadata database; give -database-url (for writes) too"))
		}
	}
	if c.DBTimeout <= 0 || c.DBTimeout > time.Minute {
		errs = append(errs, errors.New("db-timeout: more than 0, at most 1m"))
	}
	if !(c.RateLimitAddr >= 0 && c.RateLimitAddr <= 1e6 && c.RateLimitKey >= 0 && c.RateLimitKey <= 1e6) { // NaN too
		errs = append(errs, errors.New("rate-limit-ip, rate-limit-key: 0 to 1000000 per second"))
	}
	if c.RateBurstAddr < 1 || c.RateBurstKey < 1 || c.RateBurstAddr > 1e6 || c.RateBurstKey > 1e6 {
		errs = append(errs, errors.New("rate-burst-ip, rate-burst-key: 1 to 1000000"))
	}
	if c.RateBuckets < 16 || c.RateBuckets > 10_000_000 {
		errs = append(errs, errors.New("rate-buckets: 16 to 10000000"))
	}
	if _, err := cidr.Parse(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("trusted-proxies %w", err))
	}
	if c.MaxWatchers < 1 || c.MaxWatchers > 10_000 {
		errs = append(errs, errors.New("max-watchers: 1 to 10000"))
	}
	if c.MaxBody < 1024 || c.MaxBody > 64<<20 {
		errs = append(errs, errors.New("max-body: 1024 bytes to 64 MiB"))
	}
	return errors.Join(errs...)
}

// Run runs svc-dataapi until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		_, err := wire(ctx, svc, cfg)
		return err
	})
}

// dataServer is DataService, assembled from its parts: stations.Server
// (which answers what none implements with Unimplemented), and the report,
// client and watch RPCs, forwarded.
type dataServer struct {
	*stations.Server
	reports *reports.Server
	clients *clients.Server
	watch   *watch.Server // nil without the database
}

func (d dataServer) ListReports(ctx context.Context, r *datav1.ListReportsRequest) (*datav1.ListReportsResponse, error) {
	return d.reports.ListReports(ctx, r)
}

func (d dataServer) GetReport(ctx context.Context, r *datav1.GetReportRequest) (*datav1.GetReportResponse, error) {
	return d.reports.GetReport(ctx, r)
}

func (d dataServer) CreateReport(ctx context.Context, r *datav1.CreateReportRequest) (*datav1.CreateReportResponse, error) {
	return d.reports.CreateReport(ctx, r)
}

func (d dataServer) ListDetections(ctx context.Context, r *datav1.ListDetectionsRequest) (*datav1.ListDetectionsResponse, error) {
	return d.reports.ListDetections(ctx, r)
}

func (d dataServer) GetDetection(ctx context.Context, r *datav1.GetDetectionRequest) (*datav1.GetDetectionResponse, error) {
	return d.reports.GetDetection(ctx, r)
}

func (d dataServer) CreateClient(ctx context.Context, r *datav1.CreateClientRequest) (*datav1.CreateClientResponse, error) {
	return d.clients.CreateClient(ctx, r)
}

func (d dataServer) ListClients(ctx context.Context, r *datav1.ListClientsRequest) (*datav1.ListClientsResponse, error) {
	return d.clients.ListClients(ctx, r)
}

func (d dataServer) RevokeClient(ctx context.Context, r *datav1.RevokeClientRequest) (*datav1.RevokeClientResponse, error) {
	return d.clients.RevokeClient(ctx, r)
}

func (d dataServer) CheckKeys(ctx context.Context, r *datav1.CheckKeysRequest) (*datav1.CheckKeysResponse, error) {
	return d.clients.CheckKeys(ctx, r)
}

// wire sets the service up and returns the data API's HTTP handler, which
// it also serves on -http-addr.
func wire(ctx context.Context, svc *service.Service, cfg Config) (http.Handler, error) {
	reg, err := stationsource.Attach(ctx, svc, cfg.Config, cfg.DependencyWait)
	if err != nil {
		return nil, err
	}
	log := svc.Logger()
	var (
		admin       stations.Admin
		keys        auth.Keys
		reportStore reports.Store
		eventStore  fdsnevent.Store
		clientStore clients.Store
		compatStore compat.Store
		versions    func(context.Context) (httpapi.Versions, error)
	)
	if reg.Pool != nil {
		store := metadb.NewStore(reg.Pool)
		if cfg.ReadDBURL != "" {
			// Connects on first use: a local member that is down at start
			// only sends the reads to the primary.
			local, err := pgxpool.New(ctx, cfg.ReadDBURL)
			if err != nil {
				return nil, fmt.Errorf("read-database-url: %w", err)
			}
			svc.OnShutdown("local database member", func(context.Context) error { local.Close(); return nil })
			store = metadb.NewReplicatedStore(reg.Pool, local)
		}
		admin, keys, reportStore, eventStore, clientStore, compatStore = store, store, store, store, store, store
		versions = func(ctx context.Context) (httpapi.Versions, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.DBTimeout)
			defer cancel()
			v, err := store.DataVersions(ctx)
			return httpapi.Versions(v), err
		}
		if cfg.NATS != "" {
			nc, err := natsconn.Connect(ctx, cfg.NATS, "shindo-dataapi "+cfg.Site, cfg.DependencyWait, svc.ClientTLS())
			if err != nil {
				return nil, err
			}
			svc.OnShutdown("nats", func(context.Context) error { return nc.Drain() })
			syncer := detectsync.New(nc, cfg.Site, store, cfg.DBTimeout, svc.Metrics(), log)
			svc.AddReadiness("detection sync", syncer.Ready)
			svc.Go("detection sync", syncer)
		}
	}
	authn := auth.New(cfg.AdminTokens, keys)
	data := dataServer{
		Server:  stations.New(reg.Source.Current, admin, authn, log),
		reports: reports.New(reportStore, authn, cfg.DBTimeout, log),
		clients: clients.New(clientStore, authn, cfg.DBTimeout, log),
		watch:   watcher(svc, reg, cfg),
	}
	datav1.RegisterDataServiceServer(svc.GRPC(), data)
	// The edges follow reports and stations; everything else of the
	// service is the REST API's, served in-process by the gateway.
	svc.Authorize(peerid.Policy{
		"/" + datav1.DataService_ServiceDesc.ServiceName + "/": peerid.Allow(peerid.Operator),
		datav1.DataService_WatchReports_FullMethodName:         peerid.Allow(peerid.Edge, peerid.Operator),
		datav1.DataService_WatchStations_FullMethodName:        peerid.Allow(peerid.Edge, peerid.Operator),
	})
	svc.SetServingStatus(datav1.DataService_ServiceDesc.ServiceName, true)

	gwOpts := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &httpapi.FastJSON{JSONPb: runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}),
		runtime.WithErrorHandler(apierror.Gateway),
		runtime.WithRoutingErrorHandler(apierror.Routing),
		// A package-wide setting of grpc-gateway, though passed as an
		// option: every mux of the process gets the strict parser.
		runtime.SetQueryParameterParser(httpapi.StrictQuery{}),
	}
	gw := runtime.NewServeMux(gwOpts...)
	if err := datav1.RegisterDataServiceHandlerServer(ctx, gw, data); err != nil {
		return nil, fmt.Errorf("register gateway: %w", err)
	}
	if cfg.Ingest != "" {
		// Link quality lives in each core's ingest; /v1/links merges this
		// core's with the other cores'. Connections are made lazily, so
		// ingest may start after us.
		dial := func(target string) (ingestv1.IngestServiceClient, error) {
			conn, err := grpc.NewClient(target, svc.DialOptions()...)
			if err != nil {
				return nil, fmt.Errorf("ingest %s: %w", target, err)
			}
			svc.OnShutdown("ingest connection "+target, func(context.Context) error { return conn.Close() })
			return ingestv1.NewIngestServiceClient(conn), nil
		}
		own, err := dial(cfg.Ingest)
		if err != nil {
			return nil, err
		}
		var peers []ingestv1.IngestServiceClient
		for _, target := range cfg.PeerIngest {
			p, err := dial(target)
			if err != nil {
				return nil, err
			}
			peers = append(peers, p)
		}
		merged := links.New(own, peers, time.Second, log)
		if err := ingestv1.RegisterIngestServiceHandlerServer(ctx, gw, merged); err != nil {
			return nil, fmt.Errorf("register links gateway: %w", err)
		}
	}
	mux := http.NewServeMux()
	// The GET routes whose requests have fields outside the path.
	queried := map[string]bool{"/v1/reports": true, "/v1/detections": true, "/v1/stations": true, "/v1/links": true, "/v1/rts/snapshot": true}
	mux.Handle("/", httpapi.NoQuery(queried, gw))
	compat.New(compatStore, reg.Source.Current, cfg.DBTimeout, log).Register(mux)
	maptiles.New().Register(mux)
	fdsnstation.New(reg.Source.Current, log).Register(mux)
	fdsnevent.New(eventStore, cfg.DBTimeout, log).Register(mux)
	if cfg.Waveform != "" {
		// The archive's REST routes, served here from its gRPC service.
		// Connected lazily: svc-waveform may start after us, and a request
		// while it is away is a 503. It is this core's own, so reconnects
		// are tried every few seconds at most, not after gRPC's default
		// backoff of up to two minutes: clients find it soon after it is
		// back. A Query answer (an hour of three axes, with intensity) can
		// pass gRPC's default 4 MiB.
		conn, err := grpc.NewClient(cfg.Waveform, svc.DialOptions(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second,
			}, MinConnectTimeout: 5 * time.Second}))...)
		if err != nil {
			return nil, fmt.Errorf("waveform %s: %w", cfg.Waveform, err)
		}
		svc.OnShutdown("waveform connection", func(context.Context) error { return conn.Close() })
		archiveClient := waveformv1.NewWaveformServiceClient(conn)
		archive, err := waveforms.Handler(ctx, archiveClient, log, gwOpts...)
		if err != nil {
			return nil, err
		}
		mux.Handle("/v1/waveforms/", compat.OnlyGET(archive))
		var sds string
		if cfg.WaveformDir != "" {
			sds = filepath.Join(cfg.WaveformDir, "sds")
		}
		fdsndataselect.New(reg.Source.Current, archiveClient, sds, fdsndataselect.DefaultLimits, svc.Metrics(), log).Register(mux)
		fdsnavailability.New(reg.Source.Current, archiveClient, cfg.DBTimeout, log).Register(mux)
	}
	if len(cfg.RTS) > 0 {
		var cores []rtsv1.RTSServiceClient
		for _, target := range cfg.RTS {
			// Connected lazily: svc-rts may start after us, and a peer
			// core may be away.
			conn, err := grpc.NewClient(target, svc.DialOptions(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
			if err != nil {
				return nil, fmt.Errorf("rts %s: %w", target, err)
			}
			svc.OnShutdown("rts connection "+target, func(context.Context) error { return conn.Close() })
			cores = append(cores, rtsv1.NewRTSServiceClient(conn))
		}
		// GET /v1/rts/snapshot: this core's latest snapshot, or one of its
		// archive.
		if err := rtsv1.RegisterRTSServiceHandlerClient(ctx, gw, cores[0]); err != nil {
			return nil, fmt.Errorf("register rts gateway: %w", err)
		}
		playback.New(cores, cfg.EEWAuthor, 2*time.Second, log).Register(mux)
	}
	mux.HandleFunc("GET /readyz", svc.ServeReady) // probed by the edges' data-API routing
	mux.HandleFunc("GET /ntp", timesync.ServeNTP) // the apps sync with the cores too
	// The document of what this core answers: the edges' own routes go,
	// and those of a service it was not given.
	unserved := map[string]bool{"/v1/edge/status": true, "/v1/links": cfg.Ingest == "",
		"/v1/waveforms/{station_id}": cfg.Waveform == "", "/v1/rts/snapshot": len(cfg.RTS) == 0}
	doc, err := openapi.Select(func(path string) bool { return !unserved[path] })
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	mux.Handle("/openapi.json", compat.OnlyGET(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})))

	buckets := ratelimit.New(cfg.RateBuckets)
	svc.Go("rate-limit sweep", service.ComponentFunc(func(ctx context.Context) error { return buckets.Run(ctx, time.Minute) }))
	trusted, _ := cidr.Parse(cfg.TrustedProxies) // validated
	cond := &httpapi.Conditional{Route: etagRoute, Versions: versions, MaxBuffer: 4 << 20}
	guard := &httpapi.Guard{
		Auth: authn, Buckets: buckets, Trusted: trusted, MaxBody: cfg.MaxBody,
		PerAddress: httpapi.Limit{Rate: cfg.RateLimitAddr, Burst: cfg.RateBurstAddr},
		PerKey:     httpapi.Limit{Rate: cfg.RateLimitKey, Burst: cfg.RateBurstKey},
		Exempt:     map[string]bool{"/readyz": true},
	}
	svc.Intercept(guard.UnaryInterceptor(), guard.StreamInterceptor())
	// Reads are open to pages of any origin (the apps' browser builds);
	// preflights are answered before the guard, as browsers send them
	// without credentials.
	h := cors.Reads(guard.Wrap(cond.Wrap(mux)))
	// The REST API is the edges' to route to (and operators' tools'):
	// under -mtls-cert only their certificates are served.
	if _, err := svc.Listen("data api", cfg.HTTPAddr, h, service.Internal(peerid.Allow(peerid.Edge, peerid.Operator))); err != nil {
		return nil, err
	}
	return h, nil
}

// etagRoute tells which data a GET route's answer depends on. The station
// routes of /v1 answer from the in-memory registry, which follows the
// database a moment later, so they are tagged by body; the compatible
// station list reads the database.
func etagRoute(path string) httpapi.Data {
	switch {
	case path == "/readyz", path == "/ntp", strings.HasPrefix(path, "/v1/waveforms/"): // the archive's: a download is streamed, never held to be hashed
		return httpapi.NoTag
	case strings.HasPrefix(path, "/fdsnws/"): // documents carry their creation time, and grow past what is buffered
		return httpapi.NoTag
	case path == "/v1/reports", strings.HasPrefix(path, "/v1/reports/"), path == "/api/v2/eq/report":
		return httpapi.Reports
	case strings.HasPrefix(path, "/api/v2/eq/report/"):
		return httpapi.Reports | httpapi.Stations // township places may come from stations
	case path == "/v1/detections", strings.HasPrefix(path, "/v1/detections/"):
		return httpapi.Detections
	case path == "/api/v1/trem/station", path == "/resource/station":
		return httpapi.Stations
	}
	return httpapi.BodyHash
}

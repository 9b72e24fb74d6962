// Package service is the runtime every shindo service binary shares: the
// common configuration, logging, tracing, the gRPC server with health and
// reflection, the admin listener (Prometheus /metrics, /healthz, /readyz,
// pprof), extra HTTP listeners, background components, and a bounded,
// ordered shutdown.
//
// A service's run function builds a Service with New, registers its gRPC
// servers, HTTP handlers, components and closers, then calls Run. Run serves
// until ctx ends or a component fails, then shuts down in this order:
//
//  1. readiness and grpc.health.v1 report NOT_SERVING;
//  2. wait DrainDelay so load balancers and peers notice;
//  3. Stopping closes, so long-lived streams end; HTTP servers shut down and
//     gRPC stops gracefully, both bounded by what is left of
//     ShutdownTimeout, then forced;
//  4. components are cancelled and awaited;
//  5. closers run in reverse order of registration (NATS, pgx, etcd, …);
//  6. telemetry is flushed.
//
// Listeners are bound in New and Listen, so a busy port is reported before
// anything starts.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"shindo.dev/lib/certfile"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/logging"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/telemetry"
)

// Common is the configuration every service has. Services embed it in their
// own config struct and preset GRPCAddr and AdminAddr to their default ports.
type Common struct {
	Site            string        `conf:"site" default:"TNN-1" help:"name of the site this process runs at (TNN-1, TYO-1, TPE-1, KHH-1)"`
	GRPCAddr        string        `conf:"grpc-addr" help:"gRPC listen address"`
	AdminAddr       string        `conf:"admin-addr" help:"admin listen address: /metrics, /healthz, /readyz, /debug/pprof; loopback by default, since profiles and metrics are for operators only"`
	LogFormat       string        `conf:"log-format" default:"json" help:"log format: json or text"`
	LogLevel        string        `conf:"log-level" default:"info" help:"log level: debug, info, warn or error"`
	OTLPEndpoint    string        `conf:"otlp-endpoint" help:"OTLP/gRPC trace collector host:port; empty exports nothing"`
	DrainDelay      time.Duration `conf:"drain-delay" default:"0s" help:"time between reporting NOT_SERVING and closing listeners"`
	ShutdownTimeout time.Duration `conf:"shutdown-timeout" default:"8s" help:"upper bound on the whole graceful shutdown"`
	DependencyWait  time.Duration `conf:"dependency-wait" default:"10s" help:"how long to wait at start for a dependency to become reachable"`
	MaxConns        int           `conf:"max-conns" default:"0" help:"most connections of the public listeners (HTTP and gRPC) together; beyond, refused and counted (0: the open-file limit less 512 kept for files and the service's own connections)"`
	MaxConnsPerIP   int           `conf:"max-conns-per-ip" default:"4096" help:"most connections to the public listeners (HTTP and gRPC) from one address (0: no bound)"`
	MTLSCert        string        `conf:"mtls-cert" help:"this process's certificate (PEM) for the internal hops, naming its site and role: gRPC is served and called over mutual TLS with it, and each call is checked against the service's policy of roles; empty: plain gRPC, no caller checked"`
	MTLSKey         string        `conf:"mtls-key" help:"the key of -mtls-cert (PEM)"`
	MTLSCA          string        `conf:"mtls-ca" help:"the CA certificates (PEM) the internal certificates chain to, of callers and of the services called"`
}

// ValidateCommon checks the common fields; services call it from Validate.
func (c *Common) ValidateCommon() error {
	var errs []error
	if c.Site == "" {
		errs = append(errs, errors.New("site must not be empty"))
	}
	for name, addr := range map[string]string{"grpc-addr": c.GRPCAddr, "admin-addr": c.AdminAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, addr))
		}
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown-timeout must be positive"))
	}
	if (c.MTLSCert == "") != (c.MTLSKey == "") || (c.MTLSCert == "") != (c.MTLSCA == "") {
		errs = append(errs, errors.New("mtls-cert, mtls-key and mtls-ca go together"))
	}
	if c.DrainDelay < 0 || c.DrainDelay >= c.ShutdownTimeout {
		errs = append(errs, errors.New("drain-delay must be at least 0 and below shutdown-timeout"))
	}
	if c.DependencyWait <= 0 {
		errs = append(errs, errors.New("dependency-wait must be positive"))
	}
	if c.MaxConns < 0 || c.MaxConnsPerIP < 0 {
		errs = append(errs, errors.New("max-conns and max-conns-per-ip must not be negative"))
	}
	return errors.Join(errs...)
}

// Component is a long-running part of a service. Run returns when ctx ends
// (nil) or when the component fails (an error, which stops the service).
type Component interface {
	Run(ctx context.Context) error
}

// ComponentFunc adapts a function to Component.
type ComponentFunc func(ctx context.Context) error

// Run calls f.
func (f ComponentFunc) Run(ctx context.Context) error { return f(ctx) }

type namedComponent struct {
	name string
	c    Component
}

type namedCloser struct {
	name string
	fn   func(context.Context) error
}

type httpListener struct {
	name string
	ln   net.Listener
	srv  *http.Server
}

// Service is one running shindo service process.
type Service struct {
	name   string
	common Common
	log    *slog.Logger

	grpc    *grpc.Server
	health  *health.Server
	grpcLn  net.Listener
	unary   []grpc.UnaryServerInterceptor
	stream  []grpc.StreamServerInterceptor
	adminLn net.Listener
	admin   *http.Server
	metrics *prometheus.Registry
	budget  *budget
	// Mutual TLS of the internal hops, nil without; policy says who may
	// call what (Authorize).
	mtls   *mutualTLS
	policy peerid.Policy
	// certs are the certificates loaded, by files (Certificate).
	certs  map[[2]string]*certfile.Reloader
	denied *prometheus.CounterVec
	// deniedHTTP counts the requests refused at Internal listeners.
	deniedHTTP *prometheus.CounterVec
	// deniedConns counts the connections refused at InternalListeners.
	deniedConns *prometheus.CounterVec
	// handshakeFailures count, by listener, the TLS handshakes given up.
	handshakeFailures *prometheus.CounterVec
	listeners         []httpListener
	comps             []namedComponent
	closers           []namedCloser

	stopping chan struct{}

	mu        sync.Mutex
	ready     []namedCheck
	notReady  bool
	telemetry func(context.Context) error
}

type namedCheck struct {
	name  string
	check func(context.Context) error
}

// New prepares service name (e.g. "shindo-ingest") with its common
// configuration and full configuration cfg (logged once, secrets masked). It
// binds the gRPC and admin listeners, so a busy port fails here.
func New(ctx context.Context, name string, common Common, cfg any) (*Service, error) {
	log, err := logging.New(os.Stderr, common.LogFormat, common.LogLevel,
		slog.String("service", name), slog.String("site", common.Site))
	if err != nil {
		return nil, err
	}
	shutdownTel, err := telemetry.Setup(ctx, name, common.Site, common.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	s := &Service{
		name:              name,
		common:            common,
		log:               log,
		health:            health.NewServer(),
		metrics:           prometheus.NewRegistry(),
		telemetry:         shutdownTel,
		stopping:          make(chan struct{}),
		budget:            newBudget(common.MaxConns, common.MaxConnsPerIP),
		handshakeFailures: prometheus.NewCounterVec(handshakeFailuresOpts, []string{"listener"}),
		denied:            prometheus.NewCounterVec(deniedOpts, []string{"method", "role"}),
		deniedHTTP:        prometheus.NewCounterVec(deniedHTTPOpts, []string{"listener", "role"}),
		deniedConns:       prometheus.NewCounterVec(deniedConnsOpts, []string{"listener", "role"}),
	}
	s.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), s.budget.refused, s.handshakeFailures, s.denied, s.deniedHTTP, s.deniedConns,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shindo_connections_open",
			Help: "Connections to public listeners (HTTP and gRPC) open now: clients' streams, uplinks, requests."}, s.budget.opened))

	if s.grpcLn, err = net.Listen("tcp", common.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen grpc %s: %w", common.GRPCAddr, err)
	}
	s.grpcLn = s.budget.listener("grpc", s.grpcLn)
	if s.adminLn, err = net.Listen("tcp", common.AdminAddr); err != nil {
		s.grpcLn.Close()
		return nil, fmt.Errorf("listen admin %s: %w", common.AdminAddr, err)
	}
	opts := []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
	if common.MTLSCert != "" {
		if s.mtls, err = s.loadMutualTLS(common); err != nil {
			s.grpcLn.Close()
			s.adminLn.Close()
			return nil, err
		}
		s.Authorize(nil)
		opts = append(opts, grpc.Creds(credentials.NewTLS(certfile.MutualServerConfig(s.mtls.cert, s.mtls.cas))))
	}
	s.grpc = grpc.NewServer(append(opts,
		grpc.ChainUnaryInterceptor(s.unaryIntercept),
		grpc.ChainStreamInterceptor(s.streamIntercept),
		// A peer that connects and never finishes its handshake, or holds a
		// connection with no call on it, costs a descriptor: both are
		// bounded, and so are the streams one connection may open.
		grpc.ConnectionTimeout(10*time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
		grpc.MaxConcurrentStreams(grpcMaxStreams),
	)...)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	// Not serving until Run has started everything.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	// Scrapes, probes and profiles: small requests, answered at once but
	// for a profile, which streams for as long as it was asked (so no
	// write timeout).
	s.admin = &http.Server{Handler: s.adminMux(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: adminMaxHeader}

	log.InfoContext(ctx, "configuration", slog.Any("config", conf.LogValue(cfg)))
	return s, nil
}

// adminMaxHeader bounds an admin request's header: the admin routes take
// no credentials or cookies.
const adminMaxHeader = 16 << 10

// Serve is the whole life of a service process: New, then wire to set up
// its parts, then Run. If wire fails, everything New and wire opened is
// released and wire's error is returned.
func Serve(ctx context.Context, name string, common Common, cfg any, wire func(context.Context, *Service) error) error {
	s, err := New(ctx, name, common, cfg)
	if err != nil {
		return err
	}
	if err := wire(ctx, s); err != nil {
		s.abort()
		return err
	}
	return s.Run(ctx)
}

// abort releases what New and the wiring opened when the service never
// started.
func (s *Service) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), s.common.ShutdownTimeout)
	defer cancel()
	for i := len(s.closers) - 1; i >= 0; i-- {
		_ = s.closers[i].fn(ctx)
	}
	for _, l := range s.listeners {
		l.ln.Close()
	}
	s.grpcLn.Close()
	s.adminLn.Close()
	_ = s.telemetry(ctx)
}

// Stopping is closed when the service stops accepting work, after the drain
// delay. Handlers of long-lived streams (SSE, gRPC subscriptions) return
// when it closes, since a graceful stop waits for every open request.
func (s *Service) Stopping() <-chan struct{} { return s.stopping }

// Logger returns the service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// Site returns the site name.
func (s *Service) Site() string { return s.common.Site }

// grpcMaxStreams bounds the concurrent calls of one gRPC connection.
const grpcMaxStreams = 1024

// Intercept puts u and st in front of every gRPC call, after those given
// before; called before Run, like the registrations on GRPC.
func (s *Service) Intercept(u grpc.UnaryServerInterceptor, st grpc.StreamServerInterceptor) {
	if u != nil {
		s.unary = append(s.unary, u)
	}
	if st != nil {
		s.stream = append(s.stream, st)
	}
}

// unaryIntercept runs the interceptors given to Intercept: the server's
// options are fixed when New makes it, before the service wires its parts.
func (s *Service) unaryIntercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	next := handler
	for i := len(s.unary) - 1; i >= 0; i-- {
		in, h := s.unary[i], next
		next = func(ctx context.Context, req any) (any, error) { return in(ctx, req, info, h) }
	}
	return next(ctx, req)
}

func (s *Service) streamIntercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	next := handler
	for i := len(s.stream) - 1; i >= 0; i-- {
		in, h := s.stream[i], next
		next = func(srv any, ss grpc.ServerStream) error { return in(srv, ss, info, h) }
	}
	return next(srv, ss)
}

// GRPC returns the gRPC server on which services register before Run.
func (s *Service) GRPC() *grpc.Server { return s.grpc }

// Metrics returns the registry served on /metrics.
func (s *Service) Metrics() *prometheus.Registry { return s.metrics }

// GRPCAddr returns the bound gRPC address (useful when the port was 0).
func (s *Service) GRPCAddr() net.Addr { return s.grpcLn.Addr() }

// AdminAddr returns the bound admin address.
func (s *Service) AdminAddr() net.Addr { return s.adminLn.Addr() }

// SetServingStatus reports the health of one named gRPC service (for
// example "shindo.rts.v1.RTSService") to grpc.health.v1 clients.
func (s *Service) SetServingStatus(svc string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(svc, st)
}

// ListenOption changes how Listen listens.
type ListenOption func(*listenOptions)

type listenOptions struct {
	lc  net.ListenConfig
	tls *tls.Config
	// internal, when set, is who of the network may call (Internal).
	internal *peerid.Rule
}

// SharedPort listens on an address several processes may listen on at
// once (SO_REUSEPORT): the kernel spreads new connections across them.
// It is how one site runs more connections than one process may hold
// descriptors.
func SharedPort() ListenOption {
	return func(o *listenOptions) { o.lc.Control = reusePort }
}

// WithTLS serves HTTPS with cfg (its certificate, HTTP/2 by ALPN). A
// handshake must finish within the header timeout like a request's
// headers, so a stalled one holds its connection no longer.
func WithTLS(cfg *tls.Config) ListenOption {
	return func(o *listenOptions) { o.tls = cfg }
}

// Internal marks a listener as one of the network's internal hops (the data
// API's REST, which the edges route to): under -mtls-cert it is served over
// mutual TLS with the process's internal certificate, a caller without a
// certificate of the network's CA is refused at the handshake, and each
// request whose certificate names a role rule does not permit is answered
// 403. Without -mtls-cert it is served plain, like the gRPC.
func Internal(rule peerid.Rule) ListenOption {
	return func(o *listenOptions) { o.internal = &rule }
}

// Listen binds an extra HTTP listener (public API, SSE, WebSocket) that is
// served by Run and shut down in order. The handler is wrapped in otelhttp.
func (s *Service) Listen(name, addr string, h http.Handler, opts ...ListenOption) (net.Addr, error) {
	var o listenOptions
	for _, opt := range opts {
		opt(&o)
	}
	return s.listen(name, addr, h, o)
}

func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

func (s *Service) listen(name, addr string, h http.Handler, o listenOptions) (net.Addr, error) {
	if o.internal != nil && s.mtls != nil {
		o.tls = certfile.MutualServerConfig(s.mtls.cert, s.mtls.cas)
		h = s.checkCaller(name, *o.internal, h)
	}
	ln, err := o.lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s %s: %w", name, addr, err)
	}
	// Timeouts bound what a client may hold without asking for anything:
	// headers, a request's body, an idle keep-alive. Streams are taken
	// over from net/http (their deadlines cleared) or write with their own.
	srv := &http.Server{
		Handler:           otelhttp.NewHandler(h, name),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          (&serverLog{log: s.log.With(slog.String("listener", name)), failures: s.handshakeFailures.WithLabelValues(name)}).errorLog(),
		TLSConfig:         o.tls,
	}
	s.listeners = append(s.listeners, httpListener{name: name, ln: s.budget.listener(name, ln), srv: srv})
	return ln.Addr(), nil
}

// Go registers a component started by Run.
func (s *Service) Go(name string, c Component) {
	s.comps = append(s.comps, namedComponent{name, c})
}

// OnShutdown registers fn to run after the servers and components stopped;
// closers run in reverse order of registration.
func (s *Service) OnShutdown(name string, fn func(context.Context) error) {
	s.closers = append(s.closers, namedCloser{name, fn})
}

// AddReadiness adds a check that /readyz runs; the service is ready when
// every check passes.
func (s *Service) AddReadiness(name string, check func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = append(s.ready, namedCheck{name, check})
}

func (s *Service) adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.ServeReady)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// ServeReady answers /readyz: 200 when every readiness check passes, 503
// naming the first that fails. Public listeners mount it too when a load
// balancer in front probes them (the edges probe the data API).
func (s *Service) ServeReady(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	notReady, checks := s.notReady, append([]namedCheck(nil), s.ready...)
	s.mu.Unlock()
	if notReady {
		http.Error(w, "not serving", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", c.name, err), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

// Run serves until ctx ends or a component fails, then shuts down in the
// documented order within ShutdownTimeout. It returns the first component
// error, or nil after a requested shutdown.
func (s *Service) Run(ctx context.Context) error {
	compCtx, cancelComps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelComps()

	failed := make(chan error, 2+len(s.comps)+len(s.listeners))
	var wg sync.WaitGroup
	serve := func(name string, fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
				failed <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	serve("grpc server", func() error { return s.grpc.Serve(s.grpcLn) })
	serve("admin server", func() error { return s.admin.Serve(s.adminLn) })
	for _, l := range s.listeners {
		serve(l.name+" server", func() error {
			if l.srv.TLSConfig != nil {
				return l.srv.ServeTLS(l.ln, "", "") // the certificate is in TLSConfig
			}
			return l.srv.Serve(l.ln)
		})
	}
	var compWG sync.WaitGroup
	for _, c := range s.comps {
		compWG.Go(func() {
			if err := c.c.Run(compCtx); err != nil && compCtx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", c.name, err)
			}
		})
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.log.InfoContext(ctx, "serving",
		slog.String("grpc", s.grpcLn.Addr().String()),
		slog.String("admin", s.adminLn.Addr().String()))

	var runErr error
	select {
	case <-ctx.Done():
		s.log.InfoContext(ctx, "shutdown requested")
	case runErr = <-failed:
		s.log.ErrorContext(ctx, "component failed, shutting down", slog.Any("error", runErr))
	}

	deadline := time.Now().Add(s.common.ShutdownTimeout)
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	// 1. Tell health checkers and load balancers.
	s.mu.Lock()
	s.notReady = true
	s.mu.Unlock()
	s.health.Shutdown()
	// 2. Let them notice.
	if s.common.DrainDelay > 0 {
		select {
		case <-time.After(s.common.DrainDelay):
		case <-shutdownCtx.Done():
		}
	}
	// 3. End long-lived streams, stop accepting and drain, bounded.
	close(s.stopping)
	var stopWG sync.WaitGroup
	for _, l := range s.listeners {
		stopWG.Go(func() {
			if err := l.srv.Shutdown(shutdownCtx); err != nil {
				l.srv.Close()
			}
		})
	}
	stopWG.Go(func() {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		// Streams (subscriptions) never end on their own, so the graceful
		// stop gets half the remaining budget before it is forced.
		half := time.Until(deadline) / 2
		select {
		case <-done:
		case <-time.After(half):
			s.grpc.Stop()
			<-done
		}
	})
	stopWG.Wait()
	// 4. Components.
	cancelComps()
	compsDone := make(chan struct{})
	go func() { compWG.Wait(); close(compsDone) }()
	select {
	case <-compsDone:
	case <-shutdownCtx.Done():
		s.log.WarnContext(ctx, "components did not stop in time")
	}
	// 5. Closers, last registered first.
	for i := len(s.closers) - 1; i >= 0; i-- {
		c := s.closers[i]
		if err := c.fn(shutdownCtx); err != nil {
			s.log.WarnContext(ctx, "close failed", slog.String("what", c.name), slog.Any("error", err))
		}
	}
	s.admin.Close()
	// 6. Telemetry.
	if err := s.telemetry(shutdownCtx); err != nil {
		s.log.WarnContext(ctx, "telemetry flush failed", slog.Any("error", err))
	}
	wg.Wait()
	s.log.InfoContext(ctx, "stopped")
	return runErr
}

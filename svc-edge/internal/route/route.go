// Package route sends an edge's data-API requests to the cores by their
// live metrics (SPEC §6, the "LB method").
//
// The cores are listed in order of preference (the nearer first). Every
// request goes to the first admitted core unless that core is overloaded —
// its smoothed response latency or its requests in flight above the
// thresholds — in which case a fixed share of requests is offloaded to the
// next admitted core. Offloading only a share, instead of moving everything
// to the faster core, keeps a surge from simply overloading the other core
// in turn. A core that fails EjectAfter requests or health probes in a row
// is ejected and gets nothing until ReadmitAfter probes in a row pass.
// Idempotent requests that fail at one core (connection error, 502, 503,
// 504) are tried once at the next, so a core dying costs clients nothing.
package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune the balancer; see Defaults.
type Options struct {
	// Offload is the share of requests sent to the next core while the
	// preferred one is overloaded.
	Offload float64
	// OverloadLatency and OverloadInFlight: a core whose smoothed latency
	// (to response headers) or requests in flight reach these is
	// overloaded.
	OverloadLatency  time.Duration
	OverloadInFlight int
	// EjectAfter consecutive failures (requests or probes) eject a core;
	// ReadmitAfter consecutive passing probes readmit it.
	EjectAfter, ReadmitAfter int
	// ProbeInterval and ProbeTimeout pace the health probes (GET /readyz).
	ProbeInterval, ProbeTimeout time.Duration
	// WriteStall bounds each write of an answer to the client: one that
	// takes nothing for that long is cut, and the core's answer with it
	// (0: 30 s, fdsnws-dataselect's bound at the cores).
	WriteStall time.Duration
}

// Defaults returns the documented defaults.
func Defaults() Options {
	return Options{
		Offload: 0.3, OverloadLatency: 250 * time.Millisecond, OverloadInFlight: 256,
		EjectAfter: 3, ReadmitAfter: 2, ProbeInterval: time.Second, ProbeTimeout: 800 * time.Millisecond,
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Offload < 0 || o.Offload > 1 {
		errs = append(errs, fmt.Errorf("offload share %v: must be between 0 and 1", o.Offload))
	}
	if o.OverloadLatency <= 0 || o.OverloadInFlight < 1 {
		errs = append(errs, errors.New("overload latency and in-flight thresholds must be positive"))
	}
	if o.EjectAfter < 1 || o.ReadmitAfter < 1 {
		errs = append(errs, errors.New("eject-after and readmit-after must be at least 1"))
	}
	if o.ProbeInterval <= 0 || o.ProbeTimeout <= 0 {
		errs = append(errs, errors.New("probe interval and timeout must be positive"))
	}
	return errors.Join(errs...)
}

// ewmaWeight is the weight of the newest latency sample in the smoothed
// latency: about the last ten requests count.
const ewmaWeight = 0.2

// core is one backend and its live metrics.
type core struct {
	base     *url.URL
	inFlight atomic.Int64
	requests atomic.Uint64
	failed   atomic.Uint64

	mu       sync.Mutex
	admitted bool
	failures int // consecutive
	passes   int // consecutive passing probes while ejected
	latency  time.Duration
}

// Status is a core's state as the balancer sees it.
type Status struct {
	Base     string
	Admitted bool
	InFlight int64
	Latency  time.Duration
	Requests uint64
	Failures uint64
}

// Balancer is an http.RoundTripper that picks the core for each request.
type Balancer struct {
	opts      Options
	cores     []*core
	transport http.RoundTripper
	probe     *http.Client
	log       *slog.Logger

	mu  sync.Mutex
	acc float64 // offload accumulator: exact shares, no randomness
}

// New returns a balancer over the cores' base URLs (http://host:port),
// preferred first, sending requests with transport.
func New(bases []string, opts Options, transport http.RoundTripper, log *slog.Logger) (*Balancer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		return nil, errors.New("no core data API given")
	}
	b := &Balancer{opts: opts, transport: transport, log: log,
		probe: &http.Client{Transport: transport, Timeout: opts.ProbeTimeout}}
	for _, s := range bases {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("core data API %q: want http://host:port", s)
		}
		b.cores = append(b.cores, &core{base: u, admitted: true})
	}
	return b, nil
}

// Status returns every core's state, in order of preference.
func (b *Balancer) Status() []Status {
	out := make([]Status, len(b.cores))
	for i, c := range b.cores {
		c.mu.Lock()
		out[i] = Status{Base: c.base.String(), Admitted: c.admitted, Latency: c.latency,
			InFlight: c.inFlight.Load(), Requests: c.requests.Load(), Failures: c.failed.Load()}
		c.mu.Unlock()
	}
	return out
}

// Order lists the cores, by their index in the list New was given, in the
// order a long-lived connection should try them: the admitted ones by
// preference, then the ejected ones (they may be back before their probes
// say so). SeedLink's TCP proxy follows it, so its connections go where
// the data API's requests go.
func (b *Balancer) Order() []int {
	var admitted, ejected []int
	for i, c := range b.cores {
		c.mu.Lock()
		ok := c.admitted
		c.mu.Unlock()
		if ok {
			admitted = append(admitted, i)
		} else {
			ejected = append(ejected, i)
		}
	}
	return append(admitted, ejected...)
}

// pick chooses the core for a request, skipping not.
func (b *Balancer) pick(not *core) *core {
	var first, second *core
	for _, c := range b.cores {
		if c == not {
			continue
		}
		c.mu.Lock()
		ok := c.admitted
		c.mu.Unlock()
		if !ok {
			continue
		}
		if first == nil {
			first = c
		} else if second == nil {
			second = c
		}
	}
	if first == nil {
		// Everything ejected: try the preferred core anyway rather than
		// refuse; it may be back before its probes say so.
		for _, c := range b.cores {
			if c != not {
				return c
			}
		}
		return nil
	}
	if second == nil || !b.overloaded(first) {
		return first
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acc += b.opts.Offload
	if b.acc >= 1 {
		b.acc--
		return second
	}
	return first
}

func (b *Balancer) overloaded(c *core) bool {
	c.mu.Lock()
	lat := c.latency
	c.mu.Unlock()
	return lat >= b.opts.OverloadLatency || c.inFlight.Load() >= int64(b.opts.OverloadInFlight)
}

// RoundTrip sends req to the chosen core; an idempotent request that fails
// there is tried once at the next.
func (b *Balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	c := b.pick(nil)
	resp, err := b.send(c, req)
	if !retryable(req, resp, err) {
		return resp, err
	}
	next := b.pick(c)
	if next == nil {
		return resp, err
	}
	if resp != nil {
		resp.Body.Close()
	}
	return b.send(next, req)
}

func retryable(req *http.Request, resp *http.Response, err error) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodOptions {
		return false
	}
	if req.Context().Err() != nil {
		return false // the client left
	}
	return err != nil || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout
}

func (b *Balancer) send(c *core, req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = c.base.Scheme, c.base.Host, c.base.Host
	c.inFlight.Add(1)
	c.requests.Add(1)
	start := time.Now()
	resp, err := b.transport.RoundTrip(out)
	c.inFlight.Add(-1)
	if err != nil && req.Context().Err() != nil {
		return nil, err // the client left; says nothing about the core
	}
	b.record(c, time.Since(start), err == nil && resp.StatusCode < 500)
	if err != nil {
		return nil, fmt.Errorf("core %s: %w", c.base.Host, err)
	}
	return resp, nil
}

// record folds one request's outcome into the core's metrics.
func (b *Balancer) record(c *core, took time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latency == 0 {
		c.latency = took
	} else {
		c.latency += time.Duration(ewmaWeight * float64(took-c.latency))
	}
	if ok {
		c.failures = 0
		return
	}
	c.failed.Add(1)
	b.fail(c, "request failed")
}

// fail counts a consecutive failure; c.mu is held.
func (b *Balancer) fail(c *core, why string) {
	c.failures++
	c.passes = 0
	if c.admitted && c.failures >= b.opts.EjectAfter {
		c.admitted = false
		b.log.Warn("core ejected from the data API", "core", c.base.Host, "after", c.failures, "last", why)
	}
}

// Run probes every core's /readyz until ctx ends: it ejects a core whose
// probes fail even when no request reaches it, and readmits it when they
// pass again.
func (b *Balancer) Run(ctx context.Context) error {
	t := time.NewTicker(b.opts.ProbeInterval)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, c := range b.cores {
			wg.Go(func() { b.check(ctx, c) })
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (b *Balancer) check(ctx context.Context, c *core) {
	err := b.probeOnce(ctx, c)
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		b.fail(c, err.Error())
		return
	}
	if c.admitted {
		c.failures = 0
		return
	}
	if c.passes++; c.passes >= b.opts.ReadmitAfter {
		// A fresh start: the latency it had when it failed says nothing
		// about it now.
		c.admitted, c.failures, c.passes, c.latency = true, 0, 0, 0
		b.log.InfoContext(ctx, "core readmitted to the data API", "core", c.base.Host)
	}
}

func (b *Balancer) probeOnce(ctx context.Context, c *core) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("/readyz").String(), nil)
	if err != nil {
		return err
	}
	resp, err := b.probe.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// Handler proxies every request to the cores through b. When no core
// answers, the client gets 502 with a JSON error and Retry-After.
func (b *Balancer) Handler() http.Handler {
	stall := b.opts.WriteStall
	if stall <= 0 {
		stall = 30 * time.Second
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The balancer sets the core; this placeholder never leaves.
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "core"
			pr.SetXForwarded()
		},
		Transport: b,
		// The edge answers for cross-origin reads itself (lib/cors); the
		// cores' own CORS headers would repeat its, and a browser refuses
		// a response with two Access-Control-Allow-Origin headers.
		ModifyResponse: func(resp *http.Response) error {
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					resp.Header.Del(k)
				}
			}
			return nil
		},
		ErrorLog: slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			b.log.WarnContext(r.Context(), "data API request failed at every core", "path", r.URL.Path, "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(`{"error":"no core answered; retry shortly"}` + "\n"))
		},
	}
	// Without a deadline a client that stops reading a large answer (a
	// download, a station document) would hold the handler, and the
	// core's answer, for as long as its kernel answers with a closed
	// window.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		proxy.ServeHTTP(&stallBound{ResponseWriter: w, rc: rc, stall: stall}, r)
		// What net/http still holds goes out after the handler, long
		// after the last write's deadline if the core paused before its
		// end.
		_ = rc.SetWriteDeadline(time.Now().Add(stall))
	})
}

// stallBound sets a write deadline before each write of an answer.
type stallBound struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w *stallBound) Write(p []byte) (int, error) {
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.stall)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	return w.ResponseWriter.Write(p)
}

func (w *stallBound) Unwrap() http.ResponseWriter { return w.ResponseWriter }

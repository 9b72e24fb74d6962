package notify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Errors of the domain; the HTTP handlers turn them into status codes.
var (
	// ErrBadClient: the client ID is not one (400).
	ErrBadClient = errors.New("not a client ID: want 16 to 128 characters of A-Z a-z 0-9 . _ -")
	// ErrTooManyPending: the client has MaxPending unacknowledged
	// notifications (429).
	ErrTooManyPending = errors.New("too many unacknowledged notifications")
	// ErrUnavailable: etcd or every core is unreachable; retry (503).
	ErrUnavailable = errors.New("notification store unavailable")
	// ErrAckBehind: the client already acknowledged further (409).
	ErrAckBehind = errors.New("already acknowledged further")
	// ErrAckBeyond: no notification with that sequence number yet (409).
	ErrAckBeyond = errors.New("beyond the last notification")
)

// Service posts, stores and delivers notifications at one edge.
type Service struct {
	cfg    Config
	log    *slog.Logger
	cli    *clientv3.Client
	cores  []*core
	tokens [][sha256.Size]byte
	m      *metrics
	stream streamConfig

	retention, dedup leaseCache

	mu      sync.Mutex
	sess    *concurrency.Session
	killed  bool
	nameMu  sync.Mutex
	names   map[string]*core
	deletes chan location

	repairFrom string // where the next repair round starts (repairLoop only)
	collectors []prometheus.Collector

	ctx    context.Context // the service's life: ends at Close
	cancel context.CancelFunc
	subs   sync.WaitGroup
	closed sync.Once
}

// location is one stored payload: a core's name and stream sequence.
type location struct {
	core string
	seq  uint64
}

// New validates cfg, connects to etcd (which must answer within
// EtcdTimeout) and starts connecting to the cores (which may be down: a
// post needs one of them).
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = log.With(slog.String("component", "notify"))
	bucket := max(cfg.Retention/168, time.Minute)
	dedupBucket := max(cfg.DedupWindow/12, 10*time.Second)
	s := &Service{
		cfg: cfg, log: log, m: newMetrics(),
		stream:    streamConfig{maxAge: cfg.Retention + 2*bucket, maxBytes: cfg.StoreBytes, maxMsg: cfg.MaxData + 1024},
		retention: leaseCache{ttl: cfg.Retention + bucket, every: bucket},
		dedup:     leaseCache{ttl: cfg.DedupWindow + dedupBucket, every: dedupBucket},
		names:     map[string]*core{},
		deletes:   make(chan location, 4096),
	}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
	}
	s.collectors = append(s.m.collectors(), s.gauges()...)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Etcd,
		DialTimeout:          cfg.EtcdTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
		TLS:                  cfg.TLS,
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("notify: etcd client: %w", err)
	}
	s.cli = cli
	sess, err := s.newSession(ctx)
	if err != nil {
		s.cancel()
		_ = cli.Close() // the unanswered session is the error to report
		return nil, fmt.Errorf("notify: etcd at %v did not answer within %s (is a quorum of members up?): %w", cfg.Etcd, cfg.EtcdTimeout, err)
	}
	s.sess = sess
	for _, u := range cfg.NATS {
		c := newCore(u)
		if err := c.connect(cfg.Site, cfg.TLS, log); err != nil {
			s.closeWith(true)
			return nil, fmt.Errorf("notify: %w", err)
		}
		s.cores = append(s.cores, c)
	}
	s.ensureCores(ctx)
	if len(s.cores) == 1 {
		log.WarnContext(ctx, "one core configured: notifications are not stored redundantly")
	}
	log.InfoContext(ctx, "notifications ready", slog.Any("cores", s.coreNames()), slog.Any("etcd", cfg.Etcd),
		slog.Duration("lease_ttl", cfg.LeaseTTL), slog.Int("max_pending", cfg.MaxPending), slog.Duration("retention", cfg.Retention))
	return s, nil
}

// Collectors returns the Prometheus collectors of the service (the same
// ones on every call).
func (s *Service) Collectors() []prometheus.Collector { return s.collectors }

func (s *Service) gauges() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shindo_edge_notify_cores_ready",
			Help: "Cores whose NOTIFY stream this edge can use now.",
		}, func() float64 {
			n := 0
			for _, c := range s.cores {
				if c.nc.IsConnected() && c.state.Load().stream != nil {
					n++
				}
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shindo_edge_notify_etcd_session",
			Help: "1 while this edge holds an etcd lease to own clients' delivery with, 0 while it has none.",
		}, func() float64 {
			if s.session() != nil {
				return 1
			}
			return 0
		}),
	}
}

// Ready reports whether notifications can be posted and delivered: an
// etcd lease is held and at least one core is usable.
func (s *Service) Ready(ctx context.Context) error {
	if s.session() == nil {
		return errors.New("notify: no etcd lease (etcd unreachable?)")
	}
	for _, c := range s.cores {
		if _, err := c.ready(ctx, s.stream, s.claim); err == nil {
			return nil
		}
	}
	return errors.New("notify: no core's NATS is reachable")
}

// Run keeps the etcd lease, repairs notifications that some core missed
// and deletes acknowledged payloads, until ctx ends or the service is
// closed. It returns nil then.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { s.keepSession(ctx) })
	wg.Go(func() { s.repairLoop(ctx) })
	wg.Go(func() { s.deleteLoop(ctx) })
	wg.Wait()
	return nil
}

// Close ends every subscription (releasing ownership), revokes the etcd
// lease and closes the connections.
func (s *Service) Close() error {
	s.closeWith(true)
	return nil
}

// closeWith stops the service; without grace it leaves the ownership keys
// and the lease in etcd, as a crashed edge would.
func (s *Service) closeWith(graceful bool) {
	s.closed.Do(func() {
		s.mu.Lock()
		s.killed = !graceful
		s.cancel() // under the lock: keepSession installs no lease after this
		sess := s.sess
		s.sess = nil
		s.mu.Unlock()
		s.subs.Wait()
		if sess != nil {
			sess.Orphan()
			if graceful {
				// The ownership keys go at once rather than a TTL later.
				ctx, cancel := context.WithTimeout(context.Background(), s.cfg.EtcdTimeout)
				if _, err := s.cli.Revoke(ctx, sess.Lease()); err != nil {
					s.log.WarnContext(ctx, "etcd lease not revoked; it expires by itself", slog.Any("error", err))
				}
				cancel()
			}
		}
		for _, c := range s.cores {
			c.close()
		}
		if s.cli != nil {
			// The lease is revoked or expires by itself: a client that
			// closes badly leaves nothing behind.
			_ = s.cli.Close()
		}
	})
}

func (s *Service) session() *concurrency.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

// newSession grants a lease and keeps it alive; subscriptions bind their
// ownership keys to it, so the keys of an edge that dies expire.
func (s *Service) newSession(ctx context.Context) (*concurrency.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.EtcdTimeout)
	defer cancel()
	ttl := int(s.cfg.LeaseTTL / time.Second)
	lease, err := s.cli.Grant(ctx, int64(ttl))
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(ttl), concurrency.WithContext(s.ctx))
	if err != nil {
		return nil, err
	}
	s.m.sessions.Inc()
	return sess, nil
}

// keepSession replaces the lease when it is lost (etcd unreachable for a
// TTL): the subscriptions bound to it have ended by then.
func (s *Service) keepSession(ctx context.Context) {
	wait := 100 * time.Millisecond
	for {
		sess := s.session()
		if sess == nil {
			next, err := s.newSession(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.WarnContext(ctx, "etcd lease not granted; clients cannot subscribe to notifications here", slog.Any("error", err))
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				wait = min(2*wait, 2*time.Second)
				continue
			}
			s.mu.Lock()
			if s.ctx.Err() != nil {
				s.mu.Unlock()
				next.Orphan() // the lease expires by itself
				return
			}
			s.sess, sess = next, next
			s.mu.Unlock()
			wait = 100 * time.Millisecond
			s.log.InfoContext(ctx, "etcd lease granted", slog.Int64("lease", int64(next.Lease())))
		}
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			s.mu.Lock()
			if s.sess == sess {
				s.sess = nil
			}
			s.mu.Unlock()
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "etcd lease lost; this edge's notification subscriptions ended", slog.Int64("lease", int64(sess.Lease())))
			}
		}
	}
}

// claim registers name as c's and reports false when another core has it.
func (s *Service) claim(c *core, name string) bool {
	s.nameMu.Lock()
	defer s.nameMu.Unlock()
	if other, ok := s.names[name]; ok && other != c {
		return false
	}
	s.names[name] = c
	return true
}

// ensureCores creates the stream on every connected core that lacks it.
func (s *Service) ensureCores(ctx context.Context) {
	for _, c := range s.cores {
		if !c.nc.IsConnected() || c.state.Load().stream != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		_, err := c.ready(cctx, s.stream, s.claim)
		cancel()
		if c.problem(err) {
			s.log.WarnContext(ctx, "core not usable for notifications", slog.String("core", c.Name()), slog.Any("error", err))
		}
	}
}

func (s *Service) coreNames() []string {
	var names []string
	for _, c := range s.cores {
		names = append(names, c.Name())
	}
	return names
}

// coreByName finds a configured core by name; nil if none has it (yet).
func (s *Service) coreByName(name string) *core {
	for _, c := range s.cores {
		if c.known() == name {
			return c
		}
	}
	return nil
}

// allKnown reports whether every configured core has been reached, so a
// location naming none of them is a core no longer configured.
func (s *Service) allKnown() bool {
	for _, c := range s.cores {
		if c.known() == "" {
			return false
		}
	}
	return true
}

// etcdCtx bounds one etcd request.
func (s *Service) etcdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.EtcdTimeout)
}

// leaseCache hands out a shared etcd lease for keys that expire together:
// one lease per bucket of time instead of one per key. Nobody keeps it
// alive; it expires ttl after it was granted, whichever edge granted it.
type leaseCache struct {
	ttl, every time.Duration

	mu      sync.Mutex
	id      clientv3.LeaseID
	granted time.Time
}

func (l *leaseCache) get(ctx context.Context, cli *clientv3.Client) (clientv3.LeaseID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != clientv3.NoLease && time.Since(l.granted) < l.every {
		return l.id, nil
	}
	resp, err := cli.Grant(ctx, int64(l.ttl/time.Second))
	if err != nil {
		return clientv3.NoLease, fmt.Errorf("grant lease: %w", err)
	}
	l.id, l.granted = resp.ID, time.Now()
	return l.id, nil
}

// drop forgets a lease etcd no longer knows.
func (l *leaseCache) drop(id clientv3.LeaseID) {
	l.mu.Lock()
	if l.id == id {
		l.id = clientv3.NoLease
	}
	l.mu.Unlock()
}

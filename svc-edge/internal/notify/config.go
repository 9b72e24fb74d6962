package notify

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"shindo.dev/lib/natsbus"
)

// Config configures a Service. Zero durations and sizes take the defaults
// documented on each field (see Defaults).
type Config struct {
	// Site names this edge (TPE-1, KHH-1): logged, and recorded in the
	// ownership key of the clients it serves.
	Site string
	// NATS lists the NATS URLs of every core (one server per core, each
	// its own JetStream domain). Order is preference for reads.
	NATS []string
	// Etcd lists the etcd endpoints (http://host:port).
	Etcd []string
	// TLS is the edge's internal certificate and the network's CAs, for
	// the cores' NATS servers and etcd under mutual TLS; nil: plain.
	TLS *tls.Config
	// Tokens are the bearer tokens app servers post with (at least 16
	// characters each).
	Tokens []string

	// LeaseTTL bounds how long an edge that died keeps its clients'
	// ownership keys (default 5s; whole seconds, at least 2s). Takeover
	// never waits for it.
	LeaseTTL time.Duration
	// MaxPending is the most unacknowledged notifications one client may
	// have; posts beyond it get 429 (default 1000).
	MaxPending int
	// MaxData is the largest data of one notification, in bytes of
	// compact JSON (default 4096, at most 65536).
	MaxData int
	// Retention is how long a notification is kept for a client that
	// does not come back (default 7 days).
	Retention time.Duration
	// DedupWindow is how long a poster-chosen notification ID is
	// remembered, so a retried post is stored once (default 1h).
	DedupWindow time.Duration
	// PublishTimeout bounds storing a notification on one core (default
	// 5s): a core slower than that counts as unreachable for this post.
	PublishTimeout time.Duration
	// EtcdTimeout bounds one etcd request (default 5s).
	EtcdTimeout time.Duration
	// RepairInterval is how often notifications stored on fewer than all
	// cores are copied to the missing ones (default 2s).
	RepairInterval time.Duration
	// StoreBytes caps the NOTIFY stream on each core (default 1 GiB); a
	// full store refuses new posts rather than dropping stored ones.
	StoreBytes int64
}

// Defaults returns the default settings (Site, NATS, Etcd and Tokens
// empty).
func Defaults() Config {
	return Config{
		LeaseTTL:       5 * time.Second,
		MaxPending:     1000,
		MaxData:        4096,
		Retention:      7 * 24 * time.Hour,
		DedupWindow:    time.Hour,
		PublishTimeout: 5 * time.Second,
		EtcdTimeout:    5 * time.Second,
		RepairInterval: 2 * time.Second,
		StoreBytes:     1 << 30,
	}
}

// withDefaults fills zero fields from Defaults.
func (c Config) withDefaults() Config {
	d := Defaults()
	if c.LeaseTTL == 0 {
		c.LeaseTTL = d.LeaseTTL
	}
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	if c.MaxData == 0 {
		c.MaxData = d.MaxData
	}
	if c.Retention == 0 {
		c.Retention = d.Retention
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = d.DedupWindow
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = d.PublishTimeout
	}
	if c.EtcdTimeout == 0 {
		c.EtcdTimeout = d.EtcdTimeout
	}
	if c.RepairInterval == 0 {
		c.RepairInterval = d.RepairInterval
	}
	if c.StoreBytes == 0 {
		c.StoreBytes = d.StoreBytes
	}
	return c
}

// Validate checks a configuration; zero fields stand for their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Site == "" {
		errs = append(errs, errors.New("notify: site must not be empty"))
	}
	if len(c.NATS) == 0 || len(c.NATS) > 4 {
		errs = append(errs, fmt.Errorf("notify: give the NATS URL of every core (1 to 4), got %d", len(c.NATS)))
	}
	seen := map[string]bool{}
	for _, u := range c.NATS {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || (p.Scheme != "nats" && p.Scheme != "tls") {
			errs = append(errs, fmt.Errorf("notify: NATS URL %q: want nats://host:port", redact(u)))
		}
		if seen[u] {
			errs = append(errs, fmt.Errorf("notify: NATS URL %q given twice: each core's server once", redact(u)))
		}
		seen[u] = true
	}
	if len(c.Etcd) == 0 {
		errs = append(errs, errors.New("notify: give at least one etcd endpoint"))
	}
	for _, e := range c.Etcd {
		if p, err := url.Parse(e); err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
			errs = append(errs, fmt.Errorf("notify: etcd endpoint %q: want http://host:port", e))
		}
	}
	if len(c.Tokens) == 0 {
		errs = append(errs, errors.New("notify: give at least one token for app servers to post with"))
	}
	for i, t := range c.Tokens {
		if len(t) < 16 || strings.ContainsAny(t, " \t\r\n") {
			errs = append(errs, fmt.Errorf("notify: token %d: want at least 16 characters without spaces", i+1))
		}
	}
	if c.LeaseTTL < 2*time.Second || c.LeaseTTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("notify: lease TTL %s: want whole seconds, at least 2s", c.LeaseTTL))
	}
	if c.MaxPending < 1 {
		errs = append(errs, errors.New("notify: max pending must be positive"))
	}
	if c.MaxData < 64 || c.MaxData > 64<<10 {
		errs = append(errs, fmt.Errorf("notify: max data %d: want 64 to 65536 bytes", c.MaxData))
	}
	if c.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("notify: retention %s: want at least 1h", c.Retention))
	}
	if dup := natsbus.Notifications.StreamConfig().Duplicates; c.DedupWindow < 2*dup || c.DedupWindow > c.Retention {
		errs = append(errs, fmt.Errorf("notify: dedup window %s: want %s to the retention", c.DedupWindow, 2*dup))
	}
	if c.PublishTimeout < 100*time.Millisecond || c.EtcdTimeout < 100*time.Millisecond {
		errs = append(errs, errors.New("notify: publish and etcd timeouts must be at least 100ms"))
	}
	if c.RepairInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("notify: repair interval must be at least 10ms"))
	}
	if c.StoreBytes < 1<<20 {
		errs = append(errs, errors.New("notify: store bytes must be at least 1 MiB"))
	}
	return errors.Join(errs...)
}

// redact hides a password in a URL for messages and logs.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = url.User("redacted")
	return p.String()
}

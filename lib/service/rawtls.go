package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

var deniedConnsOpts = prometheus.CounterOpts{
	Name: "shindo_connections_denied_total",
	Help: "Connections refused at an internal raw-TCP listener (SeedLink) under mutual TLS after the handshake, by listener and the caller's role.",
}

// handshakeTimeout bounds a raw TLS connection's handshake, as
// ReadHeaderTimeout bounds an HTTPS one's.
const handshakeTimeout = 10 * time.Second

// InternalListener serves a raw TCP protocol (SeedLink) as one of the
// network's internal hops, as Internal does for HTTP: under -mtls-cert
// each connection must finish a mutual TLS handshake within 10 s, with a
// certificate of the network's CA naming a role rule permits; the others
// fail their first read or write and are counted (handshake failures,
// and denials by role). Without -mtls-cert ln is served plain.
//
// The handshake runs in the connection's first read or write, in its own
// goroutine, so one caller that stalls it holds up no one else's accept.
func (s *Service) InternalListener(name string, ln net.Listener, rule peerid.Rule) net.Listener {
	if s.mtls == nil {
		return ln
	}
	return &mutualListener{Listener: ln, cfg: certfile.MutualServerConfig(s.mtls.cert, s.mtls.cas), check: func(c *tls.Conn) error {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		defer cancel()
		if err := c.HandshakeContext(ctx); err != nil {
			s.handshakeFailures.WithLabelValues(name).Inc()
			return fmt.Errorf("%s: TLS handshake: %w", name, err)
		}
		state := c.ConnectionState()
		id, ok := peerid.FromTLS(&state)
		if ok && rule.Permits(id, s.common.Site) {
			return nil
		}
		role, who := id.Role, id.String()
		if !ok {
			role, who = "none", "a caller whose certificate names no shindo identity"
		}
		s.deniedConns.WithLabelValues(name, role).Inc()
		s.log.Warn("connection refused at an internal listener", slog.String("listener", name),
			slog.String("caller", who), slog.String("remote", c.RemoteAddr().String()))
		return fmt.Errorf("%s may not connect to the %s at %s (allowed: %s)", who, name, s.common.Site, rule)
	}}
}

type mutualListener struct {
	net.Listener
	cfg   *tls.Config
	check func(*tls.Conn) error
}

func (l *mutualListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &checkedConn{Conn: tls.Server(c, l.cfg), check: l.check}, nil
}

// checkedConn is a server-side TLS connection whose first read or write
// runs the handshake and the caller's check; until it passed, nothing is
// read or written.
type checkedConn struct {
	*tls.Conn
	check func(*tls.Conn) error
	once  sync.Once
	err   error
}

var errRefused = errors.New("connection refused")

func (c *checkedConn) verify() error {
	c.once.Do(func() {
		if c.err = c.check(c.Conn); c.err != nil {
			c.err = errors.Join(errRefused, c.err)
			_ = c.Conn.NetConn().Close()
		}
	})
	return c.err
}

func (c *checkedConn) Read(p []byte) (int, error) {
	if err := c.verify(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *checkedConn) Write(p []byte) (int, error) {
	if err := c.verify(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

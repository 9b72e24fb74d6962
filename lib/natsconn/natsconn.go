// Package natsconn connects shindo services to NATS servers the same way
// everywhere: named connections that reconnect forever, with a bounded wait
// at start for a server the service cannot work without.
package natsconn

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Connect connects to url as name, over TLS with tlsConfig when it is not
// nil (the service's internal certificate: the servers of a network under
// mutual TLS require one, and grant what its role may do). With a positive
// wait the server must answer within it (a dependency of this process);
// with 0 the connection is made in the background whenever the server is
// up (a peer that may be away).
func Connect(ctx context.Context, url, name string, wait time.Duration, tlsConfig *tls.Config) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(500 * time.Millisecond),
		nats.PingInterval(5 * time.Second), nats.MaxPingsOutstanding(2)}
	if tlsConfig != nil {
		opts = append(opts, nats.Secure(tlsConfig))
	}
	if wait == 0 {
		nc, err := nats.Connect(url, append(opts, nats.RetryOnFailedConnect(true))...)
		if err != nil {
			return nil, fmt.Errorf("nats %s: %w", url, err)
		}
		return nc, nil
	}
	deadline := time.Now().Add(wait)
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("nats at %s not reachable within %s: %w", url, wait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

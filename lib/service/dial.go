package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/certfile"
)

// DialOptions are the options of every connection to another service: its
// transport (mutual TLS with the service's certificate when -mtls-cert is
// set, else plain) and tracing. Add call options as needed.
func (s *Service) DialOptions(extra ...grpc.DialOption) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if s.mtls != nil {
		creds = credentials.NewTLS(certfile.MutualClientConfig(s.mtls.cert, s.mtls.cas))
	}
	return append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithStatsHandler(otelgrpc.NewClientHandler())}, extra...)
}

// ClientTLS is the TLS configuration of a connection to another part of
// the network that is not gRPC (NATS): this process's internal certificate
// presented, the server's verified against the network's CAs. nil without
// -mtls-cert.
func (s *Service) ClientTLS() *tls.Config {
	if s.mtls == nil {
		return nil
	}
	return certfile.MutualClientConfig(s.mtls.cert, s.mtls.cas)
}

// Connect connects to a dependency's gRPC endpoint: it returns at once,
// and the connection connects whenever the dependency comes (gRPC
// reconnects on its own). A dependency still not serving after
// wait is logged, once, so an operator sees why work waits. Ingest keeps
// its journal while svc-waveform is away; an edge serves from the core it
// reaches while the other is down.
func (s *Service) Connect(ctx context.Context, what, target string, wait time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(target, s.DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", what, target, err)
	}
	go func() {
		if err := WaitServing(ctx, conn, wait); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "dependency not serving yet; connecting when it comes", slog.String("dependency", what),
				slog.String("target", target), slog.Any("error", err))
		}
	}()
	return conn, nil
}

// WaitServing polls conn's health check until it reports SERVING or wait
// passes.
func WaitServing(ctx context.Context, conn *grpc.ClientConn, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		switch {
		case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			return nil
		case err == nil:
			last = fmt.Errorf("health status %s", resp.GetStatus())
		default:
			// The status message alone reads better in a one-line error.
			last = errors.New(status.Convert(err).Message())
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

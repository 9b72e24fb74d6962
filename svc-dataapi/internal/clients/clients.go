// Package clients manages the data API's clients through DataService: an
// administrator creates a client with a role and a rate limit and receives
// its key once, lists clients, and revokes them.
package clients

import (
	"context"
	"log/slog"
	"math"
	"regexp"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/stationdb"
	"shindo.dev/svc-dataapi/internal/auth"
	"shindo.dev/svc-dataapi/internal/storeerr"
)

// Store is what the server needs of the metadata database
// (stationdb.Store).
type Store interface {
	CreateClient(ctx context.Context, nc stationdb.NewClient) (*stationdb.Client, string, error)
	ListClients(ctx context.Context) ([]stationdb.Client, error)
	RevokeClient(ctx context.Context, keyID string) (*stationdb.Client, error)
}

// Authenticator admits administrators and forgets revoked keys
// (auth.Authenticator).
type Authenticator interface {
	Require(ctx context.Context, role string) (auth.Principal, error)
	Forget(keyID string)
}

// Server implements the client RPCs of DataService.
type Server struct {
	store   Store
	authn   Authenticator
	timeout time.Duration
	log     *slog.Logger
}

// New returns a server on store (nil without a database: calls then fail
// with Unimplemented).
func New(store Store, authn Authenticator, timeout time.Duration, log *slog.Logger) *Server {
	return &Server{store: store, authn: authn, timeout: timeout, log: log}
}

var keyIDPattern = regexp.MustCompile(`^[a-z0-9_]{8,40}$`)

func (s *Server) admit(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.store == nil {
		return ctx, func() {}, status.Error(codes.Unimplemented, "API clients need the metadata database (-database-url)")
	}
	if _, err := s.authn.Require(ctx, stationdb.RoleAdmin); err != nil {
		return ctx, func() {}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// CreateClient creates a client and returns its key.
func (s *Server) CreateClient(ctx context.Context, req *datav1.CreateClientRequest) (*datav1.CreateClientResponse, error) {
	ctx, cancel, err := s.admit(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetRole() != stationdb.RoleWriter && req.GetRole() != stationdb.RoleAdmin:
		return nil, status.Error(codes.InvalidArgument, `role: "writer" or "admin"`)
	case math.IsNaN(req.GetRateLimit()) || req.GetRateLimit() < 0 || req.GetRateLimit() > 100000:
		return nil, status.Error(codes.InvalidArgument, "rate_limit: 0 to 100000 requests per second")
	case req.GetRateBurst() > 1000000:
		return nil, status.Error(codes.InvalidArgument, "rate_burst: 0 to 1000000")
	}
	c, key, err := s.store.CreateClient(ctx, stationdb.NewClient{
		Name: req.GetName(), Role: req.GetRole(), RateLimit: req.GetRateLimit(), RateBurst: int(req.GetRateBurst()),
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.CreateClientResponse{Client: clientProto(c), Key: key}, nil
}

// ListClients lists every client.
func (s *Server) ListClients(ctx context.Context, _ *datav1.ListClientsRequest) (*datav1.ListClientsResponse, error) {
	ctx, cancel, err := s.admit(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListClients(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &datav1.ListClientsResponse{Clients: make([]*datav1.Client, 0, len(list))}
	for i := range list {
		out.Clients = append(out.Clients, clientProto(&list[i]))
	}
	return out, nil
}

// RevokeClient revokes a client's key.
func (s *Server) RevokeClient(ctx context.Context, req *datav1.RevokeClientRequest) (*datav1.RevokeClientResponse, error) {
	ctx, cancel, err := s.admit(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	if !keyIDPattern.MatchString(req.GetKeyId()) {
		return nil, status.Error(codes.InvalidArgument, "key_id: 8 to 40 of a–z, 0–9 and _")
	}
	c, err := s.store.RevokeClient(ctx, req.GetKeyId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	s.authn.Forget(c.KeyID)
	return &datav1.RevokeClientResponse{Client: clientProto(c)}, nil
}

func (s *Server) fail(ctx context.Context, err error) error {
	return storeerr.Status(ctx, s.log, err, "client")
}

func clientProto(c *stationdb.Client) *datav1.Client {
	p := &datav1.Client{
		KeyId: c.KeyID, Name: c.Name, Role: c.Role, RateLimit: c.RateLimit, RateBurst: uint32(c.RateBurst),
		CreatedMs: c.CreatedAt.UnixMilli(),
	}
	if c.RevokedAt != nil {
		p.RevokedMs = c.RevokedAt.UnixMilli()
	}
	return p
}

// Package clients manages the data API's clients through DataService: an
// administrator creates a client with a role, a rate limit and the topics
// it may subscribe to, and receives its key once, lists clients, and
// revokes them. Anyone may check keys (CheckKeys): the edges do, to admit
// the apps of their WebSocket API and to drop them once their key is
// revoked.
package clients

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/svc-dataapi/internal/auth"
	"shindo.dev/svc-dataapi/internal/storeerr"
)

// Store is what the server needs of the metadata database
// (metadb.Store).
type Store interface {
	CreateClient(ctx context.Context, nc metadb.NewClient) (*metadb.Client, string, error)
	ListClients(ctx context.Context) ([]metadb.Client, error)
	RevokeClient(ctx context.Context, keyID string) (*metadb.Client, error)
	ClientsByKeys(ctx context.Context, keys []string) ([]*metadb.Client, error)
}

// MaxCheckKeys is the most keys one CheckKeys call checks.
const MaxCheckKeys = 500

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
	if _, err := s.authn.Require(ctx, metadb.RoleAdmin); err != nil {
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
	if err := checkCreate(req); err != nil {
		return nil, err
	}
	c, key, err := s.store.CreateClient(ctx, metadb.NewClient{
		Name: req.GetName(), Role: req.GetRole(), RateLimit: req.GetRateLimit(), RateBurst: int(req.GetRateBurst()),
		Topics: req.GetTopics(),
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.CreateClientResponse{Client: clientProto(c), Key: key}, nil
}

// checkCreate refuses a bad CreateClient request with InvalidArgument, in
// the request's own terms (the store checks again, as the backstop).
func checkCreate(req *datav1.CreateClientRequest) error {
	switch role := req.GetRole(); {
	case role != metadb.RoleWriter && role != metadb.RoleSubscriber && role != metadb.RoleAdmin:
		return status.Error(codes.InvalidArgument, `role: "writer", "subscriber" or "admin"`)
	case math.IsNaN(req.GetRateLimit()) || req.GetRateLimit() < 0 || req.GetRateLimit() > 100000:
		return status.Error(codes.InvalidArgument, "rate_limit: 0 to 100000 requests per second")
	case req.GetRateBurst() > 1000000:
		return status.Error(codes.InvalidArgument, "rate_burst: 0 to 1000000")
	}
	for _, t := range req.GetTopics() {
		if !metadb.ValidTopic(t) {
			return status.Errorf(codes.InvalidArgument, `topics: %q is not a topic: 1 to 64 of a–z, 0–9, '.', '_' and '-', or "*" for every topic`, t)
		}
	}
	// Every topic is valid here, so only their number can be wrong.
	if _, err := metadb.NormalizeTopics(req.GetTopics()); err != nil {
		return status.Errorf(codes.InvalidArgument, "topics: at most %d different topics", metadb.MaxTopics)
	}
	return nil
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

// CheckKeys tells, for each key in order, whether it is a client's key
// and whose. It needs no credential: a key is the capability, so telling
// its holder whether it works leaks nothing (the guard limits the calls
// per address). It fails with InvalidArgument for no keys or more than
// MaxCheckKeys, and with Unavailable when the database cannot answer, so
// that callers never take "cannot tell" for "unknown key".
func (s *Server) CheckKeys(ctx context.Context, req *datav1.CheckKeysRequest) (*datav1.CheckKeysResponse, error) {
	if s.store == nil {
		return nil, status.Error(codes.Unimplemented, "API keys need the metadata database (-database-url)")
	}
	keys := req.GetKeys()
	if len(keys) == 0 || len(keys) > MaxCheckKeys {
		return nil, status.Errorf(codes.InvalidArgument, "keys: 1 to %d keys, got %d", MaxCheckKeys, len(keys))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	found, err := s.store.ClientsByKeys(ctx, keys)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	if len(found) != len(keys) {
		return nil, s.unavailable(ctx, fmt.Errorf("clients by keys: %d answers to %d keys", len(found), len(keys)))
	}
	out := &datav1.CheckKeysResponse{Results: make([]*datav1.KeyCheck, len(keys))}
	for i, c := range found {
		r := &datav1.KeyCheck{}
		if c != nil {
			r.Known, r.Client = true, clientProto(c)
		}
		out.Results[i] = r
	}
	return out, nil
}

// unavailable is CheckKeys's answer to a store failure: Unavailable
// whatever the cause (Canceled for a caller that left), the unexpected
// ones logged.
func (s *Server) unavailable(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case !errors.Is(err, metadb.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded):
		s.log.ErrorContext(ctx, "key check failed", slog.Any("error", err))
	}
	return status.Error(codes.Unavailable, "metadata database unavailable, retry")
}

func (s *Server) fail(ctx context.Context, err error) error {
	return storeerr.Status(ctx, s.log, err, "client")
}

func clientProto(c *metadb.Client) *datav1.Client {
	p := &datav1.Client{
		KeyId: c.KeyID, Name: c.Name, Role: c.Role, RateLimit: c.RateLimit, RateBurst: uint32(c.RateBurst),
		CreatedMs: c.CreatedAt.UnixMilli(), Topics: c.Topics,
	}
	if c.RevokedAt != nil {
		p.RevokedMs = c.RevokedAt.UnixMilli()
	}
	return p
}

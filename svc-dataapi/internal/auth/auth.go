// Package auth identifies the callers of the data API from their
// `authorization: Bearer <credential>` header: one of the service's admin
// tokens (the bootstrap credential of the operator, given by flag) or an
// API client's key (metadb: created by an admin, stored hashed,
// revocable). It also decides whether a caller holds the role a call
// needs.
//
// Looking a key up costs a database read, so identified keys are cached
// for CacheTTL: a revocation made through this process takes effect at
// once, one made through the other core within CacheTTL.
package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/metadb"
)

// CacheTTL is how long an identified key is trusted without a new lookup.
const CacheTTL = 5 * time.Second

// maxCached bounds the cache; past it the cache is emptied, which costs
// only lookups.
const maxCached = 10_000

// Errors of Identify.
var (
	// ErrMissing: no credential was given.
	ErrMissing = errors.New("credential required: authorization: Bearer <key>")
	// ErrInvalid: the credential is not a known token or key.
	ErrInvalid = errors.New("invalid credential")
	// ErrRevoked: the key was revoked.
	ErrRevoked = errors.New("key revoked")
	// ErrScheme: the authorization header is not a Bearer credential.
	ErrScheme = errors.New("authorization: only Bearer credentials are accepted")
	// ErrUnavailable: the key could not be checked now.
	ErrUnavailable = errors.New("metadata database unavailable, retry")
)

// Principal is an identified caller.
type Principal struct {
	// Token is true for an admin token (no key ID, no rate limit).
	Token bool
	// KeyID names the client of a key.
	KeyID string
	// Role is metadb.RoleAdmin, metadb.RoleWriter or
	// metadb.RoleSubscriber.
	Role string
	// RateLimit and RateBurst are the key's own limits; 0 for defaults.
	RateLimit float64
	RateBurst int
	// Topics are those the key may subscribe to (metadb.Client.Topics);
	// an admin may subscribe to every topic whatever they say.
	Topics []string
}

// Allows reports whether p may make a call that needs role: an admin may
// do everything, a writer what needs a writer (a subscriber holds no call
// of the data API that needs a credential).
func (p *Principal) Allows(role string) bool {
	return p.Role == metadb.RoleAdmin || p.Role == role
}

// MaySubscribe reports whether p may subscribe to topic
// (metadb.MaySubscribe): an admin to every topic, anyone else to its
// topics.
func (p *Principal) MaySubscribe(topic string) bool {
	return metadb.MaySubscribe(p.Role, p.Topics, topic)
}

// Keys is what Authenticator needs of the metadata database
// (metadb.Store).
type Keys interface {
	ClientByKey(ctx context.Context, key string) (*metadb.Client, error)
}

type cached struct {
	p       Principal
	revoked bool
	expires time.Time
}

// Authenticator identifies callers.
type Authenticator struct {
	tokens [][]byte
	keys   Keys // nil: only admin tokens

	mu    sync.Mutex
	cache map[string]cached // by full key
	now   func() time.Time
}

// New returns an Authenticator accepting tokens as admin and keys from
// keys (nil when there is no database).
func New(tokens []string, keys Keys) *Authenticator {
	a := &Authenticator{keys: keys, cache: map[string]cached{}, now: time.Now}
	for _, t := range tokens {
		a.tokens = append(a.tokens, []byte(t))
	}
	return a
}

// Credential extracts the Bearer credential of an authorization header;
// empty header, empty credential.
func Credential(header string) (string, error) {
	if header == "" {
		return "", nil
	}
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrScheme
	}
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return "", ErrInvalid
	}
	return cred, nil
}

// Cached returns the principal of cred if it is known and fresh, without
// a lookup.
func (a *Authenticator) Cached(cred string) (Principal, bool) {
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(cred), t) == 1 {
			return Principal{Token: true, Role: metadb.RoleAdmin}, true
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.cache[cred]
	if !ok || c.revoked || a.now().After(c.expires) {
		return Principal{}, false
	}
	return c.p, true
}

// Identify returns the principal of a credential (as Credential gives
// it): ErrMissing for none, ErrInvalid, ErrRevoked or ErrUnavailable.
func (a *Authenticator) Identify(ctx context.Context, cred string) (Principal, error) {
	if cred == "" {
		return Principal{}, ErrMissing
	}
	if p, ok := a.Cached(cred); ok {
		return p, nil
	}
	if a.keys == nil {
		return Principal{}, ErrInvalid
	}
	if _, _, ok := metadb.ParseKey(cred); !ok {
		return Principal{}, ErrInvalid
	}
	c, err := a.keys.ClientByKey(ctx, cred)
	switch {
	case errors.Is(err, metadb.ErrNotFound):
		return Principal{}, ErrInvalid
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	p := Principal{KeyID: c.KeyID, Role: c.Role, RateLimit: c.RateLimit, RateBurst: c.RateBurst, Topics: c.Topics}
	a.mu.Lock()
	if len(a.cache) >= maxCached {
		clear(a.cache)
	}
	a.cache[cred] = cached{p: p, revoked: c.Revoked(), expires: a.now().Add(CacheTTL)}
	a.mu.Unlock()
	if c.Revoked() {
		return Principal{}, ErrRevoked
	}
	return p, nil
}

// Forget drops a client's key from the cache (after revoking it here).
func (a *Authenticator) Forget(keyID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, c := range a.cache {
		if c.p.KeyID == keyID {
			delete(a.cache, k)
		}
	}
}

// Require identifies the caller of a gRPC call (or a call through the
// gateway, which passes the header on as metadata) and checks that it
// holds role, returning a gRPC status error otherwise: Unauthenticated,
// PermissionDenied or Unavailable.
func (a *Authenticator) Require(ctx context.Context, role string) (Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var header string
	if h := md.Get("authorization"); len(h) > 0 {
		header = h[0]
	}
	cred, err := Credential(header)
	if err != nil {
		return Principal{}, status.Error(codes.Unauthenticated, err.Error())
	}
	p, err := a.Identify(ctx, cred)
	switch {
	case errors.Is(err, ErrUnavailable):
		return Principal{}, status.Error(codes.Unavailable, ErrUnavailable.Error())
	case errors.Is(err, ErrMissing):
		return Principal{}, status.Errorf(codes.Unauthenticated, "%s credential required: authorization: Bearer <key>", role)
	case err != nil:
		return Principal{}, status.Error(codes.Unauthenticated, err.Error())
	case !p.Allows(role):
		return Principal{}, status.Errorf(codes.PermissionDenied, "this key's role is %s; the call needs %s", p.Role, role)
	}
	return p, nil
}

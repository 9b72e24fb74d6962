package httpapi

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"shindo.dev/svc-dataapi/internal/auth"
)

// Identifier identifies callers (auth.Authenticator).
type Identifier interface {
	Cached(cred string) (auth.Principal, bool)
	Identify(ctx context.Context, cred string) (auth.Principal, error)
}

// Limiter is a set of token buckets (ratelimit.Limiter).
type Limiter interface {
	Allow(key string, rate float64, burst int) (bool, time.Duration)
}

// Limit is a token bucket's rate (requests per second; 0: unlimited) and
// burst.
type Limit struct {
	Rate  float64
	Burst int
}

// Guard stands in front of every route but the health probe:
//
//   - A request body longer than MaxBody is refused with 413.
//   - A credential (authorization: Bearer …) must be valid — an admin
//     token or a key not revoked — or the request gets 401, even on
//     routes that need none: a client that sends a wrong key should learn
//     it.
//   - Rate limits: a request with a key draws on the key's bucket (the
//     key's own limit, else PerKey); one without, on its client address's
//     bucket (PerAddress; IPv6 addresses by /64, the block one host
//     usually holds). Admin tokens, the operator's own credential, are not
//     limited. An empty bucket gets 429 with Retry-After. A key not seen
//     recently is looked up in the database only after drawing on a
//     second bucket of its address (lookups, PerAddress too), so a flood
//     of made-up keys reaches the database no faster than the address
//     limit, while anonymous traffic from a shared address cannot starve
//     the lookups of keyed clients behind it.
type Guard struct {
	Auth       Identifier
	Buckets    Limiter
	PerAddress Limit
	PerKey     Limit
	// Trusted are the proxies (the edges) whose X-Forwarded-For names the
	// client.
	Trusted []netip.Prefix
	MaxBody int64
	// Exempt paths are passed through untouched (the health probe).
	Exempt map[string]bool
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > g.MaxBody {
			WriteError(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
				"request body too large: at most "+strconv.FormatInt(g.MaxBody, 10)+" bytes")
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, g.MaxBody)
		}
		cred, err := auth.Credential(r.Header.Get("Authorization"))
		if err != nil {
			WriteError(w, http.StatusUnauthorized, codes.Unauthenticated, err.Error())
			return
		}
		addr := g.bucketOf(r)
		if cred == "" {
			if !g.take(w, addr, g.PerAddress) {
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		p, ok := g.Auth.Cached(cred)
		if !ok {
			if !g.take(w, "l"+addr, g.PerAddress) {
				return
			}
			if p, err = g.Auth.Identify(r.Context(), cred); err != nil {
				switch {
				case errors.Is(err, auth.ErrUnavailable):
					WriteError(w, http.StatusServiceUnavailable, codes.Unavailable, auth.ErrUnavailable.Error())
				default:
					WriteError(w, http.StatusUnauthorized, codes.Unauthenticated, err.Error())
				}
				return
			}
		}
		if !p.Token {
			limit := g.PerKey
			if p.RateLimit > 0 {
				limit.Rate = p.RateLimit
			}
			if p.RateBurst > 0 {
				limit.Burst = p.RateBurst
			}
			if !g.take(w, "k:"+p.KeyID, limit) {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// take draws a token from bucket name, answering 429 if it is empty.
func (g *Guard) take(w http.ResponseWriter, name string, l Limit) bool {
	ok, wait := g.Buckets.Allow(name, l.Rate, l.Burst)
	if ok {
		return true
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(max(1, math.Ceil(wait.Seconds())))))
	WriteError(w, http.StatusTooManyRequests, codes.ResourceExhausted, "rate limit exceeded, retry later")
	return false
}

// bucketOf names the address bucket of a request's client.
func (g *Guard) bucketOf(r *http.Request) string {
	a := ClientAddr(r, g.Trusted)
	if !a.IsValid() {
		return "a:?"
	}
	a = a.WithZone("")
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return "a:" + p.String()
	}
	return "a:" + a.Unmap().String()
}

// ClientAddr returns the address of a request's client: the peer, or, when
// the peer is a trusted proxy, the rightmost address of X-Forwarded-For
// that is not a trusted proxy (the one the nearest untrusted hop gave).
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !isTrusted(peer, trusted) {
		return peer
	}
	client := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return client // garbage: trust nothing further left
			}
			client = a.Unmap()
			if !isTrusted(client, trusted) {
				return client
			}
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

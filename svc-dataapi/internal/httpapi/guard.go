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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/apierror"
	"shindo.dev/lib/cidr"
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

// Guard stands in front of every route but the health probe, and of every
// gRPC call but the health service's (UnaryInterceptor), so neither
// protocol is a side door around the other's limits:
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
			apierror.Write(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
				"request body too large: at most "+strconv.FormatInt(g.MaxBody, 10)+" bytes")
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, g.MaxBody)
		}
		g.forwardedOrigin(r)
		if no := g.admit(r.Context(), r.Header.Get("Authorization"), g.bucketOf(r)); no != nil {
			if no.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(max(1, math.Ceil(no.retryAfter.Seconds())))))
			}
			apierror.Write(w, no.status, no.code, no.msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forwardedOrigin makes a request carry the address its client used. An
// edge forwards with the core's address as Host, and names the client's
// in X-Forwarded-Host and X-Forwarded-Proto (httputil.ProxyRequest's
// SetXForwarded); the documents that name where they are served from —
// the FDSN services' WADL, error documents and StationXML ModuleURI, the
// base map's TileJSON — must name the edge, which the public reaches, not
// a core, which it does not. From a trusted proxy, Host becomes
// X-Forwarded-Host (when it is a plausible host); from anyone else both
// headers are removed, so that no client names an address for others.
func (g *Guard) forwardedOrigin(r *http.Request) {
	if !cidr.Contains(g.Trusted, peerAddr(r)) {
		r.Header.Del("X-Forwarded-Host")
		r.Header.Del("X-Forwarded-Proto")
		return
	}
	host, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ",")
	if host = strings.TrimSpace(host); plausibleHost(host) {
		r.Host = host
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p != "http" && p != "https" {
		r.Header.Del("X-Forwarded-Proto")
	}
}

// plausibleHost tells whether h can be a host[:port] a client asked for:
// a name, an IPv4 address or a bracketed IPv6 one, at most 255 bytes. It
// goes into the addresses answers give, XML and JSON among them.
func plausibleHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// Scheme is the scheme a request came by, for the addresses answers
// give: at the edge in front when it came through one (X-Forwarded-Proto,
// which Guard keeps from trusted proxies only), here otherwise.
func Scheme(r *http.Request) string {
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		return p
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// peerAddr is a request's peer: the address it came from.
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return peer.Unmap()
}

// refusal is why the guard turns a call away, in both protocols' terms.
type refusal struct {
	status     int
	code       codes.Code
	msg        string
	retryAfter time.Duration
}

// admit applies the credential check and the rate limits to a call with
// authorization header header from the client whose address bucket is
// addr; nil lets it through.
func (g *Guard) admit(ctx context.Context, header, addr string) *refusal {
	cred, err := auth.Credential(header)
	if err != nil {
		return &refusal{status: http.StatusUnauthorized, code: codes.Unauthenticated, msg: err.Error()}
	}
	if cred == "" {
		return g.take(addr, g.PerAddress)
	}
	p, ok := g.Auth.Cached(cred)
	if !ok {
		if no := g.take("l"+addr, g.PerAddress); no != nil {
			return no
		}
		if p, err = g.Auth.Identify(ctx, cred); err != nil {
			if errors.Is(err, auth.ErrUnavailable) {
				return &refusal{status: http.StatusServiceUnavailable, code: codes.Unavailable, msg: auth.ErrUnavailable.Error()}
			}
			return &refusal{status: http.StatusUnauthorized, code: codes.Unauthenticated, msg: err.Error()}
		}
	}
	if p.Token {
		return nil
	}
	limit := g.PerKey
	if p.RateLimit > 0 {
		limit.Rate = p.RateLimit
	}
	if p.RateBurst > 0 {
		limit.Burst = p.RateBurst
	}
	return g.take("k:"+p.KeyID, limit)
}

// take draws a token from bucket name, refusing the call if it is empty.
func (g *Guard) take(name string, l Limit) *refusal {
	ok, wait := g.Buckets.Allow(name, l.Rate, l.Burst)
	if ok {
		return nil
	}
	return &refusal{status: http.StatusTooManyRequests, code: codes.ResourceExhausted,
		msg: "rate limit exceeded, retry later", retryAfter: wait}
}

// UnaryInterceptor and StreamInterceptor put the gRPC server's calls
// behind the same guard as the REST routes: the same credential check,
// key-lookup throttle and buckets, keyed by the caller's address (nothing
// proxies gRPC, so the peer is the client). The health service's calls
// pass untouched. A refusal is the status the REST
// route's error carries; an empty bucket also sets the trailer
// retry-after, in seconds.
func (g *Guard) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := g.admitGRPC(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor: see UnaryInterceptor.
func (g *Guard) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := g.admitGRPC(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

func (g *Guard) admitGRPC(ctx context.Context, method string) error {
	if strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return nil
	}
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if h := md.Get("authorization"); len(h) > 0 {
			header = h[0]
		}
	}
	addr := netip.Addr{}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		if ap, err := netip.ParseAddrPort(pr.Addr.String()); err == nil {
			addr = ap.Addr()
		}
	}
	no := g.admit(ctx, header, addrBucket(addr))
	if no == nil {
		return nil
	}
	if no.retryAfter > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.Itoa(int(max(1, math.Ceil(no.retryAfter.Seconds()))))))
	}
	return status.Error(no.code, no.msg)
}

// bucketOf names the address bucket of a request's client.
func (g *Guard) bucketOf(r *http.Request) string { return addrBucket(ClientAddr(r, g.Trusted)) }

// addrBucket names the bucket of a client address: IPv6 addresses by /64,
// the block one host usually holds.
func addrBucket(a netip.Addr) string {
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
	peer := peerAddr(r)
	if !peer.IsValid() || !cidr.Contains(trusted, peer) {
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
			if !cidr.Contains(trusted, client) {
				return client
			}
		}
	}
	return client
}

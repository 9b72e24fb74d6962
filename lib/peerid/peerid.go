// Package peerid tells who is calling over mutual TLS, and whether they may:
// every certificate of a shindo network names the site and the role of its
// holder in a URI SAN, shindo://SITE/ROLE (issued by shindo dev -tls and
// shindo cert), and each gRPC server holds a Policy of the roles that may
// call each of its methods. An edge may subscribe to a core's RTS but not
// feed it; only the core's own ingest may.
package peerid

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Identity is who holds a certificate: a site (TNN-1) and a role (ingest,
// edge, operator, …).
type Identity struct {
	Site, Role string
}

func (id Identity) String() string { return id.Site + "/" + id.Role }

// Scheme is the scheme of the URI SAN that carries an Identity.
const Scheme = "shindo"

// The roles of the network's processes and people; a certificate may name
// another, which no policy here allows.
const (
	Ingest   = "ingest"
	RTS      = "rts"
	Waveform = "waveform"
	DataAPI  = "dataapi"
	Edge     = "edge"
	// Operator is a person's or a tool's: shindo chaos, witness, grpcurl.
	Operator = "operator"
)

var namePart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Valid reports whether both parts are present and plain names.
func (id Identity) Valid() bool {
	return namePart.MatchString(id.Site) && namePart.MatchString(id.Role)
}

// Of reads the identity a certificate carries; false when it carries none,
// or more than one.
func Of(cert *x509.Certificate) (Identity, bool) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != Scheme || !strings.HasPrefix(u.Path, "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		id := Identity{Site: u.Host, Role: u.Path[1:]}
		if id.Valid() {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		return Identity{}, false
	}
	return found[0], true
}

// FromContext is the identity of a gRPC call's caller, from the
// certificate it presented; false on a connection without TLS or without
// a verified certificate naming one.
func FromContext(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return Identity{}, false
	}
	return FromTLS(&info.State)
}

// FromTLS is the identity of the peer of a TLS connection (an HTTP
// request's r.TLS), from the certificate it presented and the server
// verified; false on nil (no TLS) or without a verified certificate naming
// one.
func FromTLS(state *tls.ConnectionState) (Identity, bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	return Of(state.VerifiedChains[0][0])
}

// Rule is who may call a method.
type Rule struct {
	roles []string
	// sameSite: only callers of the server's own site.
	sameSite bool
}

// Allow lets callers of any of roles call, from any site.
func Allow(roles ...string) Rule { return Rule{roles: roles} }

// AllowSameSite lets callers of any of roles call from the server's site
// only: a core's streams are fed by that core's ingest alone.
func AllowSameSite(roles ...string) Rule { return Rule{roles: roles, sameSite: true} }

// Anyone lets every identity of the network call (health checks).
func Anyone() Rule { return Rule{roles: nil} }

// Permits tells whether id may call at a server of site.
func (r Rule) Permits(id Identity, site string) bool {
	if r.sameSite && id.Site != site {
		return false
	}
	if r.roles == nil {
		return true
	}
	for _, role := range r.roles {
		if role == id.Role {
			return true
		}
	}
	return false
}

func (r Rule) String() string {
	s := "anyone"
	if r.roles != nil {
		s = strings.Join(r.roles, ", ")
	}
	if r.sameSite {
		s += " of this site"
	}
	return s
}

// Policy maps a gRPC method ("/shindo.rts.v1.RTSService/Ingest") or a whole
// service ("/shindo.rts.v1.RTSService/") to the rule for it; the method's
// own entry wins. A method with neither is refused: a new method is closed
// until its policy says who may call it.
type Policy map[string]Rule

// Check tells whether id may call method at a server of site, and if not,
// an error with status PERMISSION_DENIED.
func (p Policy) Check(id Identity, site, method string) error {
	rule, ok := p[method]
	if !ok {
		i := strings.LastIndexByte(method, '/')
		if i < 0 {
			return status.Errorf(codes.PermissionDenied, "%s: no such method", method)
		}
		if rule, ok = p[method[:i+1]]; !ok {
			return status.Errorf(codes.PermissionDenied, "%s: no caller is allowed", method)
		}
	}
	if !rule.Permits(id, site) {
		return status.Errorf(codes.PermissionDenied, "%s may not call %s at %s (allowed: %s)", id, method, site, rule)
	}
	return nil
}

// Authorize checks the caller of the gRPC call of ctx at a server of site:
// without a verified certificate naming an identity the error has status
// UNAUTHENTICATED, and if p does not allow the identity PERMISSION_DENIED.
// It returns the identity it found.
func (p Policy) Authorize(ctx context.Context, site, method string) (Identity, error) {
	id, ok := FromContext(ctx)
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "a certificate naming a shindo identity is required")
	}
	return id, p.Check(id, site, method)
}

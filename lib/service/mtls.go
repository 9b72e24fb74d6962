package service

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"shindo.dev/lib/certfile"
	"shindo.dev/lib/peerid"
)

// mutualTLS is the service's certificate for the internal hops and the CAs
// of the network.
type mutualTLS struct {
	cert *certfile.Reloader
	cas  *x509.CertPool
	self peerid.Identity
}

func (s *Service) loadMutualTLS(c Common) (*mutualTLS, error) {
	r, err := s.Certificate(c.MTLSCert, c.MTLSKey)
	if err != nil {
		return nil, fmt.Errorf("mtls-cert: %w", err)
	}
	cas, err := certfile.LoadPool(c.MTLSCA)
	if err != nil {
		return nil, fmt.Errorf("mtls-ca: %w", err)
	}
	self, ok := peerid.Of(r.Leaf())
	if !ok {
		return nil, fmt.Errorf("mtls-cert %s names no shindo identity (a URI SAN shindo://SITE/ROLE)", c.MTLSCert)
	}
	if self.Site != c.Site {
		return nil, fmt.Errorf("mtls-cert %s is %s's, and this process runs at %s", c.MTLSCert, self, c.Site)
	}
	if _, err := r.Leaf().Verify(x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("mtls-cert %s does not chain to mtls-ca %s: %w", c.MTLSCert, c.MTLSCA, err)
	}
	return &mutualTLS{cert: r, cas: cas, self: self}, nil
}

// basePolicy is what every service allows: health checks to every member
// of the network (edges and ingest watch their dependencies' health), and
// reflection to operators.
var basePolicy = peerid.Policy{
	"/" + healthpb.Health_ServiceDesc.ServiceName + "/": peerid.Anyone(),
	"/grpc.reflection.v1.ServerReflection/":             peerid.Allow(peerid.Operator),
	"/grpc.reflection.v1alpha.ServerReflection/":        peerid.Allow(peerid.Operator),
}

// Authorize adds p to the roles that may call the service's gRPC methods.
// Under mutual TLS a method no policy names is refused to everyone; without
// it nothing is checked. Call it before Run, with the registrations.
func (s *Service) Authorize(p peerid.Policy) {
	if s.policy == nil {
		s.policy = peerid.Policy{}
		for k, r := range basePolicy {
			s.policy[k] = r
		}
	}
	for k, r := range p {
		s.policy[k] = r
	}
}

// Identity is the site and role this process's internal certificate names;
// false without mutual TLS.
func (s *Service) Identity() (peerid.Identity, bool) {
	if s.mtls == nil {
		return peerid.Identity{}, false
	}
	return s.mtls.self, true
}

var deniedOpts = prometheus.CounterOpts{
	Name: "shindo_grpc_calls_denied_total",
	Help: "gRPC calls refused under mutual TLS, by method and the caller's role (none: no certificate naming one).",
}

// authorize checks a call under mutual TLS; nothing without.
func (s *Service) authorize(ctx context.Context, method string) error {
	if s.mtls == nil {
		return nil
	}
	id, err := s.policy.Authorize(ctx, s.common.Site, method)
	if err != nil {
		role := id.Role
		if role == "" {
			role = "none"
		}
		s.denied.WithLabelValues(method, role).Inc()
	}
	return err
}

var deniedHTTPOpts = prometheus.CounterOpts{
	Name: "shindo_http_requests_denied_total",
	Help: "HTTP requests refused at an internal listener under mutual TLS, by listener and the caller's role (none: no certificate naming one).",
}

// checkCaller answers 403 to a request at an internal listener whose
// caller rule does not permit; the handshake already refused callers
// without a certificate of the network.
func (s *Service) checkCaller(listener string, rule peerid.Rule, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := peerid.FromTLS(r.TLS)
		if ok && rule.Permits(id, s.common.Site) {
			h.ServeHTTP(w, r)
			return
		}
		role, who := id.Role, id.String()
		if !ok {
			role, who = "none", "a caller whose certificate names no shindo identity"
		}
		s.deniedHTTP.WithLabelValues(listener, role).Inc()
		http.Error(w, fmt.Sprintf("%s may not call the %s at %s (allowed: %s)", who, listener, s.common.Site, rule), http.StatusForbidden)
	})
}

package service

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/certfile"
)

// certCheckEvery is how often certificate files are looked at for a
// replacement (SIGHUP looks at once).
const certCheckEvery = 5 * time.Second

// Certificate loads the certificate a listener of the service serves
// (WithTLS(certfile.ServerConfig(r))), and keeps it current while the
// service runs: replaced files are taken for the next handshake, every 5 s
// or on SIGHUP, and its OCSP response stapled when it names a responder.
// Its reloads, expiry and stapling are metrics.
// A pair asked for again (the same certificate for a public listener and
// the internal hops) is the same Reloader.
func (s *Service) Certificate(certFile, keyFile string) (*certfile.Reloader, error) {
	key := [2]string{certFile, keyFile}
	if r, ok := s.certs[key]; ok {
		return r, nil
	}
	r, err := certfile.Load(certFile, keyFile, s.log)
	if err != nil {
		return nil, err
	}
	s.watchCertificate(r, certFile)
	if s.certs == nil {
		s.certs = map[[2]string]*certfile.Reloader{}
	}
	s.certs[key] = r
	return r, nil
}

// watchCertificate keeps r current while the service runs, with its
// metrics.
func (s *Service) watchCertificate(r *certfile.Reloader, certFile string) {
	s.Go("certificate reload "+certFile, ComponentFunc(func(ctx context.Context) error { return r.Run(ctx, certCheckEvery) }))
	labels := prometheus.Labels{"file": certFile}
	s.metrics.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shindo_certificate_reloads_total", ConstLabels: labels,
			Help: "Times a changed certificate was swapped in."}, func() float64 { n, _ := r.Counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shindo_certificate_reload_failures_total", ConstLabels: labels,
			Help: "Times changed certificate files could not be used (the certificate in use stayed)."}, func() float64 { _, n := r.Counts(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shindo_certificate_expiry_seconds", ConstLabels: labels,
			Help: "When the certificate in use expires (Unix time)."}, func() float64 { return float64(r.Leaf().NotAfter.Unix()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shindo_certificate_ocsp_stapled", ConstLabels: labels,
			Help: "1 while the certificate in use is served with its OCSP response stapled."}, func() float64 {
			if r.Stapled() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shindo_certificate_ocsp_failures_total", ConstLabels: labels,
			Help: "OCSP fetches for the certificate that failed or did not answer good (a revoked certificate among them)."},
			func() float64 { return float64(r.StapleFailures()) }),
	)
}

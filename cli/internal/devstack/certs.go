package devstack

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"shindo.dev/devkit/pki"
	"shindo.dev/lib/atomicfile"
	"shindo.dev/lib/certfile"
)

// Validities of the dev certificates: the CA is kept across runs, so a
// browser told to trust it once goes on trusting it; the others are
// issued at every start.
const (
	devCAValidity   = 365 * 24 * time.Hour
	devCARenewBelow = 30 * 24 * time.Hour
	devCertValidity = 30 * 24 * time.Hour
)

// issueCertificates issues every certificate the plan names (-tls) from
// the dev CA in DIR/tls, made first if there is none or it expires soon.
func issueCertificates(p *plan, log *slog.Logger) error {
	dir := filepath.Dir(p.caFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey := filepath.Join(dir, "ca-key.pem")
	ca, err := pki.LoadCA(p.caFile, caKey)
	switch {
	case err == nil && time.Until(ca.Cert.NotAfter) > devCARenewBelow:
		log.Info("dev CA reused", slog.String("ca", p.caFile), slog.Time("not_after", ca.Cert.NotAfter))
	case err == nil || errors.Is(err, os.ErrNotExist):
		if ca, err = newDevCA(p.caFile, caKey); err != nil {
			return err
		}
		log.Info("dev CA made: trust it to open the edges over HTTPS", slog.String("ca", p.caFile))
	default:
		return fmt.Errorf("dev CA in %s: %w (remove the directory to make a new one)", dir, err)
	}
	for _, c := range p.certs {
		is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: c.site, Role: c.role}, Hosts: c.hosts, Validity: devCertValidity})
		if err != nil {
			return fmt.Errorf("certificate of %s %s: %w", c.site, c.role, err)
		}
		if err := certfile.Write(c.certFile, c.keyFile, is.CertPEM, is.KeyPEM); err != nil {
			return err
		}
	}
	log.Info("certificates issued", slog.Int("certificates", len(p.certs)), slog.String("dir", dir))
	return nil
}

func newDevCA(certFile, keyFile string) (*pki.CA, error) {
	ca, err := pki.NewCA("shindo dev CA", devCAValidity)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(keyFile, key, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(certFile, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

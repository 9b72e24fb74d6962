package devstack

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"shindo.dev/cli/internal/certcmd"
	"shindo.dev/devkit/pgserver"
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
		if err := os.MkdirAll(filepath.Dir(c.certFile), 0o755); err != nil {
			return err
		}
		is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: c.site, Role: c.role}, Hosts: c.hosts, Validity: devCertValidity})
		if err != nil {
			return fmt.Errorf("certificate of %s %s: %w", c.site, c.role, err)
		}
		if err := certfile.Write(c.certFile, c.keyFile, is.CertPEM, is.KeyPEM); err != nil {
			return err
		}
		files := []string{c.certFile, c.keyFile}
		if c.combined != "" {
			if err := atomicfile.Write(c.combined, append(slices.Clone(is.CertPEM), is.KeyPEM...), 0o600); err != nil {
				return err
			}
			files = append(files, c.combined)
		}
		if c.caCopy != "" {
			if err := atomicfile.Write(c.caCopy, ca.PEM, 0o644); err != nil {
				return err
			}
			files = append(files, c.caCopy)
		}
		if c.owner != nil {
			for _, f := range files {
				if err := os.Chown(f, int(c.owner.Uid), int(c.owner.Gid)); err != nil {
					return err
				}
			}
		}
	}
	log.Info("certificates issued", slog.Int("certificates", len(p.certs)), slog.String("dir", dir))
	return nil
}

// databaseTLS plans the dev database member's certificate under -tls, in
// dir (which its user can enter), and returns the files the member and
// shindo dev's own connections use: the tools' operator certificate for
// the latter.
func (p *plan) databaseTLS(dir string) (*pgserver.TLS, error) {
	as, err := pgserver.RunAs()
	if err != nil {
		return nil, err
	}
	t := &pgserver.TLS{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "postgres.pem"), ServerKey: filepath.Join(dir, "postgres-key.pem"),
		ClientCert: p.operatorCert, ClientKey: p.operatorKey}
	p.certs = append(p.certs, certPlan{site: tnn.name, role: "postgres", hosts: []string{p.host(tnn.name), "localhost"},
		certFile: t.ServerCert, keyFile: t.ServerKey, caCopy: t.CA, owner: as})
	return t, nil
}

func newDevCA(certFile, keyFile string) (*pki.CA, error) {
	return certcmd.MakeCA(certFile, keyFile, "shindo dev CA", devCAValidity)
}

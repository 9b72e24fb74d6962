package certcmd

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"shindo.dev/devkit/pki"
	"shindo.dev/lib/atomicfile"
	"shindo.dev/lib/certfile"
	"shindo.dev/sdk/trust"
)

// bootstrapConfig is `shindo cert bootstrap`: a network's certificates
// where no operator provides a CA — the compose file, a lab. It runs at
// every start (a one-shot container before the services), so it only
// issues what is missing or going stale.
type bootstrapConfig struct {
	CADir       string        `conf:"ca-dir" help:"directory of the network's CA (ca.pem, ca-key.pem), made there when there is none; keep it from the services"`
	Dir         string        `conf:"dir" help:"directory the certificates go to: one directory each, holding cert.pem, key.pem and the CA's ca.pem"`
	Issue       string        `conf:"issue" help:"the certificates, separated by white space, each NAME:SITE/ROLE:HOST,HOST… (NAME: its directory under -dir)"`
	Owner       []string      `conf:"owner" help:"NAME:UID:GID, comma-separated: whose a certificate's files are, for a server running as another user (PostgreSQL's image: 999:999)"`
	CACopy      string        `conf:"ca-copy" help:"file to copy the CA's certificate to as well: the trust bundle for clients outside (empty: none)"`
	CAValidity  time.Duration `conf:"ca-validity" default:"43800h" help:"how long a CA made here is valid"`
	Validity    time.Duration `conf:"validity" default:"2160h" help:"how long each certificate is valid (never beyond the CA)"`
	RenewWithin time.Duration `conf:"renew-within" default:"720h" help:"issue a certificate again when it expires within this long, is unreadable, is not of the CA, or names another identity or other hosts"`
}

// bootstrapEntry is one certificate of -issue.
type bootstrapEntry struct {
	name  string
	id    pki.Identity
	hosts []string
	owner *[2]int
}

var entryName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// entries parses -issue and -owner.
func (c *bootstrapConfig) entries() ([]bootstrapEntry, error) {
	var out []bootstrapEntry
	var errs []error
	seen := map[string]bool{}
	for _, f := range strings.Fields(c.Issue) {
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			errs = append(errs, fmt.Errorf("issue %q: want NAME:SITE/ROLE:HOST,HOST…", f))
			continue
		}
		site, role, _ := strings.Cut(parts[1], "/")
		e := bootstrapEntry{name: parts[0], id: pki.Identity{Site: site, Role: role}}
		if parts[2] != "" {
			e.hosts = strings.Split(parts[2], ",")
		}
		switch {
		case !entryName.MatchString(e.name):
			errs = append(errs, fmt.Errorf("issue %q: name %q: lower-case letters, digits, '.', '_' and '-'", f, e.name))
		case seen[e.name]:
			errs = append(errs, fmt.Errorf("issue: %s named twice", e.name))
		default:
			if err := e.id.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("issue %q: %w", f, err))
			}
		}
		seen[e.name] = true
		out = append(out, e)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("issue names no certificate"))
	}
	for _, o := range c.Owner {
		name, ids, ok := strings.Cut(o, ":")
		uid, gid, ok2 := strings.Cut(ids, ":")
		u, err1 := strconv.Atoi(uid)
		g, err2 := strconv.Atoi(gid)
		i := -1
		for j := range out {
			if out[j].name == name {
				i = j
			}
		}
		if !ok || !ok2 || err1 != nil || err2 != nil || u < 0 || g < 0 || i < 0 {
			errs = append(errs, fmt.Errorf("owner %q: want NAME:UID:GID of a certificate of -issue", o))
			continue
		}
		out[i].owner = &[2]int{u, g}
	}
	return out, errors.Join(errs...)
}

func (c *bootstrapConfig) Validate() error {
	var errs []error
	if c.CADir == "" || c.Dir == "" {
		errs = append(errs, errors.New("ca-dir and dir are required"))
	}
	if c.CADir != "" && filepath.Clean(c.CADir) == filepath.Clean(c.Dir) {
		errs = append(errs, errors.New("ca-dir must not be dir: the services would see the CA's key"))
	}
	if c.CAValidity < 24*time.Hour || c.Validity < time.Hour || c.RenewWithin < 0 || c.RenewWithin >= c.Validity {
		errs = append(errs, errors.New("ca-validity at least 24h, validity at least 1h, renew-within between 0 and validity"))
	}
	_, err := c.entries()
	return errors.Join(append(errs, err)...)
}

// bootstrap makes the CA if there is none and issues every certificate of
// cfg that is missing or going stale; it says what it did with each.
func bootstrap(cfg bootstrapConfig, stdout io.Writer, now time.Time) error {
	entries, err := cfg.entries()
	if err != nil {
		return err
	}
	ca, err := loadOrMakeCA(cfg, stdout, now)
	if err != nil {
		return err
	}
	cas := x509.NewCertPool()
	cas.AddCert(ca.Cert)
	if cfg.CACopy != "" {
		if err := atomicfile.Write(cfg.CACopy, ca.PEM, 0o644); err != nil {
			return err
		}
	}
	issued := 0
	for _, e := range entries {
		dir := filepath.Join(cfg.Dir, e.name)
		cert, key, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		why, keep := current(cert, e.id, e.hosts, cas, cfg.RenewWithin, now)
		if !keep {
			is, err := ca.Issue(pki.Request{Identity: e.id, Hosts: e.hosts, Validity: cfg.Validity})
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			if err := certfile.Write(cert, key, is.CertPEM, is.KeyPEM); err != nil {
				return err
			}
			issued++
			fmt.Fprintf(stdout, "issued %s for %s (%s), valid until %s, pin %s: %s\n", dir, e.id, strings.Join(e.hosts, ","),
				is.Cert.NotAfter.UTC().Format(time.RFC3339), trust.Pin(is.Cert), why)
		} else {
			fmt.Fprintf(stdout, "kept %s: %s\n", dir, why)
		}
		// The CA's certificate beside each, and the owner, every time: a
		// CA made again, or an owner changed, reaches every directory.
		if err := atomicfile.Write(caFile, ca.PEM, 0o644); err != nil {
			return err
		}
		if e.owner != nil {
			for _, f := range []string{dir, cert, key, caFile} {
				if err := os.Chown(f, e.owner[0], e.owner[1]); err != nil {
					return fmt.Errorf("%s: %w", e.name, err)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "%d certificates issued, %d kept, in %s\n", issued, len(entries)-issued, cfg.Dir)
	return nil
}

// loadOrMakeCA reads the CA in cfg.CADir, or makes one when the directory
// has none. A CA that expires within cfg.RenewWithin is not replaced here:
// every client trusting it would have to be told, so the operator decides.
func loadOrMakeCA(cfg bootstrapConfig, stdout io.Writer, now time.Time) (*pki.CA, error) {
	certFile, keyFile := filepath.Join(cfg.CADir, "ca.pem"), filepath.Join(cfg.CADir, "ca-key.pem")
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if errors.Is(certErr, os.ErrNotExist) != errors.Is(keyErr, os.ErrNotExist) {
		return nil, fmt.Errorf("%s holds half a CA (ca.pem and ca-key.pem go together): restore the other, or move the directory away", cfg.CADir)
	}
	ca, err := pki.LoadCA(certFile, keyFile)
	switch {
	case err == nil:
		if left := ca.Cert.NotAfter.Sub(now); left <= cfg.RenewWithin {
			return nil, fmt.Errorf("the CA in %s expires %s: move the directory away to make a new one, and have every client trust the new ca.pem",
				cfg.CADir, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return ca, nil
	case errors.Is(certErr, os.ErrNotExist):
		if err := os.MkdirAll(cfg.CADir, 0o700); err != nil {
			return nil, err
		}
		ca, err := MakeCA(certFile, keyFile, "shindo network CA", cfg.CAValidity)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "made a CA in %s, valid until %s: clients trust its ca.pem\n", cfg.CADir, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
		return ca, nil
	default:
		return nil, fmt.Errorf("the CA in %s: %w", cfg.CADir, err)
	}
}

// MakeCA makes a CA named name and writes its certificate and its key
// (owner-only), the key first.
func MakeCA(certFile, keyFile, name string, validity time.Duration) (*pki.CA, error) {
	ca, err := pki.NewCA(name, validity)
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

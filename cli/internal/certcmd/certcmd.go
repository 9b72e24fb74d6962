// Package certcmd implements `shindo cert`: certificates for a production
// network from a CA its operator provides. `issue` writes a service's
// certificate and key naming its site and role (replacing both files
// whole, so a running service picks them up at its next look or SIGHUP),
// or with -renew-within only when the one there expires within that long,
// for a daily timer; `bootstrap` makes a CA where the operator has none
// (the compose file) and issues a whole network's certificates from it,
// again only what is missing or going stale; `show` tells what a
// certificate is for, until when, and the pin a station may trust it by.
package certcmd

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"shindo.dev/devkit/pki"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/service"
	"shindo.dev/sdk/trust"
)

const name = "shindo cert"

type issueConfig struct {
	CACert      string        `conf:"ca-cert" help:"the operator's CA certificate (PEM)"`
	CAKey       string        `conf:"ca-key" help:"file of the CA's private key (PEM: PKCS #8, PKCS #1 or SEC 1)"`
	Site        string        `conf:"site" help:"site of the service the certificate is for (TNN-1, TPE-1, …)"`
	Role        string        `conf:"role" help:"its role (edge, ingest, rts, waveform, dataapi, …)"`
	Hosts       []string      `conf:"host" help:"DNS names and IP addresses it serves at, comma-separated"`
	Cert        string        `conf:"cert" help:"certificate file to write (PEM)"`
	Key         string        `conf:"key" help:"key file to write (PEM, owner-only)"`
	Validity    time.Duration `conf:"validity" default:"2160h" help:"how long the certificate is valid (never beyond the CA)"`
	KeyType     string        `conf:"key-type" default:"ecdsa-p256" help:"key of the certificate: ecdsa-p256 or rsa-2048"`
	RenewWithin time.Duration `conf:"renew-within" default:"0s" help:"issue only when the certificate at -cert expires within this long, is unreadable, or names another identity or other hosts (0: always)"`
}

func (c *issueConfig) Validate() error {
	var errs []error
	for flag, v := range map[string]string{"ca-cert": c.CACert, "ca-key": c.CAKey, "cert": c.Cert, "key": c.Key} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", flag))
		}
	}
	if err := (pki.Identity{Site: c.Site, Role: c.Role}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Validity < time.Hour || c.RenewWithin < 0 || c.RenewWithin >= c.Validity {
		errs = append(errs, errors.New("validity must be at least 1h, renew-within between 0 and validity"))
	}
	if c.KeyType != string(pki.ECDSAP256) && c.KeyType != string(pki.RSA2048) {
		errs = append(errs, fmt.Errorf("key-type %q: want ecdsa-p256 or rsa-2048", c.KeyType))
	}
	return errors.Join(errs...)
}

// Main runs the command with args (after "cert"): 0, 1 when it failed, 2
// for bad flags.
func Main(_ context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "usage: shindo cert issue [flags] | shindo cert bootstrap [flags] | shindo cert show FILE…"
	if len(args) == 0 || (args[0] != "issue" && args[0] != "show" && args[0] != "bootstrap") {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if args[0] == "bootstrap" {
		var cfg bootstrapConfig
		if err := conf.Load(&cfg, "CERT", args[1:], conf.Options{Name: name + " bootstrap", Help: stdout}); err != nil {
			return service.ExitCode(stderr, name, err)
		}
		return service.ExitCode(stderr, name, bootstrap(cfg, stdout, time.Now()))
	}
	if args[0] == "show" {
		if len(args) < 2 {
			fmt.Fprintln(stderr, "usage: shindo cert show FILE…")
			return 2
		}
		return service.ExitCode(stderr, name, show(args[1:], stdout))
	}
	var cfg issueConfig
	if err := conf.Load(&cfg, "CERT", args[1:], conf.Options{Name: name + " issue", Help: stdout}); err != nil {
		return service.ExitCode(stderr, name, err)
	}
	return service.ExitCode(stderr, name, issue(cfg, stdout, time.Now()))
}

func issue(cfg issueConfig, stdout io.Writer, now time.Time) error {
	id := pki.Identity{Site: cfg.Site, Role: cfg.Role}
	if cfg.RenewWithin > 0 {
		cas, err := certfile.LoadPool(cfg.CACert)
		if err != nil {
			return fmt.Errorf("ca-cert: %w", err)
		}
		why, keep := current(cfg.Cert, id, cfg.Hosts, cas, cfg.RenewWithin, now)
		if keep {
			fmt.Fprintf(stdout, "kept %s: %s\n", cfg.Cert, why)
			return nil
		}
		fmt.Fprintf(stdout, "renewing %s: %s\n", cfg.Cert, why)
	}
	ca, err := pki.LoadCA(cfg.CACert, cfg.CAKey)
	if err != nil {
		return err
	}
	is, err := ca.Issue(pki.Request{Identity: id, Hosts: cfg.Hosts, Validity: cfg.Validity, Key: pki.KeyType(cfg.KeyType)})
	if err != nil {
		return err
	}
	if err := certfile.Write(cfg.Cert, cfg.Key, is.CertPEM, is.KeyPEM); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "issued %s for %s (%s), valid until %s; key in %s; pin %s\n", cfg.Cert, id, strings.Join(cfg.Hosts, ","),
		is.Cert.NotAfter.UTC().Format(time.RFC3339), cfg.Key, trust.Pin(is.Cert))
	fmt.Fprintln(stdout, "the service takes it at its next look (5 s) or on SIGHUP")
	return nil
}

// current tells whether the certificate at file may stay, and why: it
// names id and exactly hosts, chains to cas, and expires later than
// renewWithin from now.
func current(file string, id pki.Identity, hosts []string, cas *x509.CertPool, renewWithin time.Duration, now time.Time) (string, bool) {
	cert, err := readCert(file)
	if err != nil {
		return err.Error(), false
	}
	if got, ok := peerid.Of(cert); !ok || got != (peerid.Identity{Site: id.Site, Role: id.Role}) {
		return fmt.Sprintf("it names %v, not %s", got, id), false
	}
	have := hostsOf(cert)
	want := slices.Clone(hosts)
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		return fmt.Sprintf("it is for %s, not %s", strings.Join(have, ","), strings.Join(want, ",")), false
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: cas, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Sprintf("it is not of the CA: %v", err), false
	}
	left := cert.NotAfter.Sub(now)
	if left <= renewWithin {
		return fmt.Sprintf("it expires %s, within %s", cert.NotAfter.UTC().Format(time.RFC3339), renewWithin), false
	}
	return fmt.Sprintf("valid until %s, more than %s", cert.NotAfter.UTC().Format(time.RFC3339), renewWithin), true
}

// hostsOf are the names and addresses cert is for.
func hostsOf(cert *x509.Certificate) []string {
	hosts := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

func readCert(file string) (*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", file)
	}
	return x509.ParseCertificate(block.Bytes)
}

func show(files []string, stdout io.Writer) error {
	var errs []error
	for _, f := range files {
		cert, err := readCert(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id, ok := peerid.Of(cert)
		who := id.String()
		if !ok {
			who = "no shindo identity"
		}
		hosts := hostsOf(cert)
		fmt.Fprintf(stdout, "%s\n  for:     %s\n  hosts:   %s\n  issuer:  %s\n  valid:   %s to %s\n  pin:     %s\n", f, who,
			strings.Join(hosts, ","), cert.Issuer, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), trust.Pin(cert))
	}
	return errors.Join(errs...)
}

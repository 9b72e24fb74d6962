// Package certfile keeps a TLS certificate read from files current: the
// files are looked at every few seconds and on SIGHUP, and a changed pair
// is swapped in for the next handshake. Connections already open keep the
// certificate they were made with, so a rotation drops none.
package certfile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shindo.dev/lib/atomicfile"
)

// Reloader holds the certificate of a pair of files. It is safe for
// concurrent use.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu   sync.Mutex // serialises reloads
	seen [2]stamp   // of the files when last loaded

	reloads, failures atomic.Int64

	ocspClient     *http.Client
	stapling       stapleState // guarded by mu
	stapleFailures atomic.Int64
}

// stamp tells a file's versions apart: a rename over it changes the inode.
type stamp struct {
	mod   time.Time
	size  int64
	inode uint64
}

func stampOf(name string) (stamp, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return stamp{}, err
	}
	s := stamp{mod: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s, nil
}

// Load reads the certificate (PEM, the leaf first, then any
// intermediates) and its key.
func Load(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, ocspClient: &http.Client{Timeout: ocspTimeout}}
	if _, err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the files if they changed since they were last loaded and
// reports whether a new certificate is in use. On an error the one in
// use stays.
func (r *Reloader) load() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, err := stampOf(r.certFile)
	if err != nil {
		return false, err
	}
	ks, err := stampOf(r.keyFile)
	if err != nil {
		return false, err
	}
	if r.cur.Load() != nil && r.seen == [2]stamp{cs, ks} {
		return false, nil
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Often the two files caught between their replacements: the next
		// look finds them matched.
		return false, fmt.Errorf("certificate %s, key %s: %w", r.certFile, r.keyFile, err)
	}
	now := time.Now()
	if leaf := pair.Leaf; leaf != nil && (now.Before(leaf.NotBefore) || now.After(leaf.NotAfter)) {
		return false, fmt.Errorf("certificate %s is valid from %s to %s, not now", r.certFile, leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	r.seen = [2]stamp{cs, ks}
	r.cur.Store(&pair)
	return true, nil
}

// Reload reads the files now if they changed.
func (r *Reloader) Reload() error {
	changed, err := r.load()
	if err != nil {
		r.failures.Add(1)
		return err
	}
	if changed {
		r.reloads.Add(1)
		leaf := r.Leaf()
		r.log.Info("certificate loaded", slog.String("file", r.certFile), slog.String("subject", leaf.Subject.String()),
			slog.Time("not_after", leaf.NotAfter))
	}
	return nil
}

// Run looks at the files every interval and on SIGHUP until ctx ends, and
// keeps the certificate's OCSP response stapled when it names a responder.
func (r *Reloader) Run(ctx context.Context, every time.Duration) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(every)
	defer t.Stop()
	r.staple(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
		case <-t.C:
		}
		if err := r.Reload(); err != nil {
			r.log.WarnContext(ctx, "certificate not reloaded, the one in use stays", slog.Any("err", err))
		}
		r.staple(ctx)
	}
}

// Counts are the reloads that swapped in a certificate and those that
// failed.
func (r *Reloader) Counts() (reloads, failures int64) { return r.reloads.Load(), r.failures.Load() }

// Leaf is the parsed leaf of the certificate in use.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().Leaf }

// GetCertificate is for tls.Config: each handshake takes the certificate
// in use at its start.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// Write replaces a certificate's files: the key (owner-only) first, then
// the certificate, each whole. A Reloader looking between the two finds
// them unmatched and keeps the pair it has until the next look.
func Write(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certFile, certPEM, 0o644)
}

// ServerConfig is the configuration of a public TLS listener serving r's
// certificate: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 by ALPN.
func ServerConfig(r *Reloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// GetClientCertificate is for tls.Config on the calling side: each
// handshake presents the certificate in use at its start.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// LoadPool reads the CA certificates (PEM) that the network's internal
// certificates chain to.
func LoadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// MutualServerConfig is the configuration of an internal listener: TLS 1.3
// only (both ends are ours), r's certificate served, and a certificate
// chaining to cas required of every caller.
func MutualServerConfig(r *Reloader, cas *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: r.GetCertificate,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      cas,
	}
}

// MutualClientConfig is the calling side's: r's certificate presented, the
// server's verified against cas (and its name, which the caller sets from
// the address it dials).
func MutualClientConfig(r *Reloader, cas *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: r.GetClientCertificate,
		RootCAs:              cas,
	}
}

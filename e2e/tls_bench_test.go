package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
)

// handshakeSeconds is how long each server is loaded with handshakes.
const handshakeSeconds = 10

// BenchmarkTLSHandshakes measures full TLS 1.3 handshakes per second on
// one core: an edge (shindo-edge, GOMAXPROCS=1, pinned to CPU 1) beside
// HAProxy (Debian's, one thread, pinned to CPU 1) terminating the same
// certificate, ECDSA P-256 and RSA-2048, loaded from this process pinned
// to CPU 0 by 64 clients that keep no session (no resumption: every
// handshake full) and offer X25519 only (what both servers share).
// docs/BENCHMARKS.md records it; it needs two CPUs and haproxy.
func BenchmarkTLSHandshakes(b *testing.B) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		b.Skip("no haproxy: apt-get install haproxy")
	}
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		b.Skipf("cannot pin to CPU 0: %v", err)
	}
	defer func() {
		var all unix.CPUSet
		for i := range 64 {
			all.Set(i)
		}
		unix.SchedSetaffinity(0, &all)
	}()
	ca, err := pki.NewCA("bench CA", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048} {
		is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TPE-1", Role: "edge"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour, Key: kt})
		if err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		cert, key := filepath.Join(dir, "edge.pem"), filepath.Join(dir, "edge-key.pem")
		if err := certfile.Write(cert, key, is.CertPEM, is.KeyPEM); err != nil {
			b.Fatal(err)
		}
		for _, server := range []string{"haproxy", "edge"} {
			b.Run(fmt.Sprintf("key=%s/server=%s", kt, server), func(b *testing.B) {
				var addr string
				if server == "edge" {
					addr = startPinnedEdge(b, cert, key)
				} else {
					addr = startPinnedHAProxy(b, dir, is)
				}
				for b.Loop() {
					n, failed := handshakes(addr, roots, handshakeSeconds*time.Second)
					b.ReportMetric(float64(n)/handshakeSeconds, "handshakes/s")
					b.ReportMetric(float64(failed), "failed")
				}
			})
		}
	}
}

// handshakes completes as many full TLS 1.3 handshakes with addr as 64
// clients can in d, and counts those that failed (logging the first).
func handshakes(addr string, roots *x509.CertPool, d time.Duration) (done, failed int64) {
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.X25519}, ServerName: "127.0.0.1"}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var ok, bad atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			dialer := tls.Dialer{Config: cfg}
			for ctx.Err() == nil {
				c, err := dialer.DialContext(ctx, "tcp", addr)
				if err != nil {
					if ctx.Err() == nil {
						bad.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				ok.Add(1)
				c.Close()
			}
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "%s: %d handshakes failed, the first: %v\n", addr, bad.Load(), e)
	}
	return ok.Load(), bad.Load()
}

// startPinnedEdge runs shindo-edge serving HTTPS with cert on one core
// (CPU 1), its cores unreachable (handshakes need none).
func startPinnedEdge(b *testing.B, cert, key string) string {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	cmd := exec.Command("taskset", "-c", "1", filepath.Join(binDir(b), "shindo-edge"), "-site", "TPE-1",
		"-rts", fmt.Sprintf("127.0.0.1:%d", freePort(b)), "-http-addr", addr, "-tls-cert", cert, "-tls-key", key,
		"-grpc-addr", fmt.Sprintf("127.0.0.1:%d", freePort(b)), "-admin-addr", fmt.Sprintf("127.0.0.1:%d", freePort(b)),
		"-log-level", "error", "-max-conns-per-ip", "0")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	waitListening(b, addr)
	return addr
}

// startPinnedHAProxy runs HAProxy terminating TLS with the same
// certificate on one thread on CPU 1, answering every request itself.
func startPinnedHAProxy(b *testing.B, dir string, is *pki.Issued) string {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	pemFile := filepath.Join(dir, "haproxy.pem") // certificate and key in one file, as HAProxy reads them
	if err := os.WriteFile(pemFile, append(append([]byte{}, is.CertPEM...), is.KeyPEM...), 0o600); err != nil {
		b.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "haproxy.cfg")
	cfg := fmt.Sprintf(`global
  nbthread 1
  maxconn 4000
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend tls
  bind %s ssl crt %s alpn h2,http/1.1 backlog 4096
  http-request return status 200
`, addr, pemFile)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", "1", "haproxy", "-db", "-f", cfgFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(b, addr)
	return addr
}

func waitListening(b *testing.B, addr string) {
	b.Helper()
	poll.UntilNil(b, 30*time.Second, addr+" listening", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

package etcdcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
)

// TestCompactionAndQuota: a member compacts its history on its own, and
// one whose store reaches the quota raises NOSPACE, refuses writes and
// says so on /metrics (shindo_etcd_alarm), where an operator's alerting
// looks.
func TestCompactionAndQuota(t *testing.T) {
	client := "http://" + freeaddr.TCP(t)
	cfg := config{Name: "TNN-1", DataDir: t.TempDir(), ClientURL: client, PeerURL: "http://" + freeaddr.TCP(t),
		ClusterState: "new", Token: "test", StartTimeout: 30 * time.Second,
		Compaction: time.Second, QuotaBytes: 8 << 20}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	alarm := func() string {
		resp, err := http.Get(client + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, `shindo_etcd_alarm{alarm="NOSPACE"}`) {
				return strings.TrimSpace(line)
			}
		}
		return "no shindo_etcd_alarm on /metrics"
	}
	waitFor := func(what string, ok func() bool) { t.Helper(); poll.Until(t, 30*time.Second, what, ok) }
	opCtx, opCancel := context.WithTimeout(ctx, 60*time.Second)
	defer opCancel()
	var first int64
	waitFor("the member to serve", func() bool {
		r, err := cli.Put(opCtx, "k", "v0")
		if err == nil {
			first = r.Header.Revision
		}
		return err == nil
	})
	if got := alarm(); got != `shindo_etcd_alarm{alarm="NOSPACE"} 0` {
		t.Fatalf("before: %s", got)
	}
	for i := range 5 {
		if _, err := cli.Put(opCtx, "k", fmt.Sprint("v", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the first revision to be compacted", func() bool {
		_, err := cli.Get(opCtx, "k", clientv3.WithRev(first))
		return errors.Is(err, rpctypes.ErrCompacted)
	})

	big := strings.Repeat("x", 1<<20)
	var err2 error
	for i := 0; i < 64 && err2 == nil; i++ {
		_, err2 = cli.Put(opCtx, fmt.Sprint("big/", i), big)
	}
	if !errors.Is(err2, rpctypes.ErrNoSpace) {
		t.Fatalf("filling past the 8 MiB quota: %v, want %v", err2, rpctypes.ErrNoSpace)
	}
	if got := alarm(); got != `shindo_etcd_alarm{alarm="NOSPACE"} 1` {
		t.Fatalf("after: %s", got)
	}
}

// TestDeployMatches: the etcd members of deploy/ha (Debian's etcd-server)
// compact and cap their store as `shindo etcd` does by default.
func TestDeployMatches(t *testing.T) {
	t.Parallel()
	defaults := map[string]string{}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(config{})) {
		defaults[f.Tag.Get("conf")] = f.Tag.Get("default")
	}
	retention, err := time.ParseDuration(defaults["auto-compaction"])
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../../deploy/ha/etcd-*.env")
	if len(files) != 3 {
		t.Fatalf("deploy/ha has %d etcd members, want 3", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
				env[k] = v
			}
		}
		got, err := time.ParseDuration(env["ETCD_AUTO_COMPACTION_RETENTION"])
		if env["ETCD_AUTO_COMPACTION_MODE"] != "periodic" || err != nil || got != retention {
			t.Errorf("%s: compaction %q every %q, want periodic every %s", f, env["ETCD_AUTO_COMPACTION_MODE"], env["ETCD_AUTO_COMPACTION_RETENTION"], retention)
		}
		if env["ETCD_QUOTA_BACKEND_BYTES"] != defaults["quota-bytes"] {
			t.Errorf("%s: quota %q, want %s", f, env["ETCD_QUOTA_BACKEND_BYTES"], defaults["quota-bytes"])
		}
	}
}

// TestMutualTLS: under -tls-cert the member serves clients over TLS only,
// to a certificate of the CA; a client without one gets nothing, and the
// plain metrics URL answers /health for probes that hold none.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	issue := func(site, role string) (string, string) {
		c, k, err := ca.IssueFiles(dir, site, role, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	caFile := filepath.Join(dir, "ca.pem")
	client, metrics := "https://"+freeaddr.TCP(t), "http://"+freeaddr.TCP(t)
	cfg := config{Name: "TNN-1", DataDir: t.TempDir(), ClientURL: client, PeerURL: "https://" + freeaddr.TCP(t),
		ClusterState: "new", Token: "test", StartTimeout: 30 * time.Second, Compaction: time.Hour, QuotaBytes: 8 << 20,
		TLSCA: caFile, MetricsURL: metrics}
	cfg.TLSCert, cfg.TLSKey = issue("TNN-1", "etcd")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	plain := cfg
	plain.ClientURL = "http://" + freeaddr.TCP(t)
	if err := plain.Validate(); err == nil {
		t.Error("an http:// client URL was accepted under TLS")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	poll.Until(t, 30*time.Second, "the member healthy on the plain metrics URL", func() bool {
		resp, err := http.Get(metrics + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(tlsConfig *tls.Config) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 3 * time.Second, TLS: tlsConfig})
		if err != nil {
			return err
		}
		defer cli.Close()
		octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
		defer ocancel()
		_, err = cli.Put(octx, "k", "v")
		return err
	}
	cert, key := issue("TPE-1", "edge")
	r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(certfile.MutualClientConfig(r, pool)); err != nil {
		t.Errorf("an edge's certificate: %v", err)
	}
	if err := dial(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}); err == nil {
		t.Error("a client without a certificate wrote")
	}
}

package natscmd

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/peerid"
)

// TestMutualTLS: under -tls-cert the server admits only clients with a
// certificate of the CA naming a role that uses NATS, and each may do
// what its role may: an edge can post notifications but not publish a
// core's snapshots, the other core's ingest can ask for the sync but not
// answer it, nobody but an operator can delete a stream.
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
	cfg := config{Site: "TNN-1", Addr: freeaddr.TCP(t), HTTPAddr: freeaddr.TCP(t), StoreDir: t.TempDir(), LogFormat: "json", LogLevel: "error", TLSCA: caFile}
	cfg.TLSCert, cfg.TLSKey = issue("TNN-1", "nats")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	pool, err := certfile.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + cfg.Addr

	// violations collects the server's permission errors of one connection.
	type client struct {
		nc         *nats.Conn
		mu         sync.Mutex
		violations []string
	}
	connect := func(site, role string) (*client, error) {
		c := &client{}
		cert, key := issue(site, role)
		r, err := certfile.Load(cert, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var nc *nats.Conn
		poll.Within(10*time.Second, func() bool { // until the server listens
			nc, err = nats.Connect(url, nats.Secure(certfile.MutualClientConfig(r, pool)), nats.MaxReconnects(0),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
					c.mu.Lock()
					c.violations = append(c.violations, err.Error())
					c.mu.Unlock()
				}))
			return err == nil || !errors.Is(err, nats.ErrNoServers)
		})
		if err != nil {
			return nil, err
		}
		t.Cleanup(nc.Close)
		c.nc = nc
		return c, nil
	}
	violated := func(c *client, what string) bool {
		t.Helper()
		c.nc.Flush()
		return poll.Within(2*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, v := range c.violations {
				if strings.Contains(strings.ToLower(v), "permissions violation") && strings.Contains(v, what) {
					return true
				}
			}
			return false
		})
	}

	op, err := connect("dev", peerid.Operator)
	if err != nil {
		t.Fatal(err)
	}
	data, err := connect("TNN-1", peerid.DataAPI)
	if err != nil {
		t.Fatal(err)
	}
	snap := natsbus.Snapshots.Subject("TNN-1")
	got, err := data.nc.SubscribeSync(snap)
	if err != nil {
		t.Fatal(err)
	}
	data.nc.Flush()
	rts, err := connect("TNN-1", peerid.RTS)
	if err != nil {
		t.Fatal(err)
	}
	rts.nc.Publish(snap, []byte("tick"))
	if m, err := got.NextMsg(2 * time.Second); err != nil || string(m.Data) != "tick" {
		t.Fatalf("the core's RTS publishing its snapshot: %v", err)
	}

	edge, err := connect("TPE-1", peerid.Edge)
	if err != nil {
		t.Fatal(err)
	}
	edge.nc.Publish(snap, []byte("forged"))
	if !violated(edge, snap) {
		t.Error("an edge published a core's snapshot")
	}
	if m, err := got.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("the forged snapshot was delivered: %q", m.Data)
	}
	peerIngest, err := connect("TYO-1", peerid.Ingest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peerIngest.nc.SubscribeSync(natsbus.Sync.Subject("TNN-1")); err == nil && !violated(peerIngest, natsbus.Sync.Subject("TNN-1")) {
		t.Error("the other core's ingest subscribed to answer this core's sync")
	}
	ownIngest, err := connect("TNN-1", peerid.Ingest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ownIngest.nc.SubscribeSync(natsbus.Sync.Subject("TNN-1")); err != nil || violated(ownIngest, "sync") {
		t.Errorf("the core's own ingest could not serve its sync: %v", err)
	}

	// Streams: an operator makes one, an edge may not delete it.
	jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
	defer jcancel()
	opJS, _ := jetstream.New(op.nc)
	if _, err := opJS.CreateStream(jctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	edgeJS, _ := jetstream.New(edge.nc)
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if err := edgeJS.DeleteStream(dctx, "T"); err == nil {
		t.Error("an edge deleted a stream")
	}
	if _, err := opJS.Stream(jctx, "T"); err != nil {
		t.Errorf("the stream is gone: %v", err)
	}

	// No certificate, or a role that uses no NATS: no connection.
	if nc, err := nats.Connect(url, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client without a certificate connected")
	}
	if _, err := connect("TNN-1", "station"); err == nil {
		t.Error("a station's certificate connected")
	}
}

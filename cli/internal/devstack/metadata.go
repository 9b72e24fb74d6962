package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/lib/pgserver"
	"shindo.dev/lib/registry"
)

// dbName is the metadata database of the dev topology; it is made afresh at
// every start, so each run provisions its own stations and keys.
const dbName = "shindo"

// metadata is the dev topology's PostgreSQL member.
type metadata struct {
	*pgserver.Server
	scratch string // a directory to remove at stop, if any
}

// stop shuts the member down and removes a scratch data directory.
func (m *metadata) stop() {
	m.Stop()
	if m.scratch != "" {
		os.RemoveAll(m.scratch)
	}
}

// startMetadata starts TNN-1's PostgreSQL member (data kept under dir, so a
// second start is quick) and recreates the metadata database.
func startMetadata(ctx context.Context, cfg Config, port int, log *slog.Logger) (*metadata, string, error) {
	base, scratch, err := pgBase(cfg.Dir)
	if err != nil {
		return nil, "", err
	}
	if scratch {
		log.Info("metadata database kept outside the dev directory, which the postgres user cannot enter; removed at stop", slog.String("dir", base))
	}
	m := &metadata{}
	if scratch {
		m.scratch = filepath.Dir(base)
	}
	base = filepath.Join(base, tnn.name)
	srv, err := pgserver.Start(ctx, pgserver.Options{
		DataDir: filepath.Join(base, "data"),
		Port:    port,
		Listen:  cfg.Host,
		LogPath: filepath.Join(cfg.Dir, "logs", tnn.name+"-postgres.log"),
		Durable: true,
	})
	if err != nil {
		if m.scratch != "" {
			os.RemoveAll(m.scratch)
		}
		return nil, "", fmt.Errorf("metadata database: %w", err)
	}
	m.Server = srv
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		m.stop()
		return nil, "", fmt.Errorf("metadata database: %w", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := conn.Exec(ctx, q); err != nil {
			m.stop()
			return nil, "", fmt.Errorf("metadata database: %s: %w", q, err)
		}
	}
	return m, srv.DatabaseDSN(dbName), nil
}

// pgBase is where the PostgreSQL members keep their data: <dir>/pg, unless
// shindo dev runs as root in a directory the postgres user (which the
// server runs as) cannot enter, such as one under /root; then a scratch
// directory under the system's temporary directory, removed at stop.
func pgBase(dir string) (base string, scratch bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if os.Geteuid() != 0 || traversable(abs) {
		return filepath.Join(abs, "pg"), false, nil
	}
	tmp, err := os.MkdirTemp("", "shindo-dev-")
	if err != nil {
		return "", false, fmt.Errorf("metadata database directory: %w", err)
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return "", false, fmt.Errorf("metadata database directory: %w", err)
	}
	return filepath.Join(tmp, "pg"), true, nil
}

// traversable reports whether every existing ancestor of path lets others
// pass through.
func traversable(path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if parent := filepath.Dir(p); parent == p {
			return true
		}
	}
}

// newToken returns a random admin token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// provisionAll creates the stations through the data API, as an operator
// would, and returns them with the keys the API issued. Progress is logged
// for large fleets.
func provisionAll(ctx context.Context, dataAPI, token string, stations []*registry.Station, log *slog.Logger) error {
	client := &http.Client{Timeout: 10 * time.Second}
	var done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	work := make(chan *registry.Station)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for st := range work {
				if err := createStation(ctx, client, dataAPI, token, st); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				if n := done.Add(1); n%2000 == 0 {
					log.Info("provisioning stations", slog.Int64("done", n), slog.Int("of", len(stations)))
				}
			}
		})
	}
	for _, st := range stations {
		select {
		case work <- st:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func createStation(ctx context.Context, client *http.Client, dataAPI, token string, st *registry.Station) error {
	body, _ := json.Marshal(map[string]any{"id": st.ID, "name": st.Name, "net": st.Net, "lat": st.Lat, "lon": st.Lon, "code": st.Code})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dataAPI+"/v1/stations", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("provision station %s: %w", st.ID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("provision station %s: %s: %s", st.ID, resp.Status, bytes.TrimSpace(b))
	}
	var out struct {
		Key struct {
			KeyID  uint32 `json:"key_id"`
			KeyHex string `json:"key_hex"`
		} `json:"key"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Key.KeyHex == "" {
		return errors.New("provision station " + st.ID + ": no key in the answer")
	}
	st.KeyID, st.KeyHex = out.Key.KeyID, out.Key.KeyHex
	return nil
}

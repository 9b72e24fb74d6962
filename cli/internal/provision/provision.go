// Package provision creates stations through a core's data API, as an
// operator does: it spreads a fleet over Taiwan's townships, posts each
// station to the admin API and collects the keys the API issues, in the
// registry format the station agent and the fleet simulator read. shindo
// dev provisions its fleet with it, and so does `shindo provision`.
package provision

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"shindo.dev/lib/registry"
	"shindo.dev/lib/township"
	"shindo.dev/sdk/trust"
)

// Fleet lays out n stations over Taiwan's townships (IDs <prefix>00001…),
// with no keys yet. Their SEED codes are left to the registry, which gives
// each a free one by seedcode.Station's rule (SIM00001: SH.00001.00) —
// codes chosen here would collide with another prefix's fleet.
func Fleet(prefix string, n int) []*registry.Station {
	towns := township.Sample()
	out := make([]*registry.Station, n)
	for i := range n {
		t := towns[i%len(towns)]
		// Stations sharing a township are spread on a small spiral around
		// its seat (about 2 km apart), deterministic by index.
		round := i / len(towns)
		angle := float64(round) * 2.4
		r := 0.02 * math.Sqrt(float64(round))
		out[i] = &registry.Station{
			ID:   fmt.Sprintf("%s%05d", prefix, i+1),
			Name: fmt.Sprintf("%s %d", t.Name, round+1),
			Net:  prefix,
			Lat:  math.Round((t.Lat+r*math.Sin(angle))*1e4) / 1e4,
			Lon:  math.Round((t.Lon+r*math.Cos(angle))*1e4) / 1e4,
			Code: t.Code,
		}
	}
	return out
}

// ClientTLS is the TLS configuration of a tool calling a data API: the CAs
// of caFile trusted (none: the system's), and certFile presented when
// given, as a data API under mutual TLS requires.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg, err := trust.ClientConfig(caFile, "")
	if err != nil {
		return nil, fmt.Errorf("ca-file: %w", err)
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// All creates the stations through the data API at dataAPI (its base URL)
// with the admin token, over TLS with tlsCfg for https:// (nil: the
// system's defaults), and fills in the keys the API issued. Progress is
// logged for large fleets.
func All(ctx context.Context, dataAPI, token string, tlsCfg *tls.Config, stations []*registry.Station, log *slog.Logger) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
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
	body, _ := json.Marshal(map[string]any{"id": st.ID, "name": st.Name, "net": st.Net, "lat": st.Lat, "lon": st.Lon, "code": st.Code,
		"network_code": st.SEED.Network, "station_code": st.SEED.Station, "location_code": st.SEED.Location})
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

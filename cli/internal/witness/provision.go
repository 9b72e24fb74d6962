package witness

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"shindo.dev/cli/internal/provision"
	"shindo.dev/lib/registry"
)

// errRetry marks an answer worth asking again (a 5xx, a 429, no answer).
var errRetry = errors.New("retryable")

// provisionStations creates the witness's stations through the data API,
// laid out as provision.Fleet lays out a fleet, and returns them with
// their keys. A station left by an earlier run (the same prefix on the
// same deployment) is taken over: its seq counter is recorded as reset
// (this run's seqs start from the clock, which may lie past ingest's jump
// bound above the last run's) and its key rotated with no overlap, so the
// witness holds the only valid key.
func provisionStations(ctx context.Context, cfg Config) ([]*registry.Station, error) {
	stations := provision.Fleet(cfg.Prefix, cfg.Stations)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.TLS
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	for _, st := range stations {
		body := map[string]any{"id": st.ID, "name": "witness " + st.Name, "net": st.Net, "lat": st.Lat, "lon": st.Lon, "code": st.Code}
		code, b, err := post(ctx, client, cfg, "/v1/stations", body)
		if err == nil && code == http.StatusConflict {
			cfg.Log.Info("witness station exists, taking it over", slog.String("station", st.ID))
			code, b, err = post(ctx, client, cfg, "/v1/stations/"+url.PathEscape(st.ID)+":resetSeq", map[string]any{})
			if err == nil && code == http.StatusOK {
				code, b, err = post(ctx, client, cfg, "/v1/stations/"+url.PathEscape(st.ID)+":rotateKey", map[string]any{"overlap_seconds": 0})
			}
		}
		if err != nil {
			return nil, fmt.Errorf("provision witness station %s: %w", st.ID, err)
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("provision witness station %s: status %d: %s", st.ID, code, bytes.TrimSpace(b))
		}
		var out struct {
			Key struct {
				KeyID  uint32 `json:"key_id"`
				KeyHex string `json:"key_hex"`
			} `json:"key"`
		}
		if err := json.Unmarshal(b, &out); err != nil || out.Key.KeyHex == "" {
			return nil, fmt.Errorf("provision witness station %s: no key in the answer", st.ID)
		}
		if _, err := hex.DecodeString(out.Key.KeyHex); err != nil {
			return nil, fmt.Errorf("provision witness station %s: key: %w", st.ID, err)
		}
		st.KeyID, st.KeyHex = out.Key.KeyID, out.Key.KeyHex
	}
	return stations, nil
}

// post sends body as JSON to the data API with the admin token and returns
// the status and (the first 64 KiB of) the answer. A 5xx, a 429 or a
// failed exchange is retried, four times at most, a second apart.
func post(ctx context.Context, client *http.Client, cfg Config, path string, body any) (int, []byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return 0, nil, errors.Join(ctx.Err(), last)
			case <-time.After(time.Second):
			}
		}
		code, b, err := postOnce(ctx, client, cfg, path, payload)
		if !errors.Is(err, errRetry) {
			return code, b, err
		}
		last = err
	}
	return 0, nil, last
}

func postOnce(ctx context.Context, client *http.Client, cfg Config, path string, payload []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.DataAPI+path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, fmt.Errorf("%w: %w", errRetry, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read answer: %w", errRetry, err)
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return 0, nil, fmt.Errorf("%w: %s: %s", errRetry, resp.Status, bytes.TrimSpace(b))
	}
	return resp.StatusCode, b, nil
}

// Package keycheck checks, for an edge's WebSocket API, the API keys its
// clients present, at the cores' data API.
package keycheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/svc-edge/internal/route"
	"shindo.dev/svc-edge/internal/wsapi"
)

// Checker checks the WebSocket API's tokens — API keys of the data API —
// through the data-API routing (DataService.CheckKeys, POST
// /v1/keys:check), naming the client's address in X-Forwarded-For so the
// core's per-address limits apply to whoever presents keys. A verdict is
// kept for keyTTL: a thousand apps reconnecting with one key after a
// restart of the edge cost one check, and the recheck of the connected
// clients (every 3 s) still asks afresh.
type Checker struct {
	client *http.Client

	mu       sync.Mutex
	known    map[string]checked
	inFlight map[string]*keyCall // a single key being asked about
}

// keyCall is one check of a single key that concurrent starts with the
// same key wait for: an app that ships one key to all its users, all
// reconnecting at once, costs one check.
type keyCall struct {
	done  chan struct{}
	state wsapi.KeyState
	err   error
}

type checked struct {
	state   wsapi.KeyState
	expires time.Time
}

// keyTTL is how long a verdict on a key is reused.
const keyTTL = 2 * time.Second

// maxKnownKeys bounds the verdicts kept; past it they are dropped.
const maxKnownKeys = 100_000

// New returns a checker that asks the cores through bal.
func New(bal *route.Balancer) *Checker {
	return &Checker{client: &http.Client{Transport: bal, Timeout: 5 * time.Second}, known: map[string]checked{}, inFlight: map[string]*keyCall{}}
}

// Check answers from fresh verdicts where it can, and asks the data API
// about the rest; concurrent checks of one key share one request.
func (k *Checker) Check(ctx context.Context, addr string, keys []string) ([]wsapi.KeyState, error) {
	if len(keys) == 1 {
		return k.checkOne(ctx, addr, keys[0])
	}
	return k.check(ctx, addr, keys)
}

func (k *Checker) checkOne(ctx context.Context, addr, key string) ([]wsapi.KeyState, error) {
	k.mu.Lock()
	if c, ok := k.known[key]; ok && time.Now().Before(c.expires) {
		k.mu.Unlock()
		return []wsapi.KeyState{c.state}, nil
	}
	if call, ok := k.inFlight[key]; ok {
		k.mu.Unlock()
		select {
		case <-call.done:
			return []wsapi.KeyState{call.state}, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	call := &keyCall{done: make(chan struct{})}
	k.inFlight[key] = call
	k.mu.Unlock()
	states, err := k.check(ctx, addr, []string{key})
	if err == nil {
		call.state = states[0]
	}
	call.err = err
	k.mu.Lock()
	delete(k.inFlight, key)
	k.mu.Unlock()
	close(call.done)
	return states, err
}

func (k *Checker) check(ctx context.Context, addr string, keys []string) ([]wsapi.KeyState, error) {
	out := make([]wsapi.KeyState, len(keys))
	var ask []string
	var at []int
	now := time.Now()
	k.mu.Lock()
	for i, key := range keys {
		if c, ok := k.known[key]; ok && now.Before(c.expires) {
			out[i] = c.state
			continue
		}
		ask, at = append(ask, key), append(at, i)
	}
	k.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	states, err := k.ask(ctx, addr, ask)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if len(k.known)+len(ask) > maxKnownKeys {
		clear(k.known)
	}
	for j, st := range states {
		out[at[j]] = st
		k.known[ask[j]] = checked{state: st, expires: now.Add(keyTTL)}
	}
	k.mu.Unlock()
	return out, nil
}

// maxCheckAnswer bounds the answer read: 500 keys with their clients.
const maxCheckAnswer = 4 << 20

// ask is one CheckKeys call.
func (k *Checker) ask(ctx context.Context, addr string, keys []string) ([]wsapi.KeyState, error) {
	body, err := protojson.Marshal(&datav1.CheckKeysRequest{Keys: keys})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://core/v1/keys:check", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("check keys: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCheckAnswer))
	if err != nil {
		return nil, fmt.Errorf("check keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("check keys: %s: %.200s", resp.Status, b)
	}
	var out datav1.CheckKeysResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("check keys: %w", err)
	}
	if len(out.GetResults()) != len(keys) {
		return nil, fmt.Errorf("check keys: %d answers for %d keys", len(out.GetResults()), len(keys))
	}
	states := make([]wsapi.KeyState, len(keys))
	for i, r := range out.GetResults() {
		c := r.GetClient()
		states[i] = wsapi.KeyState{Known: r.GetKnown(), Revoked: c.GetRevokedMs() != 0, KeyID: c.GetKeyId(),
			Admin: c.GetRole() == "admin", Topics: c.GetTopics()}
	}
	return states, nil
}

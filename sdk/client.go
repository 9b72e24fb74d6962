// Package sdk is the Go client of a shindo network: the data API with the
// base-URL switching rules of SPEC §7, its routes typed on the generated
// messages of proto/ (data.go), typed calls for the compatible routes, the
// Server-Sent Events streams (package sse) and clock sync.
//
// Switching rule: a request goes to the current base URL; a connection
// error, a timeout or a 5xx moves the client to the next base URL and the
// request is tried there, once per URL; a 4xx never does — it is the
// caller's mistake, and every core would answer the same.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Client calls a shindo data API through a list of base URLs (cores, or
// the edges that route to them). It is safe for concurrent use.
type Client struct {
	bases   []string
	http    *http.Client
	mu      sync.Mutex
	current int
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its Timeout bounds each attempt).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// New returns a client for bases, tried in order; at least one.
func New(bases []string, opts ...Option) (*Client, error) {
	if len(bases) == 0 {
		return nil, errors.New("sdk: no base URL")
	}
	c := &Client{http: &http.Client{Timeout: 5 * time.Second}}
	for _, b := range bases {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("sdk: base URL %q: want http(s)://host[:port]", b)
		}
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Base returns the base URL requests go to now.
func (c *Client) Base() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bases[c.current]
}

// StatusError is an HTTP error answer.
type StatusError struct {
	Code int
	Body string
	URL  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.URL, e.Code, http.StatusText(e.Code), e.Body)
}

// Get fetches path (with query) and decodes the JSON answer into out,
// switching base URL by the rule above.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	b, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sdk: decode %s: %w", path, err)
	}
	return nil
}

// Do sends a request (body may be nil) and returns the answer's body.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	c.mu.Lock()
	start := c.current
	c.mu.Unlock()
	var errs []error
	for i := range c.bases {
		idx := (start + i) % len(c.bases)
		b, err, retry := c.try(ctx, method, c.bases[idx]+path, body)
		if err == nil || !retry {
			if err == nil {
				c.mu.Lock()
				c.current = idx
				c.mu.Unlock()
			}
			return b, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		// Next time start with the next base URL.
		c.mu.Lock()
		c.current = (idx + 1) % len(c.bases)
		c.mu.Unlock()
	}
	return nil, fmt.Errorf("sdk: every base URL failed: %w", errors.Join(errs...))
}

// try makes one attempt; retry tells whether another base URL may help.
func (c *Client) try(ctx context.Context, method, u string, body []byte) ([]byte, error, bool) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err, false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Connection refused, reset, DNS, timeout: the entrance is at fault.
		return nil, err, ctx.Err() == nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err, true
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, &StatusError{resp.StatusCode, strings.TrimSpace(string(b)), u}, true
	case resp.StatusCode >= 400:
		return nil, &StatusError{resp.StatusCode, strings.TrimSpace(string(b)), u}, false
	}
	return b, nil, false
}

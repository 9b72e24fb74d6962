// Package timesync corrects a client's clock against shindo's time-sync
// endpoint (GET /ntp on the edges, SPEC §7) the way NTP does: from the
// client's send and receive times and the server's receive and transmit
// times it computes offset and round-trip delay, and of several samples it
// keeps the one with the lowest delay, whose offset is the least disturbed
// by queueing. Stations stamp packets with the corrected clock.
package timesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Sample is one exchange.
type Sample struct {
	Offset time.Duration // server clock minus client clock
	RTT    time.Duration // round trip minus the server's own time
}

// Header names of the /ntp endpoint: Unix ms with a fraction.
const (
	HeaderReceive  = "X-NTP-T2"
	HeaderTransmit = "X-NTP-T3"
)

// FormatMs renders t as Unix milliseconds with microsecond fraction.
func FormatMs(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMicro())/1000, 'f', 3, 64)
}

// ParseMs reads a Unix-milliseconds value with optional fraction.
func ParseMs(s string) (time.Time, error) {
	f, err := strconv.ParseFloat(s, 64)
	// Between 2001 and 5138: anything else is not a server clock (the
	// negated form also rejects NaN).
	if err != nil || !(f >= 1e12 && f <= 1e14) {
		return time.Time{}, fmt.Errorf("not a Unix time in ms: %q", s)
	}
	return time.UnixMicro(int64(f * 1000)), nil
}

// Query takes one sample from url.
func Query(ctx context.Context, client *http.Client, url string) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, err
	}
	t1 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	t4 := time.Now()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	t2, err := ParseMs(resp.Header.Get(HeaderReceive))
	if err != nil {
		return Sample{}, fmt.Errorf("%s %s: %w", url, HeaderReceive, err)
	}
	t3, err := ParseMs(resp.Header.Get(HeaderTransmit))
	if err != nil {
		return Sample{}, fmt.Errorf("%s %s: %w", url, HeaderTransmit, err)
	}
	return Sample{
		Offset: (t2.Sub(t1) + t3.Sub(t4)) / 2,
		RTT:    t4.Sub(t1) - t3.Sub(t2),
	}, nil
}

// Best takes n samples from url and returns the one with the lowest RTT.
func Best(ctx context.Context, client *http.Client, url string, n int) (Sample, error) {
	var best Sample
	var errs []error
	got := 0
	for range n {
		s, err := Query(ctx, client, url)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got == 0 || s.RTT < best.RTT {
			best = s
		}
		got++
	}
	if got == 0 {
		return Sample{}, errors.Join(errs...)
	}
	return best, nil
}

// Clock is the local clock corrected by the latest accepted sample.
type Clock struct {
	offset atomic.Int64 // ns
	synced atomic.Bool
}

// Now returns the corrected time.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Offset returns the correction applied and whether any sync succeeded.
func (c *Clock) Offset() (time.Duration, bool) {
	return time.Duration(c.offset.Load()), c.synced.Load()
}

// Run syncs against the entrances in urls every interval until ctx ends,
// taking samples from one entrance and moving to the next after three
// consecutive failed rounds (the client rules of SPEC §7). client asks
// them (its TLS trusting theirs); nil: a plain client with a 2 s timeout.
func (c *Clock) Run(ctx context.Context, client *http.Client, urls []string, interval time.Duration, log *slog.Logger) error {
	if len(urls) == 0 {
		return nil
	}
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	entrance, failures := 0, 0
	for {
		s, err := Best(ctx, client, urls[entrance], 5)
		switch {
		case err == nil:
			failures = 0
			c.offset.Store(int64(s.Offset))
			if !c.synced.Swap(true) {
				log.InfoContext(ctx, "clock synced", slog.String("entrance", urls[entrance]), slog.Duration("offset", s.Offset), slog.Duration("rtt", s.RTT))
			}
		case ctx.Err() != nil:
			return nil
		default:
			failures++
			log.WarnContext(ctx, "time sync failed", slog.String("entrance", urls[entrance]), slog.Int("failures", failures), slog.Any("error", err))
			if failures >= 3 {
				entrance, failures = (entrance+1)%len(urls), 0
			}
		}
		wait := interval
		if err != nil {
			wait = min(interval, 3*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Package ratelimit keeps token buckets by name (a client address, an API
// key) in bounded memory: a bucket that has refilled completely is the
// same as a new one, so idle buckets are dropped by Sweep, and past a
// maximum number of buckets arbitrary ones are dropped to make room (which
// at worst gives their owners a fresh burst).
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Limiter holds token buckets. It is safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	max     int
	now     func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
	rate   float64 // tokens per second
	burst  float64
}

// New returns a limiter that keeps at most max buckets.
func New(max int) *Limiter {
	return &Limiter{buckets: make(map[string]*bucket), max: max, now: time.Now}
}

// Allow takes a token from the bucket named key, which refills at rate
// tokens per second up to burst. It returns true if there was one, and
// otherwise how long until there will be. A rate of 0 or less never
// limits.
func (l *Limiter) Allow(key string, rate float64, burst int) (bool, time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	b := max(float64(burst), 1)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	bk, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			// Make room for a sixteenth of the maximum at once, so that a
			// flood of new names costs a sweep per many of them, not each.
			l.sweepLocked(now)
			keep := l.max - max(l.max/16, 1)
			for k := range l.buckets {
				if len(l.buckets) <= keep {
					break
				}
				delete(l.buckets, k)
			}
		}
		bk = &bucket{tokens: b, last: now}
		l.buckets[key] = bk
	}
	// A key's limits may change (a client's rate edited); take the new.
	bk.rate, bk.burst = rate, b
	if el := now.Sub(bk.last).Seconds(); el > 0 {
		bk.tokens = math.Min(bk.burst, bk.tokens+el*bk.rate)
		bk.last = now
	}
	if bk.tokens >= 1 {
		bk.tokens--
		return true, 0
	}
	wait := time.Duration((1 - bk.tokens) / bk.rate * float64(time.Second))
	return false, wait
}

// Len returns the number of buckets held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// Sweep drops the buckets that have refilled completely.
func (l *Limiter) Sweep() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
}

func (l *Limiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst {
			delete(l.buckets, k)
		}
	}
}

// Run sweeps every interval until ctx ends.
func (l *Limiter) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.Sweep()
		}
	}
}

package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(100)
	l.now = func() time.Time { return now }
	for i := range 3 {
		if ok, _ := l.Allow("a", 2, 3); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.Allow("a", 2, 3)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v, wait %s", ok, wait)
	}
	if ok, _ := l.Allow("b", 2, 3); !ok {
		t.Fatal("buckets are not separate")
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.Allow("a", 2, 3); !ok {
		t.Fatal("no refill")
	}
	if ok, _ := l.Allow("c", 0, 0); !ok {
		t.Fatal("rate 0 limits")
	}
	now = now.Add(10 * time.Second)
	l.Sweep()
	if l.Len() != 0 {
		t.Fatalf("%d idle buckets kept", l.Len())
	}
}

func TestBounded(t *testing.T) {
	t.Parallel()
	l := New(64)
	for i := range 10_000 {
		l.Allow(fmt.Sprint(i), 1, 5)
		if l.Len() > 64 {
			t.Fatalf("%d buckets held", l.Len())
		}
	}
}

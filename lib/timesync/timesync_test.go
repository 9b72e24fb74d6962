package timesync

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// server answers like an edge whose clock is skew ahead of ours.
func server(skew time.Duration, status int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t2 := time.Now().Add(skew)
		w.Header().Set(HeaderReceive, FormatMs(t2))
		t3 := time.Now().Add(skew)
		w.Header().Set(HeaderTransmit, FormatMs(t3))
		w.WriteHeader(status)
		io.WriteString(w, FormatMs(t3))
	}))
}

func TestBestRecoversSkew(t *testing.T) {
	t.Parallel()
	srv := server(1500*time.Millisecond, http.StatusOK)
	defer srv.Close()
	s, err := Best(context.Background(), srv.Client(), srv.URL, 5)
	if err != nil {
		t.Fatal(err)
	}
	// On loopback the error is bounded by half the RTT.
	if d := s.Offset - 1500*time.Millisecond; d > s.RTT/2+time.Millisecond || d < -s.RTT/2-time.Millisecond {
		t.Fatalf("offset %v, rtt %v; want 1.5s ± rtt/2", s.Offset, s.RTT)
	}
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderReceive, "yesterday")
	}))
	defer bad.Close()
	if _, err := Query(context.Background(), bad.Client(), bad.URL); err == nil {
		t.Fatal("bad header accepted")
	}
	down := server(0, http.StatusServiceUnavailable)
	defer down.Close()
	if _, err := Best(context.Background(), down.Client(), down.URL, 3); err == nil {
		t.Fatal("503 accepted")
	}
}

func TestClockSwitchesEntranceAfterThreeFailures(t *testing.T) {
	t.Parallel()
	down := server(0, http.StatusServiceUnavailable)
	defer down.Close()
	good := server(-2*time.Second, http.StatusOK)
	defer good.Close()
	var c Clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx, nil, []string{down.URL, good.URL}, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	poll.Until(t, 5*time.Second, "synced via the second entrance", func() bool { _, ok := c.Offset(); return ok })
	if off, _ := c.Offset(); off > -1900*time.Millisecond || off < -2100*time.Millisecond {
		t.Fatalf("offset %v", off)
	}
	if d := time.Until(c.Now()); d > -1900*time.Millisecond {
		t.Fatalf("corrected clock %v ahead", d)
	}
}

func FuzzParseMs(f *testing.F) {
	f.Add("1732881234567.123")
	f.Add("-1")
	f.Add("NaN")
	f.Fuzz(func(t *testing.T, s string) {
		if ts, err := ParseMs(s); err == nil && ts.UnixMilli() <= 0 {
			t.Fatalf("accepted %q as %v", s, ts)
		}
	})
}

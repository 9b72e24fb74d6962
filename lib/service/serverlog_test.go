package service

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestServerLogCountsHandshakes: a flood of failed handshakes is one log
// line and a count; any other line of net/http is logged as it comes.
func TestServerLogCountsHandshakes(t *testing.T) {
	var out bytes.Buffer
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "f"})
	l := (&serverLog{log: slog.New(slog.NewTextHandler(&out, nil)), failures: failures}).errorLog()
	for i := range 1000 {
		l.Printf("http: TLS handshake error from 192.0.2.%d:4000: EOF", i%250)
	}
	l.Printf("http: superfluous response.WriteHeader call")
	if got := testutil.ToFloat64(failures); got != 1000 {
		t.Errorf("%v failures counted, want 1000", got)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "since_last_logged=1") || !strings.Contains(lines[1], "superfluous") {
		t.Errorf("logged %d lines, want the first failure and the other line:\n%s", len(lines), out.String())
	}
}

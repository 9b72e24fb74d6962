package service

import (
	"bytes"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// handshakeFailuresOpts describe the count of the TLS handshakes public
// listeners gave up on: garbage, a client that hung up or stalled, one
// that trusts no certificate of ours.
var handshakeFailuresOpts = prometheus.CounterOpts{
	Name: "shindo_tls_handshake_failures_total",
	Help: "TLS handshakes a public listener gave up on (not TLS, a client gone, stalled past the header timeout, or refusing our certificate), by listener.",
}

// serverLog is the error log of an HTTP listener. net/http writes a line
// there for every failed TLS handshake, which anyone can cause by the
// thousand: those are counted, and logged at most once a second with how
// many there were. Other lines are logged as they come.
type serverLog struct {
	log      *slog.Logger
	failures prometheus.Counter

	mu      sync.Mutex
	last    time.Time
	pending int
}

var handshakePrefix = []byte("http: TLS handshake error")

func (w *serverLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	if !bytes.HasPrefix(p, handshakePrefix) {
		w.log.Warn(line)
		return len(p), nil
	}
	w.failures.Inc()
	w.mu.Lock()
	w.pending++
	now := time.Now()
	if now.Sub(w.last) < time.Second {
		w.mu.Unlock()
		return len(p), nil
	}
	n := w.pending
	w.pending, w.last = 0, now
	w.mu.Unlock()
	w.log.Warn("TLS handshakes failed", slog.Int("since_last_logged", n), slog.String("latest", line))
	return len(p), nil
}

// errorLog is the *log.Logger net/http takes, writing to w.
func (w *serverLog) errorLog() *log.Logger { return log.New(w, "", 0) }

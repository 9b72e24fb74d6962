package peersync

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"shindo.dev/devkit/poll"
	"shindo.dev/lib/telemetry/telemetrytest"
)

// TestExchangeIsOneTrace: the asking core's span travels in the request's
// NATS headers, and the answering core serves under it: one trace holds
// both sides of an exchange.
func TestExchangeIsOneTrace(t *testing.T) {
	tp, rec := telemetrytest.Recorder(t)
	a, b := pair(t, 50*time.Millisecond, time.Hour)
	a.syncer.tracer, b.syncer.tracer = tp.Tracer("TNN-1"), tp.Tracer("TYO-1")
	b.receive(t, "S1", 1, 2, 3)
	run(t, a, b)
	waitConverged(t, a, b, map[string]int{"S1": 3})

	poll.Until(t, 5*time.Second, "an answer span under an ask span", func() bool {
		asks := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.Name() == "peersync ask" {
				asks[s.SpanContext().SpanID().String()] = s
			}
		}
		for _, s := range rec.Ended() {
			if s.Name() != "peersync answer" {
				continue
			}
			ask, ok := asks[s.Parent().SpanID().String()]
			if ok && ask.SpanContext().TraceID() == s.SpanContext().TraceID() && s.Parent().IsRemote() {
				return true
			}
		}
		return false
	})
}

package rtsgrpc

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"shindo.dev/lib/telemetry"
	"shindo.dev/lib/telemetry/telemetrytest"
	"shindo.dev/svc-rts/internal/shake"
)

// TestTickJoinsPacketTrace: the tick after traced packets were applied is
// a span in the first packet's trace, linking the other, and its snapshot
// goes to subscribers with the tick's trace context; the tick after it,
// with no traced packet, carries none.
func TestTickJoinsPacketTrace(t *testing.T) {
	tp, rec := telemetrytest.Recorder(t)
	eng := shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(string) (shake.Place, bool) {
		return shake.Place{Lat: 23.9, Lon: 121.6, Code: 970}, true
	}})
	srv := New(eng, "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.tracer = tp.Tracer("test")

	// Two packets, each traced at ingest: their spans stand in for
	// ingest's.
	const t0 = int64(1_800_000_000_000)
	var packets []trace.SpanContext
	for _, id := range []string{"A", "B"} {
		ctx, span := tp.Tracer("ingest").Start(context.Background(), "ingest packet")
		span.End()
		packets = append(packets, span.SpanContext())
		r := record(id, t0, 1)
		r.TraceContext = telemetry.Inject(ctx)
		if result, _ := srv.apply(r); result != "applied" {
			t.Fatalf("record %s %s", id, result)
		}
		srv.noteTraced(r)
	}
	srv.emit(context.Background(), t0)

	var tick sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "rts tick" {
			tick = s
		}
	}
	if tick == nil {
		t.Fatal("no tick span")
	}
	if tick.Parent().SpanID() != packets[0].SpanID() || tick.SpanContext().TraceID() != packets[0].TraceID() {
		t.Errorf("tick span's parent %v, want the first packet's span %v", tick.Parent(), packets[0])
	}
	if l := tick.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != packets[1].SpanID() {
		t.Errorf("tick span links %v, want the second packet's span", l)
	}
	latest, _ := srv.hub.Latest()
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), latest.GetTraceContext()))
	if got.SpanID() != tick.SpanContext().SpanID() {
		t.Errorf("snapshot carries %v, want the tick's span %v", latest.GetTraceContext(), tick.SpanContext())
	}

	srv.emit(context.Background(), t0+500)
	if latest, _ := srv.hub.Latest(); latest.GetTraceContext() != nil {
		t.Errorf("an untraced tick carries %v", latest.GetTraceContext())
	}
}

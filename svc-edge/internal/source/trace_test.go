package source

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"shindo.dev/devkit/poll"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/telemetry"
	"shindo.dev/lib/telemetry/telemetrytest"
)

// TestTracedSnapshotSpan: a snapshot that comes with its tick's trace
// context is handled under a span of that trace, a child of the tick's,
// which records that it was served.
func TestTracedSnapshotSpan(t *testing.T) {
	tp, rec := telemetrytest.Recorder(t)
	p := startPair(t, func(p *pair) { p.sel.tracer = tp.Tracer("test") })

	tctx, tick := tp.Tracer("rts").Start(context.Background(), "rts tick")
	tick.End()
	p.a.traced <- &rtsv1.SubscribeResponse{Snapshot: snap("TNN-1", 1000_000), TraceContext: telemetry.Inject(tctx)}
	p.expect(t, "TNN-1@40.000")

	var edge sdktrace.ReadOnlySpan
	poll.Until(t, 5*time.Second, "an edge snapshot span", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "edge snapshot" {
				edge = s
				return true
			}
		}
		return false
	})
	if edge.Parent().SpanID() != tick.SpanContext().SpanID() || edge.SpanContext().TraceID() != tick.SpanContext().TraceID() {
		t.Fatalf("edge span's parent %v, want the tick's %v", edge.Parent(), tick.SpanContext())
	}
	for _, a := range edge.Attributes() {
		if a.Key == "shindo.served" && a.Value == attribute.BoolValue(true) {
			return
		}
	}
	t.Fatalf("edge span attributes %v lack shindo.served=true", edge.Attributes())
}

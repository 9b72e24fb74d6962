package telemetry

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestCarriers: a span context written by Inject and InjectNATS comes back
// whole from Extract and ExtractNATS, and an unsampled or absent span
// writes nothing.
func TestCarriers(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "hop")
	defer span.End()
	want := span.SpanContext()

	fields := Inject(ctx)
	if fields["traceparent"] == "" {
		t.Fatalf("Inject wrote %v, want a traceparent", fields)
	}
	if got := trace.SpanContextFromContext(Extract(context.Background(), fields)); !got.Equal(want.WithRemote(true)) {
		t.Errorf("Extract: %v, want %v", got, want)
	}

	h := nats.Header{}
	InjectNATS(ctx, h)
	if h.Get("traceparent") == "" {
		t.Fatalf("InjectNATS wrote %v, want a traceparent header", h)
	}
	// As a subscriber sees it: the header block went over the wire.
	if got := trace.SpanContextFromContext(ExtractNATS(context.Background(), h)); !got.Equal(want.WithRemote(true)) {
		t.Errorf("ExtractNATS: %v, want %v", got, want)
	}

	unsampled := trace.ContextWithSpanContext(context.Background(), want.WithTraceFlags(0))
	if f := Inject(unsampled); f != nil {
		t.Errorf("Inject of an unsampled span: %v, want nothing", f)
	}
	h = nats.Header{}
	InjectNATS(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("InjectNATS without a span: %v, want nothing", h)
	}
	if ctx := ExtractNATS(context.Background(), nil); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("ExtractNATS of no headers gave a span context")
	}
}

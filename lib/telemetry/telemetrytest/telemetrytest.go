// Package telemetrytest records the spans a test makes: a tracer provider
// of the real SDK whose ended spans the test reads, with the W3C
// propagator the services install.
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Recorder installs the W3C trace-context propagator globally (as
// telemetry.Setup does) and returns a tracer provider whose spans rec
// records; the provider shuts down when the test ends.
func Recorder(tb testing.TB) (tp *sdktrace.TracerProvider, rec *tracetest.SpanRecorder) {
	tb.Helper()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	rec = tracetest.NewSpanRecorder()
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) }) // recorded spans need no flushing
	return tp, rec
}

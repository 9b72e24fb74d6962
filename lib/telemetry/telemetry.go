// Package telemetry sets up OpenTelemetry tracing for a shindo binary: W3C
// trace-context propagation always, and span export over OTLP/gRPC when an
// endpoint is configured. Without an endpoint spans are still created, so
// trace IDs flow across services and into logs.
//
// Sampling: a span whose parent is sampled is sampled, and a root span is
// sampled (ParentBased(AlwaysSample)): requests are few enough to trace all
// of them. The one hot path, the station packets, is sampled before any
// span exists, by svc-ingest (its -trace-every); a packet it does not trace
// costs no span anywhere downstream.
//
// Trace context crosses the hops that are not gRPC or HTTP in carriers of
// its own: NATS message headers (InjectNATS, ExtractNATS) and the
// trace_context fields of the records and snapshots streamed between the
// services (Inject, Extract).
package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Setup installs the global tracer provider and propagator for service at
// site. It returns a shutdown func that flushes pending spans; the caller
// defers it.
func Setup(ctx context.Context, service, site, otlpEndpoint string) (func(context.Context) error, error) {
	res := resource.NewSchemaless(
		semconv.ServiceName(service),
		semconv.DeploymentEnvironmentName(site),
	)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))}
	if otlpEndpoint != "" {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(otlpEndpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return nil, fmt.Errorf("otlp exporter %s: %w", otlpEndpoint, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// Tracer returns the tracer of the shindo package named name (its import
// path), from the provider Setup installed.
func Tracer(name string) trace.Tracer { return otel.Tracer(name) }

// Inject returns the trace context of ctx's span as W3C fields
// (traceparent, tracestate), for a message field that carries it; nil when
// ctx has no sampled span, so an untraced message carries nothing.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil
	}
	m := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, m)
	return m
}

// Extract returns ctx with the remote span context of fields (as Inject
// made them) as its parent; ctx unchanged when fields hold none.
func Extract(ctx context.Context, fields map[string]string) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(fields))
}

// InjectNATS writes the trace context of ctx's span into h, the headers of
// a NATS message about to be published (a nats.Header: the type is left
// unnamed so that every service importing this package does not link the
// NATS client); nothing when ctx has no sampled span.
func InjectNATS(ctx context.Context, h map[string][]string) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, natsCarrier(h))
}

// ExtractNATS returns ctx with the remote span context in the headers h of
// a received NATS message as its parent; ctx unchanged when h holds none.
func ExtractNATS(ctx context.Context, h map[string][]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, natsCarrier(h))
}

// natsCarrier adapts NATS headers, whose keys are case-sensitive (unlike
// HTTP's), to the propagator: the fields are written and read lowercase,
// as W3C names them, and as nats.Header's Get and Set would.
type natsCarrier map[string][]string

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Package telemetry sets up OpenTelemetry tracing for a shindo binary: W3C
// trace-context propagation always, and span export over OTLP/gRPC when an
// endpoint is configured. Without an endpoint spans are still created, so
// trace IDs flow across services and into logs.
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
)

// Setup installs the global tracer provider and propagator for service at
// site. It returns a shutdown func that flushes pending spans; the caller
// defers it.
func Setup(ctx context.Context, service, site, otlpEndpoint string) (func(context.Context) error, error) {
	res := resource.NewSchemaless(
		semconv.ServiceName(service),
		semconv.DeploymentEnvironmentName(site),
	)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
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

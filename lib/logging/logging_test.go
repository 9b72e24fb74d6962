package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceIDs: a record logged with the context of a span carries its
// trace and span IDs, also through a logger made With attributes; one
// without a span carries neither.
func TestTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := New(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	log.With("station", "S1").InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.InfoContext(context.Background(), "untraced")
	dec := json.NewDecoder(&buf)
	var traced, untraced map[string]any
	if err := dec.Decode(&traced); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&untraced); err != nil {
		t.Fatal(err)
	}
	if traced["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || traced["span_id"] != "00f067aa0ba902b7" || traced["station"] != "S1" {
		t.Errorf("traced record %v", traced)
	}
	if _, ok := untraced["trace_id"]; ok {
		t.Errorf("untraced record %v has a trace_id", untraced)
	}
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"shindo.dev/devkit/poll"
)

// receivedSpan is a span as the collector received it.
type receivedSpan struct {
	service                 string // resource attribute service.name
	name                    string
	traceID, spanID, parent string
	attrs                   map[string]any
}

// otlpSink is a real OTLP/gRPC trace receiver, the OpenTelemetry
// Collector's own (otlpreceiver), with a consumer that keeps every span.
type otlpSink struct {
	mu    sync.Mutex
	spans []receivedSpan
}

// startOTLPSink starts the receiver on a free loopback port and returns it
// with its address.
func startOTLPSink(t *testing.T) (*otlpSink, string) {
	t.Helper()
	sink := &otlpSink{}
	traces, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		sink.add(td)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = addr
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, traces)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("start OTLP receiver on %s: %v", addr, err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return sink, addr
}

func (s *otlpSink) add(td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range td.ResourceSpans().All() {
		service := ""
		if v, ok := rs.Resource().Attributes().Get("service.name"); ok {
			service = v.Str()
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				s.spans = append(s.spans, receivedSpan{
					service: service, name: sp.Name(),
					traceID: sp.TraceID().String(), spanID: sp.SpanID().String(), parent: sp.ParentSpanID().String(),
					attrs: sp.Attributes().AsRaw(),
				})
			}
		}
	}
}

// trace returns the spans of trace id received so far.
func (s *otlpSink) trace(id string) []receivedSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []receivedSpan
	for _, sp := range s.spans {
		if sp.traceID == id {
			out = append(out, sp)
		}
	}
	return out
}

// find returns the first span received that match accepts.
func (s *otlpSink) find(match func(receivedSpan) bool) (receivedSpan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spans {
		if match(sp) {
			return sp, true
		}
	}
	return receivedSpan{}, false
}

// waitTrace polls until trace id holds a span of every service in want
// (spans are exported in batches, every few seconds) and returns its spans.
func (s *otlpSink) waitTrace(t *testing.T, id string, within time.Duration, want ...string) []receivedSpan {
	t.Helper()
	var spans []receivedSpan
	var missing []string
	if !poll.Within(within, func() bool {
		spans, missing = s.trace(id), nil
		for _, svc := range want {
			if !slices.ContainsFunc(spans, func(sp receivedSpan) bool { return sp.service == svc }) {
				missing = append(missing, svc)
			}
		}
		return len(missing) == 0
	}) {
		t.Fatalf("trace %s lacks spans of %v after %s; it has %s", id, missing, within, describeSpans(spans))
	}
	return spans
}

func describeSpans(spans []receivedSpan) string {
	var b strings.Builder
	for _, sp := range spans {
		fmt.Fprintf(&b, "\n  %s %q span %s parent %s %v", sp.service, sp.name, sp.spanID, sp.parent, sp.attrs)
	}
	return b.String()
}

// TestTraceAcrossServices runs the topology exporting to a real OTLP
// receiver. One station packet, traced by ingest (-trace-every 1), makes
// one trace: ingest's span of the packet, the spans of the RTS ticks that
// took it (its children; at TNN-1, and at TYO-1 when the sync between the
// cores brings it there) and the edges' spans of those ticks' snapshots
// (children of the ticks'). One data-API request through an edge makes
// one trace spanning the edge and a core's data API.
func TestTraceAcrossServices(t *testing.T) {
	sink, addr := startOTLPSink(t)
	d := startDev(t, "-stations", "3", "-simulate=false", "-otel", addr, "-trace-every", "1")

	// The packet goes to TNN-1 alone, so its trace is TNN-1's.
	p := newProbe(t, d.stations[0], d.endpoints.get(t, "TNN-1", "ingest", "udp"))
	p.send(nextBoundary(), 2.5, 8)
	if ack := p.ack(0); ack.GetSite() != "TNN-1" {
		t.Fatalf("ack from %s", ack.GetSite())
	}
	var ingest receivedSpan
	poll.Until(t, 30*time.Second, "the ingest span of the packet", func() bool {
		var ok bool
		ingest, ok = sink.find(func(sp receivedSpan) bool {
			return sp.service == "shindo-ingest" && sp.name == "ingest packet" &&
				sp.attrs["shindo.station"] == d.stations[0].ID && sp.attrs["shindo.seq"] == int64(p.seq)
		})
		return ok
	})
	spans := sink.waitTrace(t, ingest.traceID, 30*time.Second, "shindo-ingest", "shindo-rts", "shindo-edge")
	// The record reaches TYO-1 too, through the sync between the cores,
	// with its trace context: each core's tick that took the packet is a
	// child of the packet's span.
	ticks := map[string]bool{}
	for _, sp := range spans {
		if sp.service == "shindo-rts" && sp.name == "rts tick" {
			if sp.parent != ingest.spanID {
				t.Errorf("RTS tick span %s is not the child of the packet's span", sp.spanID)
			}
			ticks[sp.spanID] = true
		}
	}
	edges := 0
	for _, sp := range spans {
		if sp.service == "shindo-edge" && sp.name == "edge snapshot" {
			if !ticks[sp.parent] {
				t.Errorf("edge span %s is not the child of a tick's span", sp.spanID)
			}
			edges++
		}
	}
	if len(ticks) == 0 || edges == 0 || t.Failed() {
		t.Fatalf("the packet's trace:%s", describeSpans(spans))
	}
	t.Logf("the packet's trace:%s", describeSpans(spans))

	// A data-API call through an edge, with a trace ID of the test's own:
	// the edge continues the caller's trace, and the core's data API
	// continues the edge's.
	const traceID = "5e1f0a0b0c0d0e0f1011121314151617"
	req, err := http.NewRequest("GET", d.endpoints.get(t, "TPE-1", "edge", "http")+"/v1/stations", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/stations through TPE-1: %s", resp.Status)
	}
	api := sink.waitTrace(t, traceID, 30*time.Second, "shindo-edge", "shindo-dataapi")
	byID := map[string]receivedSpan{}
	for _, sp := range api {
		byID[sp.spanID] = sp
	}
	// Every data-API span descends from an edge span: one trace, edge
	// then core.
	for _, sp := range api {
		if sp.service != "shindo-dataapi" {
			continue
		}
		up := sp
		for up.service == "shindo-dataapi" {
			next, ok := byID[up.parent]
			if !ok {
				t.Fatalf("data API span %q has no parent in the trace:%s", sp.name, describeSpans(api))
			}
			up = next
		}
		if up.service != "shindo-edge" {
			t.Errorf("data API span %q descends from %s, want the edge", sp.name, up.service)
		}
	}
}

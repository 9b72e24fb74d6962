package service

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"shindo.dev/lib/logging"
)

// syncBuffer is a log destination that handlers write from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// record returns the logged record whose msg is msg.
func (s *syncBuffer) record(t *testing.T, msg string) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(s.b.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == msg {
			return rec
		}
	}
	t.Fatalf("no %q in the log:\n%s", msg, s.b.String())
	return nil
}

// TestRequestLogCarriesTraceID: a line a handler logs with its request's
// context carries the request's trace ID, continued from the caller's
// traceparent, and the span ID of the service's own span, over HTTP (the
// otelhttp wrapper of Listen) and gRPC (the server's stats handler).
func TestRequestLogCarriesTraceID(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testCommon()
	c.LogLevel = "info"
	svc, err := New(ctx, "shindo-test", c, &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	if svc.log, err = logging.New(&out, "json", "info", slog.String("service", "shindo-test")); err != nil {
		t.Fatal(err)
	}
	addr, err := svc.Listen("public", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Logger().InfoContext(r.Context(), "http request served")
	}))
	if err != nil {
		t.Fatal(err)
	}
	svc.Intercept(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		svc.Logger().InfoContext(ctx, "grpc request served", slog.String("method", info.FullMethod))
		return handler(ctx, req)
	}, nil)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	const (
		httpTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		grpcTrace = "0af7651916cd43dd8448eb211c80319c"
		parent    = "00f067aa0ba902b7"
	)
	req, _ := http.NewRequest("GET", "http://"+addr.String()+"/", nil)
	req.Header.Set("traceparent", "00-"+httpTrace+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	conn, err := grpc.NewClient(svc.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+grpcTrace+"-"+parent+"-01")
	if _, err := healthpb.NewHealthClient(conn).Check(gctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	for msg, trace := range map[string]string{"http request served": httpTrace, "grpc request served": grpcTrace} {
		rec := out.record(t, msg)
		if rec["trace_id"] != trace {
			t.Errorf("%s: trace_id %v, want the caller's %s", msg, rec["trace_id"], trace)
		}
		if id, _ := rec["span_id"].(string); len(id) != 16 || id == parent {
			t.Errorf("%s: span_id %v, want the service's own span", msg, rec["span_id"])
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

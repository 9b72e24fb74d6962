package natspub

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"shindo.dev/devkit/poll"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/telemetry"
)

func TestPublishes(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := New(ctx, nc, "TNN-1", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync(natsbus.Snapshots.Subject("TNN-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A traced tick's snapshot carries the tick's trace context.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	tctx, span := tp.Tracer("test").Start(context.Background(), "rts tick")
	p.PublishSnapshot(tctx, &rtsv1.Snapshot{TimeMs: 500, Site: "TNN-1"})
	span.End()
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := trace.SpanContextFromContext(telemetry.ExtractNATS(context.Background(), m.Header)); got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("snapshot headers %v, want the tick's span %v", m.Header, span.SpanContext())
	}
	snap, err := natsbus.Snapshots.Decode(m.Data)
	if err != nil || snap.GetSnapshot().GetTimeMs() != 500 {
		t.Fatalf("snapshot %v %v", snap, err)
	}

	d := &rtsv1.Detection{Id: "1800000000000-18", Serial: 1}
	p.PublishDetection(context.Background(), d)
	p.PublishDetection(context.Background(), d) // the same update again: stored once
	p.PublishDetection(context.Background(), &rtsv1.Detection{Id: "1800000000000-18", Serial: 2})
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, natsbus.Detections.Stream())
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the stream holds both serials", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 2
	})
	last, err := stream.GetLastMsgForSubject(ctx, natsbus.Detections.Subject("TNN-1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := natsbus.Detections.Decode(last.Data)
	if err != nil || got.GetDetection().GetSerial() != 2 {
		t.Fatalf("last detection %v %v", got, err)
	}
}

// Package natspub publishes svc-rts's output on the core's NATS server:
// every snapshot on shindo.rts.<site>.snapshot (plain NATS: at two a
// second the newest one is what matters), and every detection update on
// shindo.detections.<site>, kept in the JetStream stream DETECTIONS (fsynced,
// seven days; message ID "<id>:<serial>", so a republished update is stored
// once). Each message carries the tick's trace context in its headers when
// the tick is traced.
package natspub

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/telemetry"
)

// SnapshotSubject and DetectionSubject name what a site publishes.
func SnapshotSubject(site string) string  { return "shindo.rts." + site + ".snapshot" }
func DetectionSubject(site string) string { return "shindo.detections." + site }

// StreamName is the JetStream stream of detections.
const StreamName = "DETECTIONS"

// Publisher implements rtsgrpc.Publisher over NATS.
type Publisher struct {
	site   string
	nc     *nats.Conn
	js     jetstream.JetStream
	log    *slog.Logger
	failed *prometheus.CounterVec
}

// New creates (or updates) the detection stream and returns a publisher.
func New(ctx context.Context, nc *nats.Conn, site string, reg prometheus.Registerer, log *slog.Logger) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       StreamName,
		Subjects:   []string{"shindo.detections.>"},
		Storage:    jetstream.FileStorage,
		MaxAge:     7 * 24 * time.Hour,
		Duplicates: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream stream %s: %w", StreamName, err)
	}
	p := &Publisher{site: site, nc: nc, js: js, log: log,
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_rts_publish_failures_total", Help: "NATS publications that failed, by kind."}, []string{"kind"})}
	reg.MustRegister(p.failed)
	return p, nil
}

// PublishSnapshot sends a snapshot; a slow or absent server loses it, the
// next one is half a second away.
func (p *Publisher) PublishSnapshot(ctx context.Context, s *rtsv1.Snapshot) {
	b, err := proto.Marshal(s)
	if err == nil {
		m := &nats.Msg{Subject: SnapshotSubject(p.site), Data: b, Header: nats.Header{}}
		telemetry.InjectNATS(ctx, m.Header)
		err = p.nc.PublishMsg(m)
	}
	if err != nil {
		p.failed.WithLabelValues("snapshot").Inc()
	}
}

// PublishDetection stores a detection update durably, without blocking
// the tick loop: the acknowledgement is awaited in the background and a
// failure is logged.
func (p *Publisher) PublishDetection(ctx context.Context, d *rtsv1.Detection) {
	b, err := proto.Marshal(d)
	if err != nil {
		p.failed.WithLabelValues("detection").Inc()
		return
	}
	m := &nats.Msg{Subject: DetectionSubject(p.site), Data: b, Header: nats.Header{}}
	telemetry.InjectNATS(ctx, m.Header)
	ack, err := p.js.PublishMsgAsync(m, jetstream.WithMsgID(fmt.Sprintf("%s:%d", d.GetId(), d.GetSerial())))
	if err != nil {
		p.failed.WithLabelValues("detection").Inc()
		p.log.WarnContext(ctx, "detection not published", slog.String("id", d.GetId()), slog.Any("error", err))
		return
	}
	// The tick's span has ended by the time the store answers; the
	// record keeps its IDs.
	ctx = context.WithoutCancel(ctx)
	go func() {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			p.failed.WithLabelValues("detection").Inc()
			p.log.WarnContext(ctx, "detection not stored", slog.String("id", d.GetId()), slog.Any("error", err))
		}
	}()
}

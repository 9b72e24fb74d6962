// Package natspub publishes svc-rts's output on the core's NATS server, on
// the hops of the NATS contract (lib/natsbus): every snapshot
// (natsbus.Snapshots, plain NATS: at two a second the newest one is what
// matters), and every detection update (natsbus.Detections, kept in the
// JetStream stream the contract declares, fsynced, seven days; message ID
// "<id>:<serial>", so a republished update is stored once). Each message
// carries the tick's trace context in its headers when the tick is traced.
package natspub

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/natsbus"
)

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
	if _, err = js.CreateOrUpdateStream(ctx, natsbus.Detections.StreamConfig()); err != nil {
		return nil, fmt.Errorf("jetstream stream %s: %w", natsbus.Detections.Stream(), err)
	}
	p := &Publisher{site: site, nc: nc, js: js, log: log,
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_rts_publish_failures_total", Help: "NATS publications that failed, by kind."}, []string{"kind"})}
	reg.MustRegister(p.failed)
	return p, nil
}

// PublishSnapshot sends a snapshot; a slow or absent server loses it, the
// next one is half a second away.
func (p *Publisher) PublishSnapshot(ctx context.Context, s *rtsv1.Snapshot) {
	msg, err := natsbus.Snapshots.Msg(ctx, p.site, &natsbusv1.SnapshotPublished{Snapshot: s})
	if err == nil {
		err = p.nc.PublishMsg(msg)
	}
	if err != nil {
		p.failed.WithLabelValues("snapshot").Inc()
	}
}

// PublishDetection stores a detection update durably, without blocking
// the tick loop: the acknowledgement is awaited in the background and a
// failure is logged.
func (p *Publisher) PublishDetection(ctx context.Context, d *rtsv1.Detection) {
	msg, err := natsbus.Detections.Msg(ctx, p.site, &natsbusv1.DetectionPublished{Detection: d})
	if err != nil {
		p.failed.WithLabelValues("detection").Inc()
		return
	}
	ack, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(fmt.Sprintf("%s:%d", d.GetId(), d.GetSerial())))
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

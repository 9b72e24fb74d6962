// Package forward streams svc-ingest's accepted records to a processing
// service (svc-rts, svc-waveform) over a bidirectional gRPC stream in
// numbered batches that the receiver acks.
//
// Flow control: at most Window batches are unacked at a time; beyond that
// records wait in a bounded queue, and when the queue is full Offer refuses,
// so ingest stops acking stations instead of losing data. Unacked batches
// are kept and resent first after a reconnect, so the receiver may see a
// batch twice and must apply records idempotently.
package forward

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// Stream is one open batch stream to a receiver.
type Stream interface {
	// Send sends a batch.
	Send(batchID uint64, records []*ingestv1.Record) error
	// Recv returns the ID up to which all batches are acked.
	Recv() (uint64, error)
	// CloseSend ends the sending side.
	CloseSend() error
}

// Opener opens a stream; the stream lives as long as ctx.
type Opener func(ctx context.Context) (Stream, error)

// Options size a Forwarder.
type Options struct {
	// Queue is how many records may wait to be batched.
	Queue int
	// MaxBatch is the most records per batch.
	MaxBatch int
	// Window is the most unacked batches in flight.
	Window int
	// DrainTimeout bounds the final flush at shutdown.
	DrainTimeout time.Duration
}

type batch struct {
	id      uint64
	records []*ingestv1.Record
}

// Forwarder batches records to one receiver.
type Forwarder struct {
	target string
	open   Opener
	opts   Options
	log    *slog.Logger
	queue  chan *ingestv1.Record

	mu       sync.Mutex
	inflight []batch
	nextID   uint64
	room     chan struct{} // signalled when an ack frees window space

	batches  prometheus.Counter
	records  prometheus.Counter
	resent   prometheus.Counter
	sessions prometheus.Counter
}

// Metrics are a Forwarder's Prometheus series, shared by all targets.
type Metrics struct {
	batches, records, resent, sessions *prometheus.CounterVec
	queued, inflight                   *prometheus.GaugeVec
}

// NewMetrics registers the forwarding metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		batches:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_batches_total", Help: "Batches sent, by target."}, []string{"target"}),
		records:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_records_total", Help: "Records sent (first sends only), by target."}, []string{"target"}),
		resent:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_resent_batches_total", Help: "Unacked batches resent after a reconnect, by target."}, []string{"target"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_sessions_total", Help: "Stream sessions opened, by target."}, []string{"target"}),
		queued:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shindo_ingest_forward_queued", Help: "Records waiting to be batched, by target."}, []string{"target"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shindo_ingest_forward_inflight_batches", Help: "Unacked batches, by target."}, []string{"target"}),
	}
	reg.MustRegister(m.batches, m.records, m.resent, m.sessions, m.queued, m.inflight)
	return m
}

// New returns a forwarder to target (a name for logs and metrics).
func New(target string, open Opener, opts Options, m *Metrics, log *slog.Logger) *Forwarder {
	return &Forwarder{
		target:   target,
		open:     open,
		opts:     opts,
		log:      log.With(slog.String("target", target)),
		queue:    make(chan *ingestv1.Record, opts.Queue),
		room:     make(chan struct{}, 1),
		nextID:   1,
		batches:  m.batches.WithLabelValues(target),
		records:  m.records.WithLabelValues(target),
		resent:   m.resent.WithLabelValues(target),
		sessions: m.sessions.WithLabelValues(target),
	}
}

// Offer queues r without blocking; false means the queue is full.
func (f *Forwarder) Offer(r *ingestv1.Record) bool {
	select {
	case f.queue <- r:
		return true
	default:
		return false
	}
}

// Pending returns the records queued and the batches unacked.
func (f *Forwarder) Pending() (queued, inflight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue), len(f.inflight)
}

// Run keeps a stream open and forwards until ctx ends, then flushes what is
// left within DrainTimeout.
func (f *Forwarder) Run(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := f.session(ctx, false)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			backoff = 50 * time.Millisecond
		}
		f.log.Warn("forward stream ended, reconnecting", slog.Any("error", err), slog.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opts.DrainTimeout)
	defer cancel()
	if err := f.session(drainCtx, true); err != nil {
		q, in := f.Pending()
		f.log.Warn("forward drain incomplete", slog.Any("error", err), slog.Int("queued", q), slog.Int("inflight", in))
	}
	return nil
}

// session runs one stream. In drain mode it returns once nothing is queued
// or in flight.
func (f *Forwarder) session(ctx context.Context, drain bool) error {
	if drain {
		if q, in := f.Pending(); q == 0 && in == 0 {
			return nil
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := f.open(sctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	f.sessions.Inc()
	defer st.CloseSend()

	f.mu.Lock()
	resend := append([]batch(nil), f.inflight...)
	f.mu.Unlock()
	for _, b := range resend {
		if err := st.Send(b.id, b.records); err != nil {
			return fmt.Errorf("resend batch %d: %w", b.id, err)
		}
		f.resent.Inc()
	}

	recvErr := make(chan error, 1)
	go func() {
		for {
			id, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			f.ack(id)
		}
	}()

	for {
		if drain {
			if q, in := f.Pending(); q == 0 && in == 0 {
				return nil
			}
		}
		if f.full() {
			select {
			case <-f.room:
				continue
			case <-sctx.Done():
				return sctx.Err()
			case err := <-recvErr:
				return fmt.Errorf("receive ack: %w", err)
			}
		}
		var first *ingestv1.Record
		select {
		case first = <-f.queue:
		case <-f.room:
			continue // an ack arrived: check the drain condition again
		case <-sctx.Done():
			return sctx.Err()
		case err := <-recvErr:
			return fmt.Errorf("receive ack: %w", err)
		}
		// Take what else is waiting, without waiting for more: batches grow
		// with load and latency stays low when traffic is light.
		recs := make([]*ingestv1.Record, 1, min(f.opts.MaxBatch, 1+len(f.queue)))
		recs[0] = first
	fill:
		for len(recs) < f.opts.MaxBatch {
			select {
			case r := <-f.queue:
				recs = append(recs, r)
			default:
				break fill
			}
		}
		f.mu.Lock()
		b := batch{id: f.nextID, records: recs}
		f.nextID++
		f.inflight = append(f.inflight, b)
		f.mu.Unlock()
		if err := st.Send(b.id, b.records); err != nil {
			return fmt.Errorf("send batch %d: %w", b.id, err)
		}
		f.batches.Inc()
		f.records.Add(float64(len(recs)))
	}
}

func (f *Forwarder) full() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inflight) >= f.opts.Window
}

// ack drops every batch up to id.
func (f *Forwarder) ack(id uint64) {
	f.mu.Lock()
	n := 0
	for n < len(f.inflight) && f.inflight[n].id <= id {
		n++
	}
	f.inflight = append(f.inflight[:0], f.inflight[n:]...)
	f.mu.Unlock()
	select {
	case f.room <- struct{}{}:
	default:
	}
}

// Collect reports queue and window occupancy to m; call it from a gauge
// refresh or before scraping.
func (f *Forwarder) Collect(m *Metrics) {
	q, in := f.Pending()
	m.queued.WithLabelValues(f.target).Set(float64(q))
	m.inflight.WithLabelValues(f.target).Set(float64(in))
}

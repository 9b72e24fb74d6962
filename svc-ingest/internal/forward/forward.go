// Package forward streams svc-ingest's journal to a processing service
// (svc-rts, svc-waveform) over a bidirectional gRPC stream in numbered
// batches that the receiver acks.
//
// The journal is the buffer: a forwarder reads from its durable cursor,
// keeps at most Window batches unacked, and moves the cursor past a batch
// once it is acked. A slow consumer slows its stream and the records wait on
// disk; a restarting one — or a restarting ingest — resumes from the last
// acked batch, so a batch may arrive twice and receivers apply records
// idempotently. Nothing is dropped.
//
// A receiver whose state is made of more than what it has not acked yet
// (svc-rts: detections last minutes, and a restarted engine has none) asks,
// in the first message of a stream, for the records received since a time
// again (a Replayer). The journal holds them for its retention; the
// forwarder finds the first by its receipt time, sends from there, and
// marks the batch with which it reached the journal's end: what follows
// comes as it is received. (Not the end when the stream began: the
// records received while the replay was sent would reach the receiver
// after it took up its ticks, later than it can account for.)
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/recordwire"
)

// Stream is one open batch stream to a receiver.
type Stream interface {
	// Send sends a batch: journal records, each a serialized
	// ingest.v1.Record, passed on as they are.
	Send(batchID uint64, records [][]byte) error
	// Recv returns the ID up to which all batches are acked.
	Recv() (uint64, error)
	// CloseSend ends the sending side.
	CloseSend() error
}

// Replayer is a Stream whose receiver speaks first.
type Replayer interface {
	Stream
	// Hello returns the receiver's first message: the Unix ms since which
	// it wants the records received again, or 0.
	Hello() (replaySinceMs int64, err error)
	// SendCaughtUp sends a batch marked as the one with which the replay
	// reached the journal's end.
	SendCaughtUp(batchID uint64, records [][]byte) error
}

// helloTimeout bounds the wait for a Replayer's first message.
const helloTimeout = 10 * time.Second

// Opener opens a stream; the stream lives as long as ctx.
type Opener func(ctx context.Context) (Stream, error)

// Journal is what a forwarder reads (journal.Journal).
type Journal interface {
	Read(from uint64, max int) ([]journal.Entry, error)
	Wait(ctx context.Context, index uint64) error
	Cursor(name string) uint64
	SetCursor(name string, index uint64)
	Search(after func(payload []byte) bool) (uint64, error)
	Next() uint64
}

// Options size a Forwarder.
type Options struct {
	// MaxBatch is the most records per batch.
	MaxBatch int
	// Window is the most unacked batches in flight.
	Window int
	// Want selects the records this receiver gets, by their journal
	// bytes (recordwire); nil means all.
	Want func(record []byte) bool
}

type batch struct {
	id   uint64
	next uint64 // journal index after the batch's last record
}

// Forwarder streams the journal to one receiver.
type Forwarder struct {
	target string
	open   Opener
	j      Journal
	opts   Options
	log    *slog.Logger

	batches, records, sessions, resends, replays prometheus.Counter
	delay                                        prometheus.Observer
	lag                                          prometheus.GaugeFunc
}

// Metrics are the forwarding series, shared by all targets.
type Metrics struct {
	batches, records, sessions, resends, replays *prometheus.CounterVec
	delay                                        *prometheus.HistogramVec
	reg                                          prometheus.Registerer
}

// NewMetrics registers the forwarding metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		batches:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_batches_total", Help: "Batches sent, by target."}, []string{"target"}),
		records:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_records_total", Help: "Records sent, by target."}, []string{"target"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_sessions_total", Help: "Stream sessions opened, by target."}, []string{"target"}),
		resends:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_resumed_total", Help: "Sessions that resumed with records sent before but not acked, by target."}, []string{"target"}),
		replays:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_ingest_forward_replays_total", Help: "Sessions whose receiver asked for the records of the last minutes again (a restarted svc-rts), by target."}, []string{"target"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shindo_ingest_forward_delay_seconds",
			Help:    "From a record's receipt to its batch handed to the stream, by target (records sent again after a reconnection or a replay included).",
			Buckets: []float64{.001, .002, .005, .01, .02, .03, .05, .075, .1, .15, .25, .5, 1, 10}}, []string{"target"}),
		reg: reg,
	}
	reg.MustRegister(m.batches, m.records, m.sessions, m.resends, m.replays, m.delay)
	return m
}

// New returns a forwarder of j to target, reading from cursor target.
func New(target string, open Opener, j Journal, opts Options, m *Metrics, log *slog.Logger) *Forwarder {
	f := &Forwarder{
		target: target, open: open, j: j, opts: opts, log: log.With(slog.String("target", target)),
		batches: m.batches.WithLabelValues(target), records: m.records.WithLabelValues(target),
		sessions: m.sessions.WithLabelValues(target), resends: m.resends.WithLabelValues(target),
		replays: m.replays.WithLabelValues(target), delay: m.delay.WithLabelValues(target),
	}
	f.lag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shindo_ingest_forward_lag_records", Help: "Journal records not yet acked by the target.",
		ConstLabels: prometheus.Labels{"target": target},
	}, func() float64 { return float64(f.Lag()) })
	m.reg.MustRegister(f.lag)
	return f
}

// Lag returns how many journal records the receiver has not acked yet.
func (f *Forwarder) Lag() uint64 {
	next, cur := f.j.Next(), f.j.Cursor(f.target)
	if cur >= next {
		return 0
	}
	return next - cur
}

// Run streams until ctx ends, reconnecting with backoff.
func (f *Forwarder) Run(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := f.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 5*time.Second {
			backoff = 50 * time.Millisecond
		}
		f.log.WarnContext(ctx, "forward stream ended, reconnecting", slog.Any("error", err), slog.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	return nil
}

// session runs one stream from the saved cursor.
func (f *Forwarder) session(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := f.open(sctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	f.sessions.Inc()
	defer func() { _ = st.CloseSend() }() // ends our half; the stream's own error is what counts

	next := f.j.Cursor(f.target)
	if next < f.j.Next() {
		f.resends.Inc()
	}
	rp, replays := st.(Replayer)
	if replays {
		since, err := hello(sctx, rp)
		if err != nil {
			return err
		}
		if since > 0 {
			from, err := f.indexAt(since)
			if err != nil {
				return fmt.Errorf("find records since %d: %w", since, err)
			}
			f.replays.Inc()
			f.log.InfoContext(ctx, "receiver asked for records again", slog.Int64("since_ms", since), slog.Uint64("records", f.j.Next()-min(from, next)))
			next = min(next, from)
		}
	}
	marked := !replays

	var mu sync.Mutex
	var inflight []batch
	room := make(chan struct{}, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			id, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			n := 0
			for n < len(inflight) && inflight[n].id <= id {
				// A replay sends records behind the cursor: it never
				// moves back.
				if inflight[n].next > f.j.Cursor(f.target) {
					f.j.SetCursor(f.target, inflight[n].next)
				}
				n++
			}
			inflight = inflight[n:]
			mu.Unlock()
			select {
			case room <- struct{}{}:
			default:
			}
		}
	}()

	var batchID uint64
	for {
		mu.Lock()
		full := len(inflight) >= f.opts.Window
		mu.Unlock()
		if full {
			select {
			case <-room:
				continue
			case <-sctx.Done():
				return sctx.Err()
			case err := <-recvErr:
				return fmt.Errorf("receive ack: %w", err)
			}
		}
		if !marked && next >= f.j.Next() {
			batchID++
			mu.Lock()
			inflight = append(inflight, batch{id: batchID, next: next})
			mu.Unlock()
			if err := rp.SendCaughtUp(batchID, nil); err != nil {
				return fmt.Errorf("send caught-up batch %d: %w", batchID, err)
			}
			marked = true
			continue
		}
		entries, err := f.j.Read(next, f.opts.MaxBatch)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			waitCtx, stopWait := context.WithCancel(sctx)
			waited := make(chan error, 1)
			go func() { waited <- f.j.Wait(waitCtx, next) }()
			select {
			case err := <-waited:
				stopWait()
				if err != nil {
					return err
				}
				continue
			case err := <-recvErr:
				stopWait()
				return fmt.Errorf("receive ack: %w", err)
			}
		}
		next = entries[len(entries)-1].Index + 1
		// Passed on as they are: decoding each record here only to encode
		// it again cost about a microsecond a record, at a tick's burst of
		// a thousand stations' packets one after another while the
		// receivers waited (BenchmarkForward). The journal holds what
		// ingest encoded around verified packets (or decoded from the
		// peer), and what it reads back from disk is checked against the
		// frames' checksums.
		recs := make([][]byte, 0, len(entries))
		for _, e := range entries {
			if e.Payload != nil && (f.opts.Want == nil || f.opts.Want(e.Payload)) { // nil: lost to damage on disk
				recs = append(recs, e.Payload)
			}
		}
		if len(recs) == 0 {
			// Nothing for this receiver: move on without a round trip,
			// unless batches before it are still unacked.
			mu.Lock()
			if len(inflight) == 0 {
				f.j.SetCursor(f.target, next)
			} else {
				inflight[len(inflight)-1].next = next
			}
			mu.Unlock()
			continue
		}
		batchID++
		mu.Lock()
		inflight = append(inflight, batch{id: batchID, next: next})
		mu.Unlock()
		if err := st.Send(batchID, recs); err != nil {
			return fmt.Errorf("send batch %d: %w", batchID, err)
		}
		f.batches.Inc()
		f.records.Add(float64(len(recs)))
		now := time.Now().UnixMilli()
		for _, r := range recs {
			f.delay.Observe(max(0, float64(now-recordwire.RecvAt(r))/1000))
		}
	}
}

// hello waits for a Replayer's first message.
func hello(ctx context.Context, rp Replayer) (int64, error) {
	type result struct {
		since int64
		err   error
	}
	got := make(chan result, 1)
	// On a timeout the session's context ends the stream, and with it
	// this Recv.
	go func() {
		since, err := rp.Hello()
		got <- result{since, err}
	}()
	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	select {
	case r := <-got:
		if r.err != nil {
			return 0, fmt.Errorf("receive first message: %w", r.err)
		}
		return r.since, nil
	case <-timer.C:
		return 0, errors.New("receiver sent no first message within " + helloTimeout.String())
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// indexAt returns the index of the first record kept that was received at
// or after ms (Unix ms). Receipt times follow journal order within the
// clock's steps, so a binary search finds it; an unreadable record counts
// as older.
func (f *Forwarder) indexAt(ms int64) (uint64, error) {
	return f.j.Search(func(payload []byte) bool { return recordwire.RecvAt(payload) >= ms })
}

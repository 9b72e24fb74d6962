// Package rtsgrpc is svc-rts's transport: the RTSService gRPC handlers, the
// tick loop that turns engine state into snapshots every 500 ms, the
// fan-out of snapshots (with their detections) to subscribers, and the
// hand-off to a Publisher for delivery beyond gRPC.
//
// A tick that holds traced packets (records whose trace_context ingest
// set) is traced too: its span is a child of the first such packet's and
// links the others, and its context goes out with the snapshot on the
// Subscribe streams and in the NATS headers, so the edges' work on it
// joins the packet's trace.
package rtsgrpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/fanout"
	"shindo.dev/lib/service"
	"shindo.dev/lib/telemetry"
	"shindo.dev/svc-rts/internal/detectpb"
	"shindo.dev/svc-rts/internal/shake"
)

// subscriberBuffer is how many snapshots a subscriber may fall behind
// before it is disconnected: 4 s of ticks.
const subscriberBuffer = 8

// Publisher delivers the output of the tick loop beyond the Subscribe
// streams (the message cluster, SPEC §2.7). Both methods are called from
// the tick loop, in tick order, and must not block it: queue or drop.
type Publisher interface {
	// PublishSnapshot receives every snapshot; ctx carries the tick's
	// span when the tick is traced.
	PublishSnapshot(context.Context, *rtsv1.Snapshot)
	// PublishDetection receives a detection whenever its serial differs
	// from the one last published for its ID: new detections, updates and
	// the final one, each once. Consumers deduplicate by (ID, serial).
	PublishDetection(context.Context, *rtsv1.Detection)
}

// Archive keeps the snapshots sent, for GetSnapshot of a past tick
// (ticklog.Log). Append is called from the tick loop and must not block.
type Archive interface {
	Append(*rtsv1.Snapshot)
	At(ms int64) (*rtsv1.Snapshot, error)
}

// Archive errors At may return, mapped to gRPC statuses.
var (
	ErrNotArchived = errors.New("tick not archived")
	ErrNotYet      = errors.New("tick not computed yet")
)

// Server implements rtsv1.RTSServiceServer and runs the tick loop.
type Server struct {
	rtsv1.UnimplementedRTSServiceServer

	engine   *shake.Engine
	site     string
	maxDelay time.Duration
	grace    time.Duration // after the quorum
	log      *slog.Logger
	now      func() time.Time
	stopping <-chan struct{}

	// hub fans out each tick's snapshot with its trace context.
	hub       *fanout.Hub[*rtsv1.SubscribeResponse]
	publisher Publisher
	archive   Archive
	serials   map[string]uint32 // last serial seen per listed detection

	// The traced packets applied since the last tick, which the next
	// tick's span parents and links; at most maxTickLinks.
	tracer   trace.Tracer
	tracedMu sync.Mutex
	traced   []trace.SpanContext

	// Rebuilding after a start: the detections are moved through the
	// records since replaySince (Unix ms) before the first tick; warm is
	// closed once they have been, or after rebuildWait without a sender.
	replaySince int64
	rebuildWait time.Duration
	warm        atomic.Pointer[chan struct{}]
	warmOnce    sync.Once
	started     time.Time
	replayed    atomic.Uint64 // records applied while rebuilding
	gaveUp      atomic.Bool   // the rebuild ended without the whole window

	// Continuity of the detections' input (PeerState): since when (Unix
	// ms) it has been unbroken; whether a break since then is still to be
	// mended from the peer; when a record was last applied (Unix ms, wall
	// clock) and whether the input is out now. kick wakes the peer loop.
	continuous  atomic.Int64
	broken      atomic.Bool
	lastApplied atomic.Int64
	outage      atomic.Bool
	restarts    uint64 // the engine's, as last seen by the tick loop
	peer        Peer
	peerWithin  time.Duration
	kick        chan struct{}
	peerAsks    *prometheus.CounterVec

	records     *prometheus.CounterVec
	ticks       prometheus.Counter
	closed      *prometheus.CounterVec
	tickCompute prometheus.Histogram
	tickLate    prometheus.Histogram
	online      prometheus.Gauge
	carried     prometheus.Counter
	detections  prometheus.Counter
	updates     prometheus.Counter
	active      prometheus.Gauge
}

// New returns a server for engine at site. A tick is emitted as soon as
// every online station delivered its frame, and at the latest maxDelay
// after the tick time.
func New(engine *shake.Engine, site string, maxDelay time.Duration, stopping <-chan struct{}, reg prometheus.Registerer, log *slog.Logger) *Server {
	s := &Server{
		stopping: stopping,
		engine:   engine,
		site:     site,
		maxDelay: maxDelay,
		log:      log,
		now:      time.Now,
		hub:      fanout.New[*rtsv1.SubscribeResponse](0),
		tracer:   telemetry.Tracer("shindo.dev/svc-rts"),
		serials:  map[string]uint32{},
		kick:     make(chan struct{}, 1),
		peerAsks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_rts_peer_state_asks_total",
			Help: "Times this core, its detections' input broken, asked the peer core for its detection state, by result: adopted, not_older (the peer's input broke later), failed (no answer, or one refused).",
		}, []string{"result"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_rts_records_total", Help: "Records received from ingest, by result.",
		}, []string{"result"}),
		ticks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_rts_ticks_total", Help: "Snapshots computed.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_rts_ticks_closed_total",
			Help: "Ticks by what closed them: complete (every awaited station's frame in), quorum (the tick-quorum share in, then the grace without another frame), deadline (tick-max-delay).",
		}, []string{"by"}),
		tickCompute: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shindo_rts_tick_compute_seconds", Help: "Time to compute one snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
		tickLate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shindo_rts_tick_emit_delay_seconds", Help: "Time between a tick's time and its snapshot being published.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12),
		}),
		online: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shindo_rts_stations_online", Help: "Stations in the latest snapshot.",
		}),
		carried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_rts_station_values_carried_total",
			Help: "Station values in snapshots carried over from an earlier frame: the station's frame for the tick was late (after the tick's deadline) or lost.",
		}),
		detections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_rts_detections_total", Help: "Detections declared (new IDs).",
		}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_rts_detection_serials_total", Help: "Detection serials published, the first ones included.",
		}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shindo_rts_detections_listed", Help: "Detections in the latest snapshot, final ones included.",
		}),
	}
	reg.MustRegister(s.peerAsks, s.records, s.ticks, s.closed, s.tickCompute, s.tickLate, s.online, s.carried, s.detections, s.updates, s.active,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_rts_detection_replayed_ticks_total", Help: "Ticks of detections recomputed because frames arrived after their tick.",
		}, func() float64 { return float64(engine.ReplayedTicks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_rts_detection_founding_holds_total", Help: "Ticks a new detection was held back because a station that could have founded it was late.",
		}, func() float64 { return float64(engine.HeldFoundings()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shindo_rts_subscribers", Help: "Connected snapshot subscribers.",
		}, func() float64 { n, _ := s.hub.Stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shindo_rts_rebuilding", Help: "1 while the detections are rebuilt from replayed records at start, before the first tick.",
		}, func() float64 {
			if s.warmed() {
				return 0
			}
			return 1
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "shindo_rts_subscribers_dropped_total", Help: "Subscribers disconnected for falling behind.",
		}, func() float64 { _, d := s.hub.Stats(); return float64(d) }))
	warm := make(chan struct{})
	close(warm) // until SetRebuild
	s.warm.Store(&warm)
	s.continuous.Store(s.now().UnixMilli())
	s.lastApplied.Store(s.now().UnixMilli())
	return s
}

// SetRebuild makes the server rebuild its detections before the first tick:
// it asks the ingest stream for the records of the last window again, moves
// the detections through them, and emits its first snapshot once the sender
// has caught up — after wait at the latest, starting afresh then. window
// should cover a detection's life (detect MaxDuration and Linger), so that
// a restarted core names an earthquake in progress as its peer does. Call it
// before Run.
func (s *Server) SetRebuild(window, wait time.Duration) {
	if window <= 0 {
		return
	}
	s.started = s.now()
	s.replaySince = s.started.Add(-window).UnixMilli()
	s.rebuildWait = wait
	warm := make(chan struct{})
	s.warm.Store(&warm)
}

// Warm is closed once the server computes snapshots: at once, or after the
// rebuild that SetRebuild asked for.
func (s *Server) Warm() <-chan struct{} { return *s.warm.Load() }

func (s *Server) warmed() bool {
	select {
	case <-s.Warm():
		return true
	default:
		return false
	}
}

// becomeWarm ends the rebuild; complete tells whether the records of the
// whole window were replayed, or the detections start without them.
func (s *Server) becomeWarm(why string, complete bool) {
	s.warmOnce.Do(func() {
		s.log.Info("detections rebuilt", slog.String("how", why), slog.Uint64("records", s.replayed.Load()),
			slog.Duration("took", s.now().Sub(s.started)))
		if complete {
			s.continuous.Store(s.replaySince)
		} else {
			s.gaveUp.Store(true)
			s.broke("the rebuild gave up")
		}
		close(*s.warm.Load())
	})
}

// SetPublisher hands every snapshot and detection update to p as well. Call
// it before Run.
func (s *Server) SetPublisher(p Publisher) { s.publisher = p }

// SetArchive keeps every snapshot in a, which then answers GetSnapshot for
// past ticks. Call it before Run.
func (s *Server) SetArchive(a Archive) { s.archive = a }

// Ingest applies batches of records and acks each one after applying it.
func (s *Server) Ingest(stream rtsv1.RTSService_IngestServer) error {
	return service.EndOnStop(s.stopping, func() error { return s.ingest(stream) })
}

// ingest speaks first (asking for the replay while rebuilding), then
// applies and acks batches. While rebuilding, the detections follow the
// newest frame applied, OfflineAfterMs behind it as the tick loop's
// deadline keeps them behind the clock, until the sender marks that it
// has caught up.
func (s *Server) ingest(stream rtsv1.RTSService_IngestServer) error {
	var since int64
	if !s.warmed() {
		since = s.replaySince
	}
	if err := stream.Send(&rtsv1.IngestResponse{ReplaySinceMs: since}); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if since != 0 && s.gaveUp.Load() {
			// The rest of the replay would only hold back the records
			// of now, which the ticks wait for: ingest reconnects and
			// resumes where this core acked, without it. The
			// detections come from the peer core meanwhile (broke).
			return status.Error(codes.Aborted, "the rebuild gave up: resume without the replay")
		}
		rebuilding := !s.warmed()
		var newest int64
		for _, rec := range req.GetRecords() {
			result, end := s.apply(rec)
			s.records.WithLabelValues(result).Inc()
			if result == "applied" {
				newest = max(newest, end)
				// A replayed record's trace ended long ago.
				if !rebuilding && len(rec.GetTraceContext()) > 0 {
					s.noteTraced(rec)
				}
			}
		}
		// Once a batch: the clock is read per batch, not per record.
		switch {
		case newest == 0:
		case rebuilding:
			s.lastApplied.Store(s.now().UnixMilli()) // replayed: old by design
		default:
			s.noteApplied(newest)
		}
		if rebuilding {
			s.replayed.Add(uint64(len(req.GetRecords())))
			if newest > 0 {
				s.engine.Advance(newest - shake.OfflineAfterMs)
			}
			if req.GetCaughtUp() {
				s.becomeWarm("replayed the records of the last minutes", true)
			}
		}
		if err := stream.Send(&rtsv1.IngestResponse{AckedBatchId: req.GetBatchId()}); err != nil {
			return err
		}
	}
}

// maxTickLinks bounds the traced packets one tick's span refers to.
const maxTickLinks = 32

// noteTraced keeps the span context of a traced record for the next tick.
// It reads nothing but the record: the stream's own span (the Ingest call,
// as long as the session) is no packet's.
func (s *Server) noteTraced(rec *ingestv1.Record) {
	sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), rec.GetTraceContext()))
	if !sc.IsValid() {
		return
	}
	s.tracedMu.Lock()
	if len(s.traced) < maxTickLinks {
		s.traced = append(s.traced, sc)
	}
	s.tracedMu.Unlock()
}

// startTick starts the span of tick t when traced packets were applied
// since the last tick: a child of the first, linking the others. Without
// any it returns ctx and a span that records nothing (not ctx's own, which
// the caller's End must not end).
func (s *Server) startTick(ctx context.Context, t int64) (context.Context, trace.Span) {
	s.tracedMu.Lock()
	traced := s.traced
	s.traced = nil
	s.tracedMu.Unlock()
	if len(traced) == 0 {
		return ctx, noop.Span{}
	}
	links := make([]trace.Link, 0, len(traced)-1)
	for _, sc := range traced[1:] {
		links = append(links, trace.Link{SpanContext: sc})
	}
	return s.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, traced[0]), "rts tick",
		trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int64("shindo.tick_ms", t), attribute.Int("shindo.traced_packets", len(traced))))
}

// apply applies a record and returns its result and, when applied, its
// frame's window end.
func (s *Server) apply(rec *ingestv1.Record) (string, int64) {
	p := rec.GetPacket()
	f := p.GetIntensity()
	if f == nil {
		return "ignored", 0
	}
	ok := s.engine.Apply(p.GetStationId(), shake.Frame{
		WindowEndMs: f.GetWindowEndMs(),
		Intensity:   f.GetIntensity(),
		PGA:         f.GetPgaGal(),
		PGV:         f.GetPgvCms(),
		SvaCms:      f.GetSvaCms(),
		P:           detectpb.FromPWave(f.GetPWave()),
	})
	if !ok {
		return "rejected", 0
	}
	return "applied", f.GetWindowEndMs()
}

// Subscribe streams snapshots until the client leaves or falls behind.
func (s *Server) Subscribe(req *rtsv1.SubscribeRequest, stream rtsv1.RTSService_SubscribeServer) error {
	sub, latest, hasLatest, _ := s.hub.Subscribe(subscriberBuffer, nil)
	defer s.hub.Unsubscribe(sub)
	ctx := stream.Context()
	s.log.InfoContext(ctx, "subscriber joined", slog.String("subscriber", req.GetSubscriber()))
	// The newest snapshot goes out at once, so a reconnecting edge has data
	// without waiting for the next tick.
	if hasLatest {
		if err := stream.Send(latest); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Dropped:
			s.log.WarnContext(ctx, "subscriber dropped, fell behind", slog.String("subscriber", req.GetSubscriber()))
			return status.Error(codes.ResourceExhausted, "subscriber fell behind")
		case <-s.stopping:
			return status.Error(codes.Unavailable, "server shutting down")
		case resp := <-sub.C:
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// GetSnapshot returns the latest snapshot, or the one of a past tick from
// the archive.
func (s *Server) GetSnapshot(ctx context.Context, req *rtsv1.GetSnapshotRequest) (*rtsv1.GetSnapshotResponse, error) {
	t := req.GetTimeMs()
	resp, _ := s.hub.Latest()
	latest := resp.GetSnapshot()
	switch {
	case t == 0:
		return &rtsv1.GetSnapshotResponse{Snapshot: latest}, nil
	case t < 0:
		return nil, status.Error(codes.InvalidArgument, "time_ms: a Unix time in ms, or 0 for the latest")
	case latest != nil && t-t%shake.TickMs == latest.GetTimeMs():
		return &rtsv1.GetSnapshotResponse{Snapshot: latest}, nil
	case s.archive == nil:
		return nil, status.Error(codes.FailedPrecondition, "this core keeps no archive of past ticks")
	}
	snap, err := s.archive.At(t)
	switch {
	case errors.Is(err, ErrNotYet):
		return nil, status.Error(codes.OutOfRange, "tick not computed yet")
	case errors.Is(err, ErrNotArchived):
		return nil, status.Error(codes.NotFound, "tick not archived at this core")
	case err != nil:
		s.log.ErrorContext(ctx, "archive read failed", slog.Int64("time_ms", t), slog.Any("error", err))
		return nil, status.Error(codes.Internal, "archive read failed")
	}
	return &rtsv1.GetSnapshotResponse{Snapshot: snap}, nil
}

// Run emits one snapshot per tick until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if !s.warmed() {
		wait := time.NewTimer(s.rebuildWait)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil
		case <-s.Warm():
		case <-wait.C:
			s.log.WarnContext(ctx, "no ingest stream caught up within the rebuild wait: detections start afresh", slog.Duration("wait", s.rebuildWait))
			s.becomeWarm("gave up waiting", false)
			// Before the first tick, so that this core does not found
			// detections its peer knows under other IDs.
			s.askPeer(ctx)
		}
		wait.Stop()
	}
	peerDone := make(chan struct{})
	defer func() { <-peerDone }()
	go func() {
		defer close(peerDone)
		s.peerLoop(ctx)
	}()
	next := nextTick(s.now())
	for {
		by, ok := s.close(ctx, next)
		if !ok {
			return nil
		}
		s.closed.WithLabelValues(by).Inc()
		s.emit(ctx, next)
		s.watchInput(ctx)
		next += shake.TickMs
		// After a stall, skip ahead rather than replaying stale ticks.
		if now := nextTick(s.now()); now-next > shake.OfflineAfterMs {
			s.log.WarnContext(ctx, "tick loop fell behind, skipping ticks", slog.Int64("from", next), slog.Int64("to", now))
			next = now
		}
	}
}

// close waits until tick t may be computed: every awaited station has
// delivered (complete), or the quorum has and then the grace passed
// without another frame for t (quorum), or the deadline came (deadline);
// never before the tick itself, when frames ending at it cannot all be in
// yet whatever the count says. It reports false when ctx ends.
//
// The grace starts again at each frame that arrives after the quorum: the
// stations that make up the rest are mostly the tail of the same burst,
// queued behind it, and a tick that closed while they were still coming
// would show each of them half a second late, in the next tick. A frame
// lost on its way never comes, so the tick closes the grace after the last
// one that did.
func (s *Server) close(ctx context.Context, t int64) (by string, ok bool) {
	complete, quorum := s.engine.Await(t), s.engine.Quorum()
	tickTime := time.UnixMilli(t)
	deadline := time.NewTimer(time.Until(tickTime.Add(s.maxDelay)))
	defer deadline.Stop()
	grace := time.NewTimer(0)
	grace.Stop()
	defer grace.Stop()
	var arrivals <-chan struct{}
	var graceDone <-chan time.Time
	for by == "" {
		select {
		case <-ctx.Done():
			return "", false
		case <-complete:
			by = "complete"
		case <-quorum:
			quorum, arrivals, graceDone = nil, s.engine.Arrivals(), grace.C
			grace.Reset(max(time.Until(tickTime), 0) + s.grace)
		case <-arrivals:
			grace.Reset(max(time.Until(tickTime), 0) + s.grace)
		case <-graceDone:
			by = "quorum"
		case <-deadline.C:
			by = "deadline"
		}
	}
	if wait := time.Until(tickTime); wait > 0 {
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(wait):
		}
	}
	return by, true
}

// SetQuorumGrace sets how long after the quorum of a tick's frames (the
// engine's TickQuorum), or after the last frame that came since, the tick
// closes without the rest. Call it before Run; 0 closes at the quorum.
func (s *Server) SetQuorumGrace(d time.Duration) { s.grace = d }

func (s *Server) emit(ctx context.Context, t int64) {
	ctx, span := s.startTick(ctx, t)
	defer span.End()
	start := time.Now()
	snap := s.engine.Snapshot(t)
	if t%60_000 == 0 {
		s.engine.Forget(t)
	}
	pb := toProto(snap, s.site)
	s.tickCompute.Observe(time.Since(start).Seconds())
	s.hub.Publish(&rtsv1.SubscribeResponse{Snapshot: pb, TraceContext: telemetry.Inject(ctx)})
	if s.archive != nil {
		s.archive.Append(pb)
	}
	if s.publisher != nil {
		s.publisher.PublishSnapshot(ctx, pb)
	}
	s.detectionUpdates(ctx, pb.GetDetections())
	s.ticks.Inc()
	s.online.Set(float64(len(snap.Stations)))
	s.carried.Add(float64(carried(snap)))
	s.tickLate.Observe(s.now().Sub(time.UnixMilli(t)).Seconds())
}

// carried counts the station values of a snapshot that are not the tick's
// own (shake.StationValue.AgeMs, age_ms on the wire): how often a tick
// closed on its deadline without a station's frame.
func carried(snap shake.Snapshot) int {
	n := 0
	for _, v := range snap.Stations {
		if v.AgeMs > 0 {
			n++
		}
	}
	return n
}

// detectionUpdates counts new detections and serials and hands each new
// (ID, serial) to the publisher.
func (s *Server) detectionUpdates(ctx context.Context, ds []*rtsv1.Detection) {
	s.active.Set(float64(len(ds)))
	listed := make(map[string]bool, len(ds))
	for _, d := range ds {
		listed[d.GetId()] = true
		last, known := s.serials[d.GetId()]
		if known && last == d.GetSerial() {
			continue
		}
		if !known {
			s.detections.Inc()
			s.log.InfoContext(ctx, "detection", slog.String("id", d.GetId()), slog.Float64("lat", d.GetLat()), slog.Float64("lon", d.GetLon()),
				slog.Float64("magnitude", d.GetMagnitude()), slog.Int("max_level", int(d.GetMaxLevel())))
		}
		s.serials[d.GetId()] = d.GetSerial()
		s.updates.Inc()
		if s.publisher != nil {
			s.publisher.PublishDetection(ctx, d)
		}
	}
	for id := range s.serials {
		if !listed[id] {
			delete(s.serials, id)
		}
	}
}

// nextTick returns the first tick time (Unix ms, multiple of 500) at or
// after now.
func nextTick(now time.Time) int64 {
	ms := now.UnixMilli()
	return (ms + shake.TickMs - 1) / shake.TickMs * shake.TickMs
}

func toProto(snap shake.Snapshot, site string) *rtsv1.Snapshot {
	pb := &rtsv1.Snapshot{
		TimeMs:   snap.TimeMs,
		Site:     site,
		Stations: make([]*rtsv1.StationState, len(snap.Stations)),
		Boxes:    make([]*rtsv1.BoxLevel, len(snap.Boxes)),
		Areas:    make([]*rtsv1.AreaLevel, len(snap.Areas)),
	}
	if len(snap.Detections) > 0 {
		pb.Detections = make([]*rtsv1.Detection, len(snap.Detections))
	}
	for i, v := range snap.Stations {
		pb.Stations[i] = &rtsv1.StationState{
			StationId: v.ID, Pga: v.PGA, Pgv: v.PGV,
			Intensity: v.Intensity, DisplayIntensity: v.Display, Alert: v.Alert,
			AgeMs: uint32(v.AgeMs),
		}
	}
	for i, b := range snap.Boxes {
		pb.Boxes[i] = &rtsv1.BoxLevel{BoxId: b.ID, Level: b.Level}
	}
	for i, a := range snap.Areas {
		pb.Areas[i] = &rtsv1.AreaLevel{Code: a.ID, Level: a.Level}
	}
	for i, d := range snap.Detections {
		pb.Detections[i] = detectpb.Detection(d)
	}
	return pb
}

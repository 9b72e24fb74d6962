// Package detectsync keeps the metadata database's detections and reports
// up to date from the core's NATS server: it consumes the stream of
// natsbus.Detections (every detection update svc-rts publishes) with a
// durable consumer, upserts each detection (a newer serial wins), and turns every
// final detection into an earthquake report.
//
// Both cores' data APIs do this against the one database, each from its
// own core's stream, in any order and any number of times: a report's ID
// is derived from its detection's ID alone, detections are upserted by
// serial, and reports are merged (metadb.MergeDetectionReport), so the
// result is the same whoever writes first.
//
// A detection does not carry per-area intensities; the reports get them
// from the core's snapshots (natsbus.Snapshots, plain NATS): the
// highest level of each township over the detection's span, from its first
// trigger to its end. The same snapshots give each report its stations'
// peaks (PGA, PGV, intensity of every station at level 1 or more), kept
// per peakBucketMs, so a report's span is widened to whole buckets. Snapshots are not stored, so a data API that was
// down during an event contributes no areas; the other core's data API
// does, and merging keeps the union. Areas lit by another event at the
// same time are included.
package detectsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/telemetry"
	"shindo.dev/lib/township"
)

// Durable is the consumer's name: every data API of a core shares it.
const Durable = "shindo-dataapi"

// areaHistory is how long snapshots' areas are kept: longer than a
// detection can last (svc-rts ends one 5 minutes after its first trigger
// at the latest) plus the time its final update may take to arrive.
const areaHistory = 15 * time.Minute

// Store is what the consumer needs of the metadata database
// (metadb.Store).
type Store interface {
	UpsertDetection(ctx context.Context, d metadb.Detection) (bool, error)
	MergeDetectionReport(ctx context.Context, r metadb.Report) (*metadb.Report, bool, error)
}

// Syncer consumes detections into the database.
type Syncer struct {
	nc      *nats.Conn
	site    string
	store   Store
	log     *slog.Logger
	timeout time.Duration
	tracer  trace.Tracer

	areas areaLog
	peaks peakLog
	// snaps are the snapshots received and not yet recorded. The
	// connection's reader puts each in as it comes, in the server's
	// order, so a final detection, which it hands over after the
	// snapshots before it, is handled once those are recorded
	// (drainSnapshots): its report has the areas they lit.
	snaps chan *nats.Msg
	// subscribed is closed once the server holds the snapshots'
	// subscription (Ready): a snapshot published before is not seen.
	subscribed chan struct{}

	handled *prometheus.CounterVec
}

// New returns a syncer for site's NATS connection nc. timeout bounds each
// database write.
func New(nc *nats.Conn, site string, store Store, timeout time.Duration, reg prometheus.Registerer, log *slog.Logger) *Syncer {
	s := &Syncer{nc: nc, site: site, store: store, log: log, timeout: timeout, tracer: telemetry.Tracer("shindo.dev/svc-dataapi"),
		subscribed: make(chan struct{}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_dataapi_detection_updates_total",
			Help: "Detection updates consumed from JetStream, by result (applied, stale, report, malformed, retry, conflict).",
		}, []string{"result"})}
	reg.MustRegister(s.handled)
	return s
}

// Run consumes until ctx ends. It waits for the stream to exist (svc-rts
// creates it) and retries after NATS or database failures; it returns nil
// when ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	s.snaps = make(chan *nats.Msg, 4096)
	sub, err := s.nc.ChanSubscribe(natsbus.Snapshots.Subject(s.site), s.snaps)
	if err != nil {
		return fmt.Errorf("subscribe to snapshots: %w", err)
	}
	defer sub.Unsubscribe()
	// The server has the subscription once it answered the flush; while
	// NATS is away the client resends it on reconnecting, and the data
	// API's REST, which needs no NATS, should not wait for that.
	if err := s.nc.FlushTimeout(2 * time.Second); err != nil {
		s.log.WarnContext(ctx, "snapshot subscription not confirmed by NATS yet", slog.Any("error", err))
	}
	close(s.subscribed)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-s.snaps:
				s.snapshot(m)
			}
		}
	}()
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	backoff := 200 * time.Millisecond
	for {
		err := s.consume(ctx, js)
		if ctx.Err() != nil {
			return nil
		}
		s.log.WarnContext(ctx, "detection consumer stopped, retrying", slog.Duration("after", backoff), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Ready reports whether the syncer subscribed to its core's snapshots, for
// the service's readiness: a detection handled before would lack the
// areas its snapshots lit.
func (s *Syncer) Ready(context.Context) error {
	select {
	case <-s.subscribed:
		return nil
	default:
		return errors.New("not yet subscribed to the core's snapshots")
	}
}

func (s *Syncer) consume(ctx context.Context, js jetstream.JetStream) error {
	stream, err := js.Stream(ctx, natsbus.Detections.Stream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", natsbus.Detections.Stream(), err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       Durable,
		Description:   "svc-dataapi: detections and reports into the metadata database",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", Durable, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return err
		}
		s.handle(ctx, msg)
	}
}

// handle applies one detection update and acknowledges it, or asks for it
// again later when the database is unavailable. One that is not a
// detection — corrupt, or stored by a version of svc-rts that published the
// bare detection, before natsbus — is dropped, counted as malformed. It
// works under a span in the trace of the tick that published the update,
// when the tick was traced (the message headers carry its context).
func (s *Syncer) handle(ctx context.Context, msg jetstream.Msg) {
	ctx, span := s.tracer.Start(telemetry.ExtractNATS(ctx, msg.Headers()), "dataapi detection",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attribute.String("messaging.destination.name", msg.Subject())))
	defer span.End()
	pub, err := natsbus.Detections.Decode(msg.Data())
	if err == nil && pub.GetDetection().GetId() == "" {
		err = errors.New("no detection id")
	}
	if err != nil {
		s.handled.WithLabelValues("malformed").Inc()
		s.log.WarnContext(ctx, "malformed detection dropped", slog.String("subject", msg.Subject()), slog.Any("error", err))
		span.SetStatus(codes.Error, "malformed")
		s.settled("term", msg.Term())
		return
	}
	s.drainSnapshots()
	d := FromProto(pub.GetDetection())
	span.SetAttributes(attribute.String("shindo.detection", d.ID), attribute.Int("shindo.serial", int(d.Serial)))
	result, err := s.apply(ctx, d)
	switch {
	case errors.Is(err, metadb.ErrInvalid):
		s.handled.WithLabelValues("malformed").Inc()
		s.log.WarnContext(ctx, "invalid detection dropped", slog.String("id", d.ID), slog.Any("error", err))
		s.settled("term", msg.Term())
	case errors.Is(err, metadb.ErrConflict):
		s.handled.WithLabelValues("conflict").Inc()
		s.log.ErrorContext(ctx, "report of detection conflicts with another report", slog.String("id", d.ID), slog.Any("error", err))
		s.settled("ack", msg.Ack())
	case err != nil:
		s.handled.WithLabelValues("retry").Inc()
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "detection not stored, will retry", slog.String("id", d.ID), slog.Any("error", err))
		}
		s.settled("nak", msg.NakWithDelay(time.Second))
	default:
		s.handled.WithLabelValues(result).Inc()
		s.settled("ack", msg.Ack())
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.String("shindo.result", result))
}

// settled notes an ack, term or nak that did not reach the NATS server
// (the connection is down or closing). Nothing is lost: the server
// delivers the message again after the consumer's ack wait, and handling
// a detection again changes nothing (see the package comment), so it is
// worth a debug line, not a warning.
func (s *Syncer) settled(how string, err error) {
	if err != nil {
		s.log.Debug("reply to a detection not sent; it will be delivered again", slog.String("reply", how), slog.Any("error", err))
	}
}

func (s *Syncer) apply(ctx context.Context, d metadb.Detection) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	applied, err := s.store.UpsertDetection(ctx, d)
	if err != nil {
		return "", err
	}
	result := "stale"
	if applied {
		result = "applied"
	}
	if !d.Final {
		return result, nil
	}
	// Also for a stale final update: the report may not have been written
	// when the detection was (a crash in between), and merging is
	// idempotent.
	r := ReportOf(d, s.areas.max(d.FirstTriggerMs, d.UpdatedMs))
	r.Stations = s.peaks.max(d.FirstTriggerMs, d.UpdatedMs)
	if _, changed, err := s.store.MergeDetectionReport(ctx, r); err != nil {
		return "", err
	} else if changed {
		result = "report"
	}
	return result, nil
}

// drainSnapshots records the snapshots received so far.
func (s *Syncer) drainSnapshots() {
	for {
		select {
		case m := <-s.snaps:
			s.snapshot(m)
		default:
			return
		}
	}
}

// snapshot records a snapshot's areas and station peaks. One that does not decode is lost
// as a snapshot the server dropped would be: the next is half a second
// away.
func (s *Syncer) snapshot(m *nats.Msg) {
	pub, err := natsbus.Snapshots.Decode(m.Data)
	if err != nil {
		return
	}
	snap := pub.GetSnapshot()
	s.peaks.add(snap.GetTimeMs(), snap.GetStations())
	if len(snap.GetAreas()) == 0 {
		return
	}
	areas := make([]metadb.AreaLevel, 0, len(snap.GetAreas()))
	for _, a := range snap.GetAreas() {
		if a.GetLevel() <= metadb.MaxLevel {
			areas = append(areas, metadb.AreaLevel{Code: a.GetCode(), Level: int(a.GetLevel())})
		}
	}
	s.areas.add(snap.GetTimeMs(), areas)
}

// FromProto converts a published detection.
func FromProto(p *rtsv1.Detection) metadb.Detection {
	return metadb.Detection{
		ID: p.GetId(), Serial: p.GetSerial(), Final: p.GetFinal(), OriginTimeMs: p.GetOriginTimeMs(),
		Lat: p.GetLat(), Lon: p.GetLon(), DepthKm: p.GetDepthKm(), Magnitude: p.GetMagnitude(),
		Location: p.GetLocation(), LocationCode: p.GetLocationCode(), MaxLevel: int(p.GetMaxLevel()),
		FirstTriggerMs: p.GetFirstTriggerMs(), UpdatedMs: p.GetUpdatedMs(), Stations: p.GetStations(),
	}
}

// taiwan is Taiwan's time zone, in which report IDs are written.
var taiwan = time.FixedZone("Asia/Taipei", 8*3600)

// ReportID derives a report's ID from its detection's, in the form the
// clients of the compatible routes know from the Central Weather
// Administration's reports — "<ROC year>000-<YYYY>-<MMDD>-<hhmmss>" of the
// event in Taiwan time, where the "000" serial marks a report without an
// official number — followed by "-<box>", the rest of the detection ID,
// so that two detections starting in the same second stay apart. A
// detection ID not of the form "<ms>-<box>" gives "det-<ID>".
func ReportID(detectionID string) string {
	ms, box, ok := strings.Cut(detectionID, "-")
	t, err := strconv.ParseInt(ms, 10, 64)
	if ok && err == nil && t >= 0 && t <= metadb.MaxTimeMs && box != "" {
		id := time.UnixMilli(t).In(taiwan).Format("2006-0102-150405")
		roc := time.UnixMilli(t).In(taiwan).Year() - 1911
		id = fmt.Sprintf("%03d000-%s-%s", max(roc, 0), id, box)
		if metadb.CheckReportID(id) == nil {
			return id
		}
	}
	id := "det-" + detectionID
	if metadb.CheckReportID(id) == nil {
		return id
	}
	return fmt.Sprintf("det-%x", detectionID)[:min(64, 4+2*len(detectionID))]
}

// ReportOf derives the report of a final detection with the given areas:
// the detection's estimates rounded as reports print them (position to
// 0.01°, depth and magnitude to 0.1), its location in the Central Weather
// Administration's form from the rounded epicentre (花蓮縣政府南南西方 11.4
// 公里 (位於花蓮縣壽豐鄉): the apps read the place between 位於 and the
// closing parenthesis, TREM-Lite's report speech throws without it,
// src/js/index/core/audio.js:303 of ExpTechTW/TREM-Lite at 9bbaccf), and
// its first trigger as "trem".
func ReportOf(d metadb.Detection, areas []metadb.AreaLevel) metadb.Report {
	lat, lon := round(d.Lat, 2), round(d.Lon, 2)
	r := metadb.Report{
		ID: ReportID(d.ID), TimeMs: d.OriginTimeMs, Lat: lat, Lon: lon,
		DepthKm: math.Max(0, round(d.DepthKm, 1)), Magnitude: round(d.Magnitude, 1), Location: township.ReportLocation(lat, lon),
		MaxLevel: d.MaxLevel, Areas: areas, SourceDetectionID: d.ID, TremMs: max(d.FirstTriggerMs, 0),
	}
	for _, a := range areas {
		r.MaxLevel = max(r.MaxLevel, a.Level)
	}
	return r
}

func round(f float64, places int) float64 {
	p := math.Pow10(places)
	return math.Round(f*p) / p
}

// areaLog keeps recent snapshots' per-township levels.
type areaLog struct {
	mu      sync.Mutex
	entries []tickAreas // in arrival order
	latest  int64
}

type tickAreas struct {
	timeMs int64
	areas  []metadb.AreaLevel
}

func (l *areaLog) add(timeMs int64, areas []metadb.AreaLevel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latest = max(l.latest, timeMs)
	cut := l.latest - areaHistory.Milliseconds()
	kept := l.entries[:0]
	for _, e := range l.entries {
		if e.timeMs >= cut {
			kept = append(kept, e)
		}
	}
	l.entries = append(kept, tickAreas{timeMs, areas})
}

// max returns the highest level of each township over [from, to], ordered
// by code.
func (l *areaLog) max(from, to int64) []metadb.AreaLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	levels := map[uint32]int{}
	for _, e := range l.entries {
		if e.timeMs < from || e.timeMs > to {
			continue
		}
		for _, a := range e.areas {
			if l, ok := levels[a.Code]; !ok || a.Level > l {
				levels[a.Code] = a.Level
			}
		}
	}
	out := make([]metadb.AreaLevel, 0, len(levels))
	for code, level := range levels {
		out = append(out, metadb.AreaLevel{Code: code, Level: level})
	}
	slices.SortFunc(out, func(a, b metadb.AreaLevel) int { return int(a.Code) - int(b.Code) })
	return out
}

// Station peaks are kept per peakBucketMs of snapshot time: a big event
// lights a thousand stations for minutes, and a per-tick log of them
// would hold millions of values.
const (
	peakBucketMs = 5000
	// feltIntensity is JMA level 1: the stations a report lists.
	feltIntensity = 0.5
)

// peakLog keeps recent snapshots' station peaks, per bucket.
type peakLog struct {
	mu      sync.Mutex
	buckets map[int64]map[string]metadb.StationPeak // by bucket start, then station
	latest  int64
}

// add records the stations of a snapshot made at timeMs that felt
// something, with their values bounded as the database bounds them.
func (l *peakLog) add(timeMs int64, states []*rtsv1.StationState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[int64]map[string]metadb.StationPeak{}
	}
	if timeMs > l.latest {
		l.latest = timeMs
		cut := timeMs - areaHistory.Milliseconds()
		for start := range l.buckets {
			if start+peakBucketMs <= cut {
				delete(l.buckets, start)
			}
		}
	}
	start := timeMs - timeMs%peakBucketMs
	if start+peakBucketMs <= l.latest-areaHistory.Milliseconds() {
		return
	}
	for _, st := range states {
		in := st.GetIntensity()
		if !(in >= feltIntensity) || st.GetStationId() == "" || len(st.GetStationId()) > 64 {
			continue
		}
		b := l.buckets[start]
		if b == nil {
			b = map[string]metadb.StationPeak{}
			l.buckets[start] = b
		}
		p := b[st.GetStationId()]
		p.StationID = st.GetStationId()
		p.Intensity = max(p.Intensity, min(in, 10))
		p.PGAGal = max(p.PGAGal, bounded(st.GetPga(), 10_000))
		p.PGVCms = max(p.PGVCms, bounded(st.GetPgv(), 1_000))
		b[p.StationID] = p
	}
}

// bounded is v within [0, hi], 0 when it is not a number.
func bounded(v, hi float32) float32 {
	if !(v >= 0) {
		return 0
	}
	return min(v, hi)
}

// max returns each station's highest values over the buckets that
// overlap [from, to], by station ID.
func (l *peakLog) max(from, to int64) []metadb.StationPeak {
	l.mu.Lock()
	defer l.mu.Unlock()
	peaks := map[string]metadb.StationPeak{}
	for start, b := range l.buckets {
		if start+peakBucketMs <= from || start > to {
			continue
		}
		for id, p := range b {
			q, ok := peaks[id]
			if !ok {
				peaks[id] = p
				continue
			}
			q.PGAGal, q.PGVCms, q.Intensity = max(q.PGAGal, p.PGAGal), max(q.PGVCms, p.PGVCms), max(q.Intensity, p.Intensity)
			peaks[id] = q
		}
	}
	out := slices.Collect(maps.Values(peaks))
	slices.SortFunc(out, func(a, b metadb.StationPeak) int { return strings.Compare(a.StationID, b.StationID) })
	return out
}

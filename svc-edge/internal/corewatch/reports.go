package corewatch

import (
	"bytes"
	"cmp"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// reportPage is how many of the newest reports a core's watch starts with
// (the data API's watch.ReportPage).
const reportPage = 50

// Feed announces earthquake reports on the report topic. Reports are
// written at the cores (posted by an operator's system, or derived from a
// final detection) minutes after the shaking; every core's data API
// pushes each report created or changed, as the database notifies it, on
// its WatchReports stream (Watch), which starts with the newest page.
// The edge watches every core and the feed takes each report once: both
// cores read the one replicated database, so they push the same reports,
// and a report is queued only when it is new or its md5 changed.
//
// A queued report is announced at a tick chosen from its data: the first
// tick at least delay after the report last changed (its updated_ms, the
// database's clock). Every edge thus announces it in the event of the same
// tick, with the same event ID, and a client that switches entrance
// resumes there without missing or repeating it. A report received only
// after its tick (no core reachable for longer than delay) goes out at the
// next one.
type Feed struct {
	delay time.Duration
	queue func([]Pending)
	log   *slog.Logger

	mu   sync.Mutex            // receive is called by every core's watch
	seen map[string]seenReport // by report ID: the reports received lately
	// primed: a first page was received. Of it, only reports that changed
	// within the last delay+recent are queued, so an edge that starts does
	// not announce every report of the past again, yet one that restarts
	// announces what changed while it was away.
	primed bool
	recent time.Duration

	received, announced prometheus.Counter
}

// seenReport is what the feed remembers of a report.
type seenReport struct {
	md5             string
	timeMs, updated int64
}

// Pending is a report waiting for its tick.
type Pending struct {
	Due  int64 // tick, Unix ms
	ID   string
	Data json.RawMessage // the report as the REST list gives it
}

func NewFeed(delay, recent time.Duration, queue func([]Pending), log *slog.Logger) *Feed {
	return &Feed{
		delay:  delay,
		recent: recent,
		queue:  queue,
		log:    log,
		seen:   map[string]seenReport{},
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_reports_received_total", Help: "Reports received from the cores' watches (each core's, the first pages included)."}),
		announced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_reports_queued_total", Help: "New or revised reports queued for the report topic."}),
	}
}

func (f *Feed) Collectors() []prometheus.Collector {
	return []prometheus.Collector{f.received, f.announced}
}

// receive takes one message of a core's watch: the newest page (initial)
// or reports that changed. It queues those new to the edge, or changed
// since it last saw them and not older than what it saw: the other core
// may push a version the edge already has, or, a moment late, an older
// one. A report without an ID or with a negative updated_ms is skipped.
func (f *Feed) receive(reports []*datav1.Report, initial bool, now time.Time) {
	f.received.Add(float64(len(reports)))
	f.mu.Lock()
	defer f.mu.Unlock()
	var changed []Pending
	for _, r := range reports {
		id, updated := r.GetId(), r.GetUpdatedMs()
		if id == "" || updated < 0 {
			f.log.Warn("report without an ID or update time skipped", slog.String("report", id))
			continue
		}
		if s, ok := f.seen[id]; ok && (s.md5 == r.GetMd5() || updated < s.updated) {
			continue
		}
		f.seen[id] = seenReport{md5: r.GetMd5(), timeMs: r.GetTimeMs(), updated: updated}
		if initial && !f.primed && now.Sub(time.UnixMilli(updated)) > f.delay+f.recent {
			continue
		}
		data, err := reportJSON(r)
		if err != nil {
			f.log.Warn("report not rendered", slog.String("report", id), slog.Any("error", err))
			continue
		}
		changed = append(changed, Pending{Due: dueTick(updated, f.delay), ID: id, Data: data})
	}
	if initial {
		f.primed = true
	}
	f.forgetOld()
	if len(changed) > 0 {
		f.announced.Add(float64(len(changed)))
		f.queue(changed)
	}
}

// forgetOld bounds the memory to a few pages: past four, it keeps the
// newest two by origin time. A report a core's first page may still hold
// is among them (a page is the newest by origin time), so a reconnecting
// watch announces nothing again; an old report revised later is new to
// the feed, and announced, as it should be.
func (f *Feed) forgetOld() {
	if len(f.seen) <= 4*reportPage {
		return
	}
	type kept struct {
		id string
		seenReport
	}
	all := make([]kept, 0, len(f.seen))
	for id, s := range f.seen {
		all = append(all, kept{id, s})
	}
	slices.SortFunc(all, func(a, b kept) int { return cmp.Or(cmp.Compare(b.timeMs, a.timeMs), cmp.Compare(b.id, a.id)) })
	for _, k := range all[2*reportPage:] {
		delete(f.seen, k.id)
	}
}

// reportJSONOptions are the data API gateway's: the report topic carries
// a report exactly as GET /v1/reports lists it.
var reportJSONOptions = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

// reportJSON renders a report as the REST list gives it: without its
// areas, compact (protojson may add a space after a comma, differently
// from one build to another; every edge must send the same bytes).
func reportJSON(r *datav1.Report) (json.RawMessage, error) {
	if len(r.GetAreas()) > 0 {
		r = proto.CloneOf(r)
		r.Areas = nil
	}
	b, err := reportJSONOptions.Marshal(r)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// tickMs is the RTS tick.
const tickMs = 500

// dueTick is the first tick at least delay after updatedMs.
func dueTick(updatedMs int64, delay time.Duration) int64 {
	t := updatedMs + delay.Milliseconds()
	return (t + tickMs - 1) / tickMs * tickMs
}

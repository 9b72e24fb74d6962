package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reportPage is how many of the newest reports each poll reads: a report
// revised after this many newer ones were issued is not announced again.
const reportPage = 50

// maxReportBody bounds one poll's answer (50 reports are a few tens of KB).
const maxReportBody = 4 << 20

// reportFeed announces earthquake reports on the report topic. Reports are
// written at the cores (posted by an operator's system, or derived from a
// final detection) minutes after the shaking, so the feed polls the newest
// page of the report list through the data-API routing every few seconds
// — a conditional GET, answered 304 while nothing changed — and queues
// every report that is new or whose md5 changed. Polling through the
// routing needs no further connection to the cores, survives the loss of
// either, and reads the one replicated database both write to, so every
// edge finds the same reports.
//
// A queued report is announced at a tick chosen from its data: the first
// tick at least delay after the report last changed (its updated_ms, the
// database's clock). Every edge thus announces it in the event of the same
// tick, with the same event ID, and a client that switches entrance
// resumes there without missing or repeating it. A report found only after
// its tick (a poll failed for longer than delay) goes out at the next one.
type reportFeed struct {
	client *http.Client
	every  time.Duration
	delay  time.Duration
	queue  func([]pendingReport)
	log    *slog.Logger

	seen map[string]string // report ID → md5 of the reports read lately
	etag string
	// primed: the first page was read. Of it, only reports that changed
	// within the last delay+recent are queued, so an edge that starts does
	// not announce every report of the past again, yet one that restarts
	// announces what changed while it was away.
	primed bool
	recent time.Duration

	polls, failures, announced prometheus.Counter
}

// pendingReport is a report waiting for its tick.
type pendingReport struct {
	due  int64 // tick, Unix ms
	id   string
	data json.RawMessage // the report as the list gives it
}

func newReportFeed(transport http.RoundTripper, every, delay, recent time.Duration, queue func([]pendingReport), log *slog.Logger) *reportFeed {
	return &reportFeed{
		client: &http.Client{Transport: transport, Timeout: 5 * time.Second},
		every:  every,
		delay:  delay,
		recent: recent,
		queue:  queue,
		log:    log,
		seen:   map[string]string{},
		polls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_report_polls_total", Help: "Polls of the cores' report list."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_report_poll_failures_total", Help: "Polls of the report list that failed."}),
		announced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_reports_queued_total", Help: "New or revised reports queued for the report topic."}),
	}
}

func (f *reportFeed) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.polls, f.failures, f.announced}
}

// Run polls until ctx ends. A failed poll is logged (once per run of
// failures) and retried at the next interval.
func (f *reportFeed) Run(ctx context.Context) error {
	t := time.NewTicker(f.every)
	defer t.Stop()
	failing := false
	for {
		err := f.poll(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			f.log.Warn("report list poll failed; retrying", "err", err)
		case err == nil && failing:
			f.log.Info("report list poll recovered")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// reportHead is what the feed reads of a report list item. The 64-bit
// integers of the list are JSON strings (protojson).
type reportHead struct {
	ID        string `json:"id"`
	MD5       string `json:"md5"`
	UpdatedMs string `json:"updated_ms"`
	updated   int64  // UpdatedMs read
}

// parseReportPage reads a page of GET /v1/reports: every report as given,
// and what the feed needs of each. A report without an ID or a readable
// updated_ms fails the page.
func parseReportPage(body []byte) ([]json.RawMessage, []reportHead, error) {
	var page struct {
		Reports []json.RawMessage `json:"reports"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, nil, fmt.Errorf("report list: %w", err)
	}
	heads := make([]reportHead, len(page.Reports))
	for i, it := range page.Reports {
		h := &heads[i]
		err := json.Unmarshal(it, h)
		if err == nil {
			h.updated, err = strconv.ParseInt(h.UpdatedMs, 10, 64)
		}
		if err != nil || h.ID == "" || h.updated < 0 {
			return nil, nil, fmt.Errorf("report list: item %d: want id and updated_ms", i)
		}
	}
	return page.Reports, heads, nil
}

// poll reads the newest page once and queues what changed.
func (f *reportFeed) poll(ctx context.Context) error {
	f.polls.Inc()
	changed, err := f.read(ctx, time.Now())
	if err != nil {
		f.failures.Inc()
		return err
	}
	if len(changed) > 0 {
		f.announced.Add(float64(len(changed)))
		f.queue(changed)
	}
	return nil
}

// read fetches the page and returns the reports to announce.
func (f *reportFeed) read(ctx context.Context, now time.Time) ([]pendingReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://core/v1/reports?page_size=%d", reportPage), nil)
	if err != nil {
		return nil, err
	}
	if f.etag != "" {
		req.Header.Set("If-None-Match", f.etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, nil
	case http.StatusOK:
	default:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("report list: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReportBody+1))
	if err != nil {
		return nil, fmt.Errorf("report list: %w", err)
	}
	if len(body) > maxReportBody {
		return nil, errors.New("report list: answer too large")
	}
	items, heads, err := parseReportPage(body)
	if err != nil {
		return nil, err
	}
	var changed []pendingReport
	for i, h := range heads {
		if md5, ok := f.seen[h.ID]; ok && md5 == h.MD5 {
			continue
		}
		if !f.primed && now.Sub(time.UnixMilli(h.updated)) > f.delay+f.recent {
			continue
		}
		changed = append(changed, pendingReport{due: dueTick(h.updated, f.delay), id: h.ID, data: items[i]})
	}
	f.primed = true
	// A core whose database member lags a moment may answer without the
	// newest report; remembering more than one page keeps that from
	// announcing it twice. What is no longer on the page is forgotten once
	// the memory holds several pages, which bounds it.
	if len(f.seen) > 4*reportPage {
		clear(f.seen)
	}
	for _, h := range heads {
		f.seen[h.ID] = h.MD5
	}
	f.etag = resp.Header.Get("ETag")
	return changed, nil
}

// tickMs is the RTS tick.
const tickMs = 500

// dueTick is the first tick at least delay after updatedMs.
func dueTick(updatedMs int64, delay time.Duration) int64 {
	t := updatedMs + delay.Milliseconds()
	return (t + tickMs - 1) / tickMs * tickMs
}

package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// reportList is a core's report list: newest first, tagged by version.
type reportList struct {
	mu      sync.Mutex
	items   []string // JSON of each report
	version int
	status  int    // answer this status instead, if set
	body    string // answer this body instead, if set
}

func (l *reportList) set(items ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items, l.status, l.body = items, 0, ""
	l.version++
}

func (l *reportList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.URL.Path != "/v1/reports" || r.URL.Query().Get("page_size") != "50" {
		http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
		return
	}
	switch {
	case l.status != 0:
		http.Error(w, "down", l.status)
		return
	case l.body != "":
		io.WriteString(w, l.body)
		return
	}
	tag := fmt.Sprintf(`"v%d"`, l.version)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", tag)
	fmt.Fprintf(w, `{"reports":[%s],"next_page_token":""}`, strings.Join(l.items, ","))
}

// toServer sends the feed's requests for http://core/ to a test server.
type toServer struct{ base *url.URL }

func (t toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = t.base.Scheme, t.base.Host
	return http.DefaultTransport.RoundTrip(r)
}

func report(id, md5 string, updatedMs int64) string {
	return fmt.Sprintf(`{"id":%q,"time_ms":"1700000000000","lat":23.8,"lon":121.6,"md5":%q,"updated_ms":"%d"}`, id, md5, updatedMs)
}

// TestReportFeed: the first page queues only what changed lately; after
// that every new report and every change of md5 is queued once, at the
// first tick at least the delay after it changed; an unchanged list costs
// a 304; a failing or malformed answer is an error, not a crash, and
// queues nothing.
func TestReportFeed(t *testing.T) {
	t.Parallel()
	list := &reportList{}
	srv := httptest.NewServer(list)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	var (
		mu     sync.Mutex
		queued []pendingReport
	)
	f := newReportFeed(toServer{base}, 20*time.Millisecond, 5*time.Second, time.Minute,
		func(rs []pendingReport) { mu.Lock(); queued = append(queued, rs...); mu.Unlock() },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.UnixMilli(1_800_000_000_000) // a tick
	ms := now.UnixMilli()
	ctx := context.Background()
	read := func() string {
		t.Helper()
		rs, err := f.read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s@%+d", r.id, r.due-ms))
			if !strings.Contains(string(r.data), fmt.Sprintf(`"id":%q`, r.id)) {
				t.Errorf("report %s queued as %s", r.id, r.data)
			}
		}
		return strings.Join(out, " ")
	}

	// An edge starts: a report of an hour ago is not announced again, one
	// of 10 s ago is (a restarted edge announces what changed meanwhile).
	list.set(report("B", "b1", ms-10_000), report("A", "a1", ms-3_600_000))
	if got := read(); got != "B@-5000" {
		t.Fatalf("first page queued %q", got)
	}
	if got := read(); got != "" {
		t.Fatalf("unchanged list queued %q", got)
	}
	// A new report and a revision of an old one, each due at the first
	// tick 5 s after it changed.
	list.set(report("C", "c1", ms+1), report("B", "b1", ms-10_000), report("A", "a2", ms-200))
	if got := read(); got != "C@+5500 A@+5000" {
		t.Fatalf("changes queued %q", got)
	}

	// Bad answers: errors, nothing queued, and the next good answer is
	// read in full.
	for _, bad := range []struct {
		status int
		body   string
	}{
		{http.StatusServiceUnavailable, ""},
		{0, "not json"},
		{0, `{"reports":[{"id":"D","md5":"d"}]}`},           // no updated_ms
		{0, `{"reports":[{"id":"","updated_ms":"1"}]}`},     // no id
		{0, `{"reports":[{"id":"D","updated_ms":"soon"}]}`}, // not a number
		{0, `{"reports":` + strings.Repeat(" ", maxReportBody) + `[]}`},
	} {
		list.mu.Lock()
		list.status, list.body = bad.status, bad.body
		list.mu.Unlock()
		if rs, err := f.read(ctx, now); err == nil {
			t.Errorf("answer %d %.40q: no error, queued %v", bad.status, bad.body, rs)
		}
	}
	list.set(report("D", "d1", ms), report("C", "c1", ms+1), report("B", "b1", ms-10_000), report("A", "a2", ms-200))
	if got := read(); got != "D@+5000" {
		t.Fatalf("after errors queued %q", got)
	}

	// Run polls until its context ends, queueing what changed.
	list.set(report("E", "e1", ms), report("D", "d1", ms))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- f.Run(runCtx) }()
	for deadline := time.Now().Add(5 * time.Second); ; {
		mu.Lock()
		n := len(queued)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run queued nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(queued) != 1 || queued[0].id != "E" {
		t.Fatalf("Run queued %v", queued)
	}
}

// TestReportTopic: queued reports go out as one event per tick, at their
// due tick, after its snapshot — IDs "<tick>-2" — and a client resuming
// from before gets them in order; a report revised before its tick goes
// out once, as revised; an edge without a data API refuses the topic.
func TestReportTopic(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	tick := func(ms int64) { t.Helper(); serveTick(t, st, a, ms) }

	if resp, _ := openStream(t, url, "topics=rts,report", ""); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("report topic without a data API: %d", resp.StatusCode)
	}
	st.reports = true

	tick(500)
	st.queueReports([]pendingReport{
		{due: 1000, id: "B", data: []byte(`{"id":"B"}`)},
		{due: 1000, id: "A", data: []byte(`{"id":"A","v":1}`)},
		{due: 2000, id: "C", data: []byte(`{"id":"C"}`)},
	})
	st.queueReports([]pendingReport{{due: 1000, id: "A", data: []byte(`{"id":"A","v":2}`)}})
	_, blocks := openStream(t, url, "topics=rts,report", "")
	if got := eventID(t, blocks); got != "500-0" {
		t.Fatalf("latest %s", got)
	}
	waitClients(t, st.hub, 1)
	tick(1000)
	tick(1500)
	tick(2000)
	want := []string{
		"id: 1000-0",
		"id: 1000-2\ndata: [{\"id\":\"A\",\"v\":2},{\"id\":\"B\"}]",
		"id: 1500-0",
		"id: 2000-0",
		"id: 2000-2\ndata: [{\"id\":\"C\"}]",
	}
	for _, w := range want {
		select {
		case b := <-blocks:
			if !strings.HasPrefix(b, w) {
				t.Fatalf("event %q, want %q…", b, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event, want %q", w)
		}
	}

	// Resuming from the first snapshot replays the rest, in order; the
	// report topic alone gets only its events.
	_, blocks = openStream(t, url, "topics=rts,report", "1000-0")
	for _, w := range []string{"1000-2", "1500-0", "2000-0", "2000-2"} {
		if got := eventID(t, blocks); got != w {
			t.Fatalf("replay %s, want %s", got, w)
		}
	}
	_, blocks = openStream(t, url, "topics=report", "500-0")
	for _, w := range []string{"1000-2", "2000-2"} {
		if got := eventID(t, blocks); got != w {
			t.Fatalf("report replay %s, want %s", got, w)
		}
	}
}

// FuzzParseReportPage: any answer is read or refused, never a panic; what
// is read has an ID and an update time for every report.
func FuzzParseReportPage(f *testing.F) {
	f.Add([]byte(`{"reports":[` + report("A", "a", 1) + `],"next_page_token":""}`))
	f.Add([]byte(`{"reports":[]}`))
	f.Add([]byte(`{"reports":[{"id":"A","updated_ms":"-1"}]}`))
	f.Add([]byte(`{"reports":[{"id":"A","updated_ms":1}]}`))
	f.Add([]byte(`{"reports":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		items, heads, err := parseReportPage(body)
		if err != nil {
			return
		}
		if len(items) != len(heads) {
			t.Fatalf("%d items, %d heads", len(items), len(heads))
		}
		for _, h := range heads {
			if h.ID == "" || h.updated < 0 {
				t.Fatalf("head %+v", h)
			}
		}
	})
}

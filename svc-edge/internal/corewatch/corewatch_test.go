package corewatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/poll"
	datav1 "shindo.dev/gen/shindo/data/v1"
)

func report(id, md5 string, updatedMs int64) *datav1.Report {
	return &datav1.Report{Id: id, TimeMs: 1_700_000_000_000, Lat: 23.8, Lon: 121.6, Md5: md5, UpdatedMs: updatedMs}
}

// queued collects what a feed queues.
type queued struct {
	mu sync.Mutex
	rs []Pending
}

func (q *queued) add(rs []Pending) { q.mu.Lock(); q.rs = append(q.rs, rs...); q.mu.Unlock() }

// take returns what was queued since the last take, as "<id>@<due - ms>".
func (q *queued) take(ms int64) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, r := range q.rs {
		out = append(out, fmt.Sprintf("%s@%+d", r.ID, r.Due-ms))
	}
	q.rs = nil
	return strings.Join(out, " ")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReportFeed: the first page queues only what changed lately; after
// that every new report and every change of md5 is queued once, at the
// first tick at least the delay after it changed, whichever core sends it
// and however often; an older version than the one seen is not queued;
// a report without an ID is skipped.
func TestReportFeed(t *testing.T) {
	t.Parallel()
	q := &queued{}
	f := NewFeed(5*time.Second, time.Minute, q.add, quiet())
	now := time.UnixMilli(1_800_000_000_000) // a tick
	ms := now.UnixMilli()

	// An edge starts: a report of an hour ago is not announced again, one
	// of 10 s ago is (a restarted edge announces what changed meanwhile).
	page := []*datav1.Report{report("B", "b1", ms-10_000), report("A", "a1", ms-3_600_000)}
	f.receive(page, true, now)
	if got := q.take(ms); got != "B@-5000" {
		t.Fatalf("first page queued %q", got)
	}
	// The other core's first page, and a reconnection's, hold nothing new.
	f.receive(page, true, now)
	if got := q.take(ms); got != "" {
		t.Fatalf("same page queued %q", got)
	}
	// A new report and a revision of an old one, each due at the first
	// tick 5 s after it changed; the other core pushes them too.
	changes := []*datav1.Report{report("C", "c1", ms+1), report("A", "a2", ms-200)}
	f.receive(changes, false, now)
	f.receive(changes, false, now)
	if got := q.take(ms); got != "C@+5500 A@+5000" {
		t.Fatalf("changes queued %q", got)
	}
	// A core a moment late pushes the version before: not queued.
	f.receive([]*datav1.Report{report("A", "a1", ms-3_600_000)}, false, now)
	// Nor is a report without an ID or update time.
	f.receive([]*datav1.Report{report("", "x", ms), report("D", "d1", -1)}, false, now)
	if got := q.take(ms); got != "" {
		t.Fatalf("stale or bad reports queued %q", got)
	}
	if got := testutil.ToFloat64(f.received); got != 11 {
		t.Fatalf("reports received %v, want 11", got)
	}
}

// TestReportFeedForgets: the memory of reports stays within a few pages,
// and forgetting never makes a page announce a report again.
func TestReportFeedForgets(t *testing.T) {
	t.Parallel()
	q := &queued{}
	f := NewFeed(5*time.Second, time.Minute, q.add, quiet())
	now := time.UnixMilli(1_800_000_000_000)
	var newest []*datav1.Report
	for i := range 10 * reportPage {
		r := report(fmt.Sprintf("R%04d", i), "m", now.UnixMilli())
		r.TimeMs += int64(i)
		f.receive([]*datav1.Report{r}, false, now)
		newest = append([]*datav1.Report{r}, newest...)
	}
	if len(f.seen) > 4*reportPage {
		t.Fatalf("%d reports remembered", len(f.seen))
	}
	q.take(0)
	f.receive(newest[:reportPage], true, now)
	if got := q.take(0); got != "" {
		t.Fatalf("the newest page again queued %q", got)
	}
}

// TestReportJSON: a report on the report topic is what GET /v1/reports
// lists (the data API's gateway: proto names, defaults, 64-bit integers as
// strings, compact), without areas even if a core sent them.
func TestReportJSON(t *testing.T) {
	t.Parallel()
	r := &datav1.Report{Id: "113000-2024-0403-075809", TimeMs: 1712102289000, Lat: 23.77, Lon: 121.67, DepthKm: 15.5,
		Magnitude: 7.2, Location: "花蓮縣政府南南東方 25.0 公里", MaxLevel: 7, Md5: "0123456789abcdef0123456789abcdef",
		CreatedMs: 1712102400000, UpdatedMs: 1712102401000, Areas: []*datav1.ReportArea{{Code: 970, Level: 7}}}
	got, err := reportJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"113000-2024-0403-075809","time_ms":"1712102289000","lat":23.77,"lon":121.67,"depth_km":15.5,` +
		`"magnitude":7.2,"location":"花蓮縣政府南南東方 25.0 公里","max_level":7,"areas":[],` +
		`"md5":"0123456789abcdef0123456789abcdef","source_detection_id":"","trem_ms":"0",` +
		`"created_ms":"1712102400000","updated_ms":"1712102401000"}`
	if string(got) != want {
		t.Fatalf("report JSON\n%s\nwant\n%s", got, want)
	}
	if len(r.GetAreas()) != 1 {
		t.Fatal("rendering changed the report")
	}
}

// pushReports sends reports on the core's open report watch.
func (c *watchCore) pushReports(rs ...*datav1.Report) {
	c.push <- &datav1.WatchReportsResponse{Reports: rs}
}

// watchCore is a core's data API as the edge's watch sees it, on a real
// gRPC server: each watch gets the current page (all stations) first,
// then what the test pushes, and a heartbeat every 50 ms; mute watches get
// nothing at all.
type watchCore struct {
	datav1.UnimplementedDataServiceServer
	addr     string
	mu       sync.Mutex
	page     []*datav1.Report
	stations []*datav1.Station
	mute     bool
	push     chan *datav1.WatchReportsResponse
	end      chan error // ends the open report watch
	opened   chan struct{}
}

func startWatchCore(t *testing.T) *watchCore {
	t.Helper()
	c := &watchCore{push: make(chan *datav1.WatchReportsResponse), end: make(chan error), opened: make(chan struct{}, 16)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	datav1.RegisterDataServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	c.addr = ln.Addr().String()
	return c
}

func (c *watchCore) WatchReports(_ *datav1.WatchReportsRequest, s grpc.ServerStreamingServer[datav1.WatchReportsResponse]) error {
	c.opened <- struct{}{}
	c.mu.Lock()
	first := &datav1.WatchReportsResponse{Reports: c.page, Initial: true}
	c.mu.Unlock()
	return serveWatch(s.Context(), c.mute, s.Send, first, c.push, c.end)
}

func (c *watchCore) WatchStations(_ *datav1.WatchStationsRequest, s grpc.ServerStreamingServer[datav1.WatchStationsResponse]) error {
	c.mu.Lock()
	var first *datav1.WatchStationsResponse
	if c.stations != nil {
		first = &datav1.WatchStationsResponse{Stations: c.stations, Initial: true}
	}
	c.mu.Unlock()
	return serveWatch(s.Context(), c.mute, s.Send, first, nil, nil)
}

// serveWatch sends first (if any), then what comes on push, and a
// heartbeat every 50 ms, until the client leaves or end gives the error
// to end with; a mute core waits for the client to leave.
func serveWatch[M any](ctx context.Context, mute bool, send func(*M) error, first *M, push <-chan *M, end <-chan error) error {
	if mute {
		<-ctx.Done()
		return nil
	}
	if first != nil {
		if err := send(first); err != nil {
			return err
		}
	}
	beat := time.NewTicker(50 * time.Millisecond)
	defer beat.Stop()
	for {
		m := new(M)
		select {
		case <-beat.C:
		case m = <-push:
		case err := <-end:
			return err
		case <-ctx.Done():
			return nil
		}
		if err := send(m); err != nil {
			return err
		}
	}
}

// TestCoreWatch: the edge watches every core over gRPC; a report both
// cores push is queued once; a watch that ends is opened again (counted)
// and its first page queues nothing again; a core that says nothing, not
// even a heartbeat, is taken for gone and watched again; station lookups
// answer from the pushed stations, and cannot tell before any came.
func TestCoreWatch(t *testing.T) {
	t.Parallel()
	ms := time.Now().UnixMilli()
	a, b, mute := startWatchCore(t), startWatchCore(t), startWatchCore(t)
	for _, c := range []*watchCore{a, b} {
		c.page = []*datav1.Report{report("R1", "r1", ms-1000), report("R0", "r0", ms-3_600_000)}
	}
	a.stations = []*datav1.Station{{Id: "HUA01", Active: true}}
	mute.mute = true
	var conns []*grpc.ClientConn
	for _, c := range []*watchCore{a, b, mute} {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
	}
	q := &queued{}
	w := New([]string{a.addr, b.addr, mute.addr}, conns, NewFeed(5*time.Second, time.Minute, q.add, quiet()), quiet())
	w.silence = 300 * time.Millisecond
	if _, err := w.stations.exists(context.Background(), "HUA01"); err == nil {
		t.Fatal("a station looked up before any core sent its stations")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// waitQueued waits for what the watches queue to end in last.
	var all []string
	waitQueued := func(last string) {
		t.Helper()
		if !poll.Within(5*time.Second, func() bool {
			if got := q.take(0); got != "" {
				all = append(all, strings.Fields(got)...)
			}
			return len(all) > 0 && strings.HasPrefix(all[len(all)-1], last+"@")
		}) {
			t.Fatalf("queued %v, waiting for %s", all, last)
		}
	}
	<-a.opened
	<-b.opened
	a.pushReports(report("R2", "r2", ms))
	b.pushReports(report("R2", "r2", ms))
	a.pushReports(report("R3", "r3", ms))
	waitQueued("R3")
	if got := strings.Join(ids(all), " "); got != "R1 R2 R3" {
		t.Fatalf("queued %s, want R1 R2 R3, each once", got)
	}

	// Core A's watch ends: it is opened again, and counted; its first
	// page again queues nothing.
	a.end <- status.Error(codes.Unavailable, "restarting")
	<-a.opened
	a.pushReports(report("R4", "r4", ms))
	all = nil
	waitQueued("R4")
	if got := strings.Join(ids(all), " "); got != "R4" {
		t.Fatalf("after the reconnection queued %s, want R4", got)
	}
	if got := testutil.ToFloat64(w.reconnects.WithLabelValues(a.addr, "reports")); got != 1 {
		t.Fatalf("reconnects of A's report watch: %v, want 1", got)
	}
	// The mute core's watch is dropped after its silence and opened again.
	for range 3 {
		select {
		case <-mute.opened:
		case <-time.After(5 * time.Second):
			t.Fatal("the silent core's watch was not opened again")
		}
	}

	for id, want := range map[string]bool{"HUA01": true, "TTN01": false} {
		var got bool
		var err error
		if !poll.Within(5*time.Second, func() bool {
			got, err = w.stations.exists(context.Background(), id)
			return err == nil && got == want
		}) {
			t.Fatalf("station %s exists: %v, %v; want %v", id, got, err, want)
		}
	}
}

func ids(queued []string) []string {
	out := make([]string, len(queued))
	for i, q := range queued {
		out[i], _, _ = strings.Cut(q, "@")
	}
	return out
}

// TestStationSet: a core's first message is its whole set, later ones add
// and remove; a change before a core's first message is not taken as its
// set; a station exists when any core has it.
func TestStationSet(t *testing.T) {
	t.Parallel()
	s := newStationSet(2)
	ctx := context.Background()
	st := func(ids ...string) []*datav1.Station {
		var out []*datav1.Station
		for _, id := range ids {
			out = append(out, &datav1.Station{Id: id})
		}
		return out
	}
	check := func(id string, want bool) {
		t.Helper()
		if got, err := s.exists(ctx, id); err != nil || got != want {
			t.Fatalf("exists(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	s.apply(1, &datav1.WatchStationsResponse{Stations: st("B")})
	if _, err := s.exists(ctx, "B"); err == nil {
		t.Fatal("a change before the first message made a set")
	}
	s.apply(0, &datav1.WatchStationsResponse{Stations: st("A", "B"), Initial: true})
	check("A", true)
	check("C", false)
	s.apply(0, &datav1.WatchStationsResponse{Stations: st("C"), RemovedIds: []string{"A"}})
	check("A", false)
	check("C", true)
	s.apply(1, &datav1.WatchStationsResponse{Stations: st("D"), Initial: true})
	check("D", true)
	check("B", true) // core 0 still has it
	s.apply(0, &datav1.WatchStationsResponse{Initial: true})
	check("B", false)
}

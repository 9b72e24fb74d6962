package dataapi

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
	datav1 "shindo.dev/gen/shindo/data/v1"
)

// pushBound is how soon a change must reach a watcher. The data API reads
// everything again only every minute, so a change seen within it was
// pushed on the database's notification.
const pushBound = 3 * time.Second

// TestWatchPushesChanges runs two data APIs, the two cores, on one
// database: a report stored through one reaches a watcher of the other
// within pushBound, as does a report changed in the database by any other
// writer, and a station created, then retired; a watcher starts with the
// newest page and every station; past -max-watchers a watch is refused.
func TestWatchPushesChanges(t *testing.T) {
	db := pgtest.Shared(t).NewDatabase(t)
	a := start(t, testConfig(t, "-database-url", db, "-admin-tokens", adminToken))
	if x := do(t, "POST", a+"/v1/reports", adminToken, report("OLD", 1700000000000, 4.1, 3)); x.code != 200 {
		t.Fatalf("post report: %d %s", x.code, x.body)
	}
	if x := do(t, "POST", a+"/v1/stations", adminToken, map[string]any{"id": "HUA01", "lat": 23.99, "lon": 121.61}); x.code != 200 {
		t.Fatalf("post station: %d %s", x.code, x.body)
	}
	cfgB := testConfig(t, "-database-url", db, "-admin-tokens", adminToken, "-max-watchers", "1")
	start(t, cfgB)

	conn, err := grpc.NewClient(cfgB.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := datav1.NewDataServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The first message is the state: the newest page. Until B has read
	// the database once, a watch is refused as Unavailable.
	var (
		reports grpc.ServerStreamingClient[datav1.WatchReportsResponse]
		initial *datav1.WatchReportsResponse
	)
	poll.Within(pushBound, func() bool {
		reports, err = data.WatchReports(ctx, &datav1.WatchReportsRequest{})
		if err == nil {
			initial, err = reports.Recv()
		}
		return status.Code(err) != codes.Unavailable
	})
	if err != nil {
		t.Fatalf("watch reports: %v", err)
	}
	if !initial.GetInitial() || len(initial.GetReports()) != 1 || initial.GetReports()[0].GetId() != "OLD" ||
		len(initial.GetReports()[0].GetAreas()) != 0 {
		t.Fatalf("initial message %v, want report OLD without areas", initial)
	}
	stationsWatch, err := data.WatchStations(ctx, &datav1.WatchStationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stationsWatch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !first.GetInitial() || len(first.GetStations()) != 1 || !first.GetStations()[0].GetActive() {
		t.Fatalf("initial stations %v", first)
	}

	// -max-watchers 1: a second watch of the reports is refused.
	extra, err := data.WatchReports(ctx, &datav1.WatchReportsRequest{})
	if err == nil {
		_, err = extra.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second watch: %v, want ResourceExhausted", err)
	}

	recvReports := func(what string) []*datav1.Report {
		t.Helper()
		m := recvWithin(t, reports, what)
		if m.GetInitial() {
			t.Fatalf("%s: a change marked initial", what)
		}
		return m.GetReports()
	}

	// A report stored through core A is pushed by core B.
	if x := do(t, "POST", a+"/v1/reports", adminToken, report("NEW", 1700000100000, 5.2, 4)); x.code != 200 {
		t.Fatalf("post report: %d %s", x.code, x.body)
	}
	got := recvReports("new report")
	if len(got) != 1 || got[0].GetId() != "NEW" || got[0].GetMd5() == "" || len(got[0].GetAreas()) != 0 {
		t.Fatalf("pushed %v, want NEW once, without areas", got)
	}

	// An old report changed by another writer, off the API.
	pg, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	if _, err := pg.Exec(ctx, `UPDATE reports SET magnitude = 4.3, md5 = '0123456789abcdef0123456789abcdef', updated_at = now() WHERE id = 'OLD'`); err != nil {
		t.Fatal(err)
	}
	got = recvReports("revised report")
	if len(got) != 1 || got[0].GetId() != "OLD" || got[0].GetMagnitude() != 4.3 || got[0].GetMd5() != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("pushed %v, want OLD revised", got)
	}

	// A station created through A, then retired.
	recvStations := func(what string) *datav1.WatchStationsResponse { t.Helper(); return recvWithin(t, stationsWatch, what) }
	if x := do(t, "POST", a+"/v1/stations", adminToken, map[string]any{"id": "TTN01", "lat": 22.75, "lon": 121.15}); x.code != 200 {
		t.Fatalf("post station: %d %s", x.code, x.body)
	}
	if m := recvStations("new station"); len(m.GetStations()) != 1 || m.GetStations()[0].GetId() != "TTN01" || !m.GetStations()[0].GetActive() {
		t.Fatalf("pushed %v, want TTN01 active", m)
	}
	if x := do(t, "DELETE", a+"/v1/stations/TTN01", adminToken, nil); x.code != 200 {
		t.Fatalf("retire: %d %s", x.code, x.body)
	}
	if m := recvStations("retired station"); len(m.GetStations()) != 1 || m.GetStations()[0].GetId() != "TTN01" || m.GetStations()[0].GetActive() {
		t.Fatalf("pushed %v, want TTN01 retired", m)
	}
	if _, err := pg.Exec(ctx, `DELETE FROM stations WHERE id = 'TTN01'`); err != nil {
		t.Fatal(err)
	}
	if m := recvStations("removed station"); !slices.Equal(m.GetRemovedIds(), []string{"TTN01"}) || len(m.GetStations()) != 0 {
		t.Fatalf("pushed %v, want TTN01 removed", m)
	}
}

// recvWithin receives the next message of a watch, failing the test if
// none comes within pushBound.
func recvWithin[M any](t *testing.T, s grpc.ServerStreamingClient[M], what string) *M {
	t.Helper()
	type result struct {
		m   *M
		err error
	}
	got := make(chan result, 1)
	go func() {
		m, err := s.Recv()
		got <- result{m, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.m
	case <-time.After(pushBound):
		t.Fatalf("%s: not pushed within %s", what, pushBound)
	}
	return nil
}

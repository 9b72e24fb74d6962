package metadb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/lib/metadb"
)

// TestReplicatedStore: writes go to the primary and reads to the local
// member; with the local member unreachable, reads go to the primary; a
// caller that gave up is not retried elsewhere. Two databases stand in for
// the two members, so where each call went shows in what it sees.
func TestReplicatedStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, primaryPool := newStore(t)
	local, localPool := newStore(t)
	if _, _, err := local.CreateReport(ctx, hualienReport("on-local")); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, local, hualien("LOC01"))

	s := metadb.NewReplicatedStore(primaryPool, localPool)
	if _, _, err := s.CreateReport(ctx, hualienReport("written")); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.GetReport(ctx, "written"); err != nil {
		t.Fatalf("the write is not at the primary: %v", err)
	}
	if _, err := s.GetReport(ctx, "on-local"); err != nil {
		t.Fatalf("read of the local member's report: %v", err)
	}
	if _, err := s.GetReport(ctx, "written"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("read went to the primary: err = %v", err)
	}
	list, err := s.ListReports(ctx, metadb.ReportFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID != "on-local" {
		t.Fatalf("list: %v, %v", list, err)
	}
	if _, err := s.GetStation(ctx, "LOC01"); err != nil {
		t.Fatalf("station of the local member: %v", err)
	}
	lv, err := s.DataVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pv, _ := primary.DataVersions(ctx)
	wantLocal, _ := local.DataVersions(ctx)
	if lv != wantLocal || lv == pv {
		t.Fatalf("versions %+v: local has %+v, primary %+v", lv, wantLocal, pv)
	}

	// The local member is down: every read goes to the primary.
	dead, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	s = metadb.NewReplicatedStore(primaryPool, dead)
	if r, err := s.GetReport(ctx, "written"); err != nil || len(r.Areas) == 0 {
		t.Fatalf("read with the local member down: %v, %v", r, err)
	}
	if list, err := s.ListReports(ctx, metadb.ReportFilter{Limit: 10}); err != nil || len(list) != 1 || list[0].ID != "written" {
		t.Fatalf("list with the local member down: %v, %v", list, err)
	}
	if v, err := s.DataVersions(ctx); err != nil || v != pv {
		t.Fatalf("versions with the local member down: %+v, %v (primary %+v)", v, err, pv)
	}
	if _, err := s.ListStations(ctx, metadb.Filter{}); err != nil {
		t.Fatalf("stations with the local member down: %v", err)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.GetReport(canceled, "written"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled read: err = %v, want context.Canceled", err)
	}
}

package metadb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"shindo.dev/lib/metadb"
	"shindo.dev/seismo/seedcode"
)

// seedIDs are station ids for every branch of seedcode.Station's rule:
// ids that are codes, ids cut to their last five letters and digits, ids
// colliding on those (the later ones hashed), ids with none (hashed).
func seedIDs() []string {
	ids := []string{"TAP01", "tap1", "tw-hl-0007", "—", "☃☃", "A"}
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("SIM%05d", i), fmt.Sprintf("TST%05d", i))
	}
	return ids
}

// goCodes are the station codes seedcode.Station gives ids in order, in
// network SH.
func goCodes(ids []string) map[string]string {
	want := map[string]string{}
	taken := map[string]bool{}
	for _, id := range ids {
		c := seedcode.Station(id, func(c string) bool { return taken[c] })
		taken[c] = true
		want[id] = c
	}
	return want
}

// TestSEEDCodesMigrated: migration 0007 gives the stations provisioned
// before it the codes the archive gave them — seedcode.Station's, in the
// order they were provisioned.
func TestSEEDCodesMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := metadb.MigrateTo(ctx, pool, 6); err != nil {
		t.Fatal(err)
	}
	ids := seedIDs()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range ids {
		if _, err := pool.Exec(ctx, `INSERT INTO stations (id, lat, lon, created_at) VALUES ($1, 23.5, 121, $2)`,
			id, start.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if applied, err := metadb.Migrate(ctx, pool); err != nil || len(applied) != metadb.LatestVersion()-6 {
		t.Fatalf("migrate from 6: applied %v, %v", applied, err)
	}
	want := goCodes(ids)
	rows, err := pool.Query(ctx, `SELECT id, seed_net, seed_sta, seed_loc FROM stations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var c seedcode.Codes
		if err := rows.Scan(&id, &c.Network, &c.Station, &c.Location); err != nil {
			t.Fatal(err)
		}
		if c != (seedcode.Codes{Network: "SH", Station: want[id], Location: "00"}) {
			t.Errorf("%q: %v, want SH.%s.00", id, c, want[id])
		}
		n++
	}
	if rows.Err() != nil || n != len(ids) {
		t.Fatalf("read %d stations (%v), want %d", n, rows.Err(), len(ids))
	}
}

// TestSEEDCodesDefault: a station provisioned without codes gets
// seedcode.Station's; given codes are kept, checked, unique and fixed.
func TestSEEDCodesDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	ids := seedIDs()
	want := goCodes(ids)
	for _, id := range ids {
		st := mustCreate(t, s, hualien(id))
		if st.SEED != (seedcode.Codes{Network: "SH", Station: want[id], Location: "00"}) {
			t.Errorf("create %q: %v, want SH.%s.00", id, st.SEED, want[id])
		}
	}
	// As the database gives them to a row inserted by hand.
	if _, err := pool.Exec(ctx, `INSERT INTO stations (id, lat, lon) VALUES ('by-hand-00001', 23.5, 121)`); err != nil {
		t.Fatal(err)
	}
	taken := func(c string) bool { _, ok := reverse(want)[c]; return ok }
	var byHand seedcode.Codes
	if err := pool.QueryRow(ctx, `SELECT seed_net, seed_sta, seed_loc FROM stations WHERE id = 'by-hand-00001'`).Scan(
		&byHand.Network, &byHand.Station, &byHand.Location); err != nil ||
		byHand != (seedcode.Codes{Network: "SH", Station: seedcode.Station("by-hand-00001", taken), Location: "00"}) {
		t.Errorf("inserted by hand: %v, %v", byHand, err)
	}

	given := hualien("HL-given")
	given.SEED = seedcode.Codes{Network: "TW", Station: "HUA", Location: ""}
	mustCreate(t, s, given)
	if got, err := s.GetStation(ctx, "HL-given"); err != nil || got.SEED != given.SEED {
		t.Fatalf("given codes: %+v, %v", got, err)
	}
	again := hualien("HL-again")
	again.SEED = seedcode.Codes{Network: "TW", Station: "HUA", Location: "10"}
	if _, err := s.CreateStation(ctx, again); !errors.Is(err, metadb.ErrExists) {
		t.Errorf("codes taken: %v, want ErrExists", err)
	}
	for _, bad := range []seedcode.Codes{{Network: "TWN", Station: "HUA"}, {Network: "TW", Station: "hua"}, {Network: "TW", Station: "HUA01X"}} {
		ns := hualien("HL-bad")
		ns.SEED = bad
		if _, err := s.CreateStation(ctx, ns); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("codes %v: %v, want ErrInvalid", bad, err)
		}
	}
	for _, sql := range []string{
		`UPDATE stations SET seed_sta = 'OTHER' WHERE id = 'HL-given'`,
		`UPDATE stations SET seed_net = 'XX' WHERE id = 'HL-given'`,
		`UPDATE stations SET seed_loc = '20' WHERE id = 'HL-given'`,
		`INSERT INTO stations (id, lat, lon, seed_net, seed_sta) VALUES ('B', 0, 0, 'SHX', 'B')`,
		`INSERT INTO stations (id, lat, lon, seed_net, seed_sta) VALUES ('B', 0, 0, 'SH', 'b')`,
		`INSERT INTO stations (id, lat, lon, seed_net, seed_sta, seed_loc) VALUES ('B', 0, 0, 'SH', 'B', '000')`,
	} {
		if _, err := pool.Exec(ctx, sql); err == nil {
			t.Errorf("schema accepted %s", sql)
		}
	}
	// The rest of a station stays editable.
	if _, err := pool.Exec(ctx, `UPDATE stations SET name = 'renamed' WHERE id = 'HL-given'`); err != nil {
		t.Errorf("update of the name refused: %v", err)
	}
}

func reverse(m map[string]string) map[string]string {
	r := make(map[string]string, len(m))
	for k, v := range m {
		r[v] = k
	}
	return r
}

package metadb_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/measure"
)

func hualien(id string) metadb.NewStation {
	return metadb.NewStation{ID: id, Name: "Hualien City", Net: "MS", Lat: 23.97, Lon: 121.6, Code: 970}
}

func mustCreate(t *testing.T, s *metadb.Store, ns metadb.NewStation) *registry.Station {
	t.Helper()
	st, err := s.CreateStation(context.Background(), ns)
	if err != nil {
		t.Fatalf("create %q: %v", ns.ID, err)
	}
	return st
}

func TestCreateAndGetStation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)

	given := key(1, 16)
	ns := hualien("HL-01")
	ns.Key = given
	created := mustCreate(t, s, ns)
	given[0] = 0xff // the store must have copied it
	if created.KeyID != 1 || !bytes.Equal(created.CurrentKey(), key(1, 16)) || !created.InService() {
		t.Fatalf("created = %+v", created)
	}

	got, err := s.GetStation(ctx, "HL-01")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Hualien City" || got.Net != "MS" || got.Lat != 23.97 || got.Lon != 121.6 || got.Code != 970 ||
		got.KeyID != 1 || got.KeyHex != hex.EncodeToString(key(1, 16)) || len(got.Previous) != 0 || !got.InService() {
		t.Fatalf("got = %+v", got)
	}
	if k, ok := got.Key(1); !ok || !bytes.Equal(k, key(1, 16)) {
		t.Fatal("key 1 not usable on the station read back")
	}

	generated := mustCreate(t, s, hualien("HL-02"))
	if len(generated.CurrentKey()) != metadb.GeneratedKeyBytes {
		t.Fatalf("generated key of %d bytes", len(generated.CurrentKey()))
	}
	other := mustCreate(t, s, hualien("HL-03"))
	if bytes.Equal(generated.CurrentKey(), other.CurrentKey()) {
		t.Fatal("two generated keys are equal")
	}

	if _, err := s.GetStation(ctx, "nope"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown station: err = %v, want ErrNotFound", err)
	}
}

func TestCreateStationRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("taken"))
	tests := []struct {
		name string
		edit func(*metadb.NewStation)
		want error
	}{
		{"latitude above 90", func(n *metadb.NewStation) { n.Lat = 91 }, metadb.ErrInvalid},
		{"latitude NaN", func(n *metadb.NewStation) { n.Lat = math.NaN() }, metadb.ErrInvalid},
		{"longitude below -180", func(n *metadb.NewStation) { n.Lon = -180.5 }, metadb.ErrInvalid},
		{"longitude infinite", func(n *metadb.NewStation) { n.Lon = math.Inf(1) }, metadb.ErrInvalid},
		{"key of 15 bytes", func(n *metadb.NewStation) { n.Key = key(0, 15) }, metadb.ErrInvalid},
		{"empty key", func(n *metadb.NewStation) { n.Key = []byte{} }, metadb.ErrInvalid},
		{"key of 65 bytes", func(n *metadb.NewStation) { n.Key = key(0, 65) }, metadb.ErrInvalid},
		{"empty id", func(n *metadb.NewStation) { n.ID = "" }, metadb.ErrInvalid},
		{"id of 65 bytes", func(n *metadb.NewStation) { n.ID = strings.Repeat("x", 65) }, metadb.ErrInvalid},
		{"id with newline", func(n *metadb.NewStation) { n.ID = "a\nb" }, metadb.ErrInvalid},
		{"id with NUL", func(n *metadb.NewStation) { n.ID = "a\x00b" }, metadb.ErrInvalid},
		{"id not UTF-8", func(n *metadb.NewStation) { n.ID = "a\xffb" }, metadb.ErrInvalid},
		{"name too long", func(n *metadb.NewStation) { n.Name = strings.Repeat("名", 201) }, metadb.ErrInvalid},
		{"code beyond int32", func(n *metadb.NewStation) { n.Code = math.MaxUint32 }, metadb.ErrInvalid},
		{"duplicate id", func(n *metadb.NewStation) { n.ID = "taken" }, metadb.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := hualien("new-" + strings.ReplaceAll(tt.name, " ", "-"))
			tt.edit(&ns)
			_, err := s.CreateStation(context.Background(), ns)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
	t.Cleanup(func() {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM stations").Scan(&n); err != nil || n != 1 {
			t.Errorf("after refusals: %d stations (%v), want only the one created", n, err)
		}
	})
}

// The schema refuses what the Go validation would, for writers other than
// Store, and Store reports what the schema refuses as domain errors.
func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("A"))
	for _, sql := range []string{
		`INSERT INTO stations (id, lat, lon) VALUES ('B', 91, 0)`,
		`INSERT INTO stations (id, lat, lon) VALUES ('B', 0, 'NaN')`,
		`INSERT INTO stations (id, lat, lon) VALUES ('', 0, 0)`,
		`INSERT INTO stations (id, lat, lon) VALUES (repeat('x', 65), 0, 0)`,
		`INSERT INTO stations (id, lat, lon, code) VALUES ('B', 0, 0, -1)`,
		`UPDATE stations SET active = false WHERE id = 'A'`, // retired without a time
		`INSERT INTO station_keys (station_id, key_id, secret) VALUES ('A', 2, '\x00')`,
		`INSERT INTO station_keys (station_id, key_id, secret) VALUES ('A', 2, repeat('k', 16)::bytea)`, // a second current key
		`INSERT INTO station_keys (station_id, key_id, secret, not_after) VALUES ('A', 4294967296, repeat('k', 16)::bytea, now())`,
		`INSERT INTO station_keys (station_id, key_id, secret, not_after) VALUES ('Z', 2, repeat('k', 16)::bytea, now())`,
		`UPDATE stations SET seq_reset_at = '2019-12-31 23:59:59.999+00' WHERE id = 'A'`,
		`UPDATE stations SET seq_reset_at = '-infinity' WHERE id = 'A'`,
		`UPDATE stations SET seq_reset_at = 'infinity' WHERE id = 'A'`,
		`UPDATE stations SET seq_reset_at = now() + interval '25 hours' WHERE id = 'A'`,
		`INSERT INTO stations (id, lat, lon, seq_reset_at) VALUES ('B', 0, 0, now() + interval '2 days')`,
	} {
		if _, err := pool.Exec(ctx, sql); err == nil {
			t.Errorf("schema accepted %s", sql)
		}
	}
}

func TestUpdateStation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, hualien("A"))
	u := metadb.Update{Name: "Taitung", Net: "SE", Lat: 22.75, Lon: 121.15, Code: 950}
	updated, err := s.UpdateStation(ctx, "A", u)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*registry.Station{updated, got} {
		if st.Name != u.Name || st.Net != u.Net || st.Lat != u.Lat || st.Lon != u.Lon || st.Code != u.Code || st.KeyID != 1 {
			t.Fatalf("after update: %+v", st)
		}
	}
	if _, err := s.UpdateStation(ctx, "A", metadb.Update{Lat: -91}); !errors.Is(err, metadb.ErrInvalid) {
		t.Fatalf("bad latitude: err = %v, want ErrInvalid", err)
	}
	// The instrument: elevation and count size change when given, and are
	// kept when not (the update above gave neither).
	elev, scale := 1234.5, 0.002
	if got.Elevation != 0 || got.Scale() != measure.DefaultScaleGal {
		t.Fatalf("an update without instrument changed it: %+v", got)
	}
	u.Elevation, u.ScaleGal = &elev, &scale
	if st, err := s.UpdateStation(ctx, "A", u); err != nil || st.Elevation != elev || st.Scale() != scale {
		t.Fatalf("instrument update: %+v %v", st, err)
	}
	u.Elevation, u.ScaleGal = nil, nil
	if st, err := s.UpdateStation(ctx, "A", u); err != nil || st.Elevation != elev || st.Scale() != scale {
		t.Fatalf("kept: %+v %v", st, err)
	}
	for _, bad := range []metadb.Update{
		{Name: "x", Net: "SE", Lat: 22, Lon: 121, Code: 950, Elevation: ptr(9001.0)},
		{Name: "x", Net: "SE", Lat: 22, Lon: 121, Code: 950, ScaleGal: ptr(0.0)},
		{Name: "x", Net: "SE", Lat: 22, Lon: 121, Code: 950, ScaleGal: ptr(101.0)},
	} {
		if _, err := s.UpdateStation(ctx, "A", bad); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("update %+v: err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.UpdateStation(ctx, "nope", u); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown station: err = %v, want ErrNotFound", err)
	}
}

// TestStationInstrument: a station's elevation, count size and service
// dates — what its StationXML reports — are stored, defaulted and bounded.
func TestStationInstrument(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	before := time.Now().Add(-time.Minute)
	ns := hualien("HL-E")
	ns.Elevation, ns.ScaleGal = 512.5, 0.0025
	mustCreate(t, s, ns)
	mustCreate(t, s, hualien("HL-D"))
	for id, want := range map[string][2]float64{"HL-E": {512.5, 0.0025}, "HL-D": {0, measure.DefaultScaleGal}} {
		got, err := s.GetStation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Elevation != want[0] || got.ScaleGal != want[1] || got.Created.Before(before) || !got.Retired.IsZero() {
			t.Errorf("%s: elevation %v, scale %v, created %v, retired %v; want %v", id, got.Elevation, got.ScaleGal, got.Created, got.Retired, want)
		}
	}
	for _, bad := range []metadb.NewStation{
		{ID: "E1", Lat: 23, Lon: 121, Elevation: 9001},
		{ID: "E2", Lat: 23, Lon: 121, Elevation: math.NaN()},
		{ID: "E3", Lat: 23, Lon: 121, ScaleGal: -1},
		{ID: "E4", Lat: 23, Lon: 121, ScaleGal: 101},
	} {
		if _, err := s.CreateStation(ctx, bad); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("%s (elevation %v, scale %v): err = %v, want ErrInvalid", bad.ID, bad.Elevation, bad.ScaleGal, err)
		}
	}
}

func TestRetireStation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("A"))
	if err := s.RetireStation(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if got.InService() || got.Active == nil || *got.Active {
		t.Fatalf("retired station in service: %+v", got)
	}
	var retiredAt *time.Time
	if err := pool.QueryRow(ctx, "SELECT retired_at FROM stations WHERE id = 'A'").Scan(&retiredAt); err != nil || retiredAt == nil {
		t.Fatalf("retired_at = %v, %v", retiredAt, err)
	}
	if !got.Retired.Equal(*retiredAt) || !got.Retired.After(got.Created) {
		t.Fatalf("registry says created %v, retired %v; the row retired_at %v", got.Created, got.Retired, *retiredAt)
	}
	for name, err := range map[string]error{
		"retire again": s.RetireStation(ctx, "A"),
		"update":       second(s.UpdateStation(ctx, "A", metadb.Update{})),
		"rotate":       third(s.RotateKey(ctx, "A", time.Hour)),
	} {
		if !errors.Is(err, metadb.ErrRetired) {
			t.Errorf("%s: err = %v, want ErrRetired", name, err)
		}
	}
	if _, err := s.CreateStation(ctx, hualien("A")); !errors.Is(err, metadb.ErrExists) {
		t.Fatalf("reusing a retired ID: err = %v, want ErrExists", err)
	}
	if err := s.RetireStation(ctx, "nope"); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown station: err = %v, want ErrNotFound", err)
	}
}

func TestResetStationSeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	mustCreate(t, s, hualien("A"))
	mustCreate(t, s, hualien("B"))
	if st, err := s.GetStation(ctx, "A"); err != nil || st.SeqResetMs != 0 {
		t.Fatalf("never reset: %+v, %v", st, err)
	}
	version := func() (v int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT version FROM data_versions WHERE name = 'stations'").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()

	// Kept to the millisecond, as the registry carries it.
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond).Add(123456 * time.Nanosecond)
	want := at.Truncate(time.Millisecond).UnixMilli()
	st, err := s.ResetStationSeq(ctx, "A", at)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != "A" || st.SeqResetMs != want || st.KeyID != 1 || len(st.CurrentKey()) != metadb.GeneratedKeyBytes || !st.InService() {
		t.Fatalf("reset: %+v, want seq_reset_ms %d", st, want)
	}
	var stored time.Time
	if err := pool.QueryRow(ctx, "SELECT seq_reset_at FROM stations WHERE id = 'A'").Scan(&stored); err != nil || stored.UnixMicro() != want*1000 {
		t.Fatalf("stored %v (%v), want %d ms exactly", stored, err, want)
	}
	if version() == before {
		t.Error("a reset left the stations data version alone")
	}
	set, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := set.Lookup("A"); a.SeqResetMs != want {
		t.Fatalf("snapshot: A reset at %d, want %d", a.SeqResetMs, want)
	}
	if b, _ := set.Lookup("B"); b.SeqResetMs != 0 {
		t.Fatalf("snapshot: B reset at %d, want never", b.SeqResetMs)
	}

	// Each reset is later than the previous, even from a clock behind.
	steps := []struct {
		name string
		at   time.Time
		want int64
	}{
		{"from a clock an hour behind", at.Add(-time.Hour), want + 1},
		{"at the same moment again", time.UnixMilli(want + 1), want + 2},
		{"later", at.Add(30 * time.Second), at.Add(30 * time.Second).UnixMilli()},
	}
	for _, step := range steps {
		st, err := s.ResetStationSeq(ctx, "A", step.at)
		if err != nil || st.SeqResetMs != step.want {
			t.Fatalf("%s: %+v, %v; want seq_reset_ms %d", step.name, st, err, step.want)
		}
		if got, err := s.GetStation(ctx, "A"); err != nil || got.SeqResetMs != step.want {
			t.Fatalf("%s, read back: %+v, %v", step.name, got, err)
		}
	}

	for _, bad := range []time.Time{{}, time.Date(2019, 12, 31, 23, 59, 59, 0, time.UTC), time.Now().Add(25 * time.Hour)} {
		if _, err := s.ResetStationSeq(ctx, "B", bad); !errors.Is(err, metadb.ErrInvalid) {
			t.Errorf("reset at %v: err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.ResetStationSeq(ctx, "nope", time.Now()); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown station: err = %v, want ErrNotFound", err)
	}
	if err := s.RetireStation(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	_, err = s.ResetStationSeq(ctx, "B", time.Now())
	if !errors.Is(err, metadb.ErrNotFound) || !errors.Is(err, metadb.ErrRetired) {
		t.Fatalf("retired station: err = %v, want ErrNotFound and ErrRetired", err)
	}
	if b, err := s.GetStation(ctx, "B"); err != nil || b.SeqResetMs != 0 {
		t.Fatalf("refused resets changed B: %+v, %v", b, err)
	}
	// Retiring keeps the record of a reset.
	if err := s.RetireStation(ctx, "A"); err != nil {
		t.Fatal(err)
	}
	if a, err := s.GetStation(ctx, "A"); err != nil || a.SeqResetMs != steps[len(steps)-1].want {
		t.Fatalf("retired A: %+v, %v", a, err)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

func TestListStations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	for _, st := range []struct{ id, net string }{{"C", "MS"}, {"A", "MS"}, {"B", "SE"}, {"D", "MS"}} {
		ns := hualien(st.id)
		ns.Net = st.net
		mustCreate(t, s, ns)
	}
	if err := s.RetireStation(ctx, "D"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		filter metadb.Filter
		want   []string
	}{
		{metadb.Filter{}, []string{"A", "B", "C"}},
		{metadb.Filter{IncludeRetired: true}, []string{"A", "B", "C", "D"}},
		{metadb.Filter{Net: "MS"}, []string{"A", "C"}},
		{metadb.Filter{Net: "MS", IncludeRetired: true}, []string{"A", "C", "D"}},
		{metadb.Filter{Net: "XX"}, nil},
	}
	for _, tt := range tests {
		list, err := s.ListStations(ctx, tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, st := range list {
			ids = append(ids, st.ID)
			if len(st.CurrentKey()) != metadb.GeneratedKeyBytes {
				t.Errorf("%s listed without its key", st.ID)
			}
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("%+v: %v, want %v", tt.filter, ids, tt.want)
		}
	}
}

func TestRotateKeyWithOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	ns := hualien("A")
	ns.Key = key(1, 16)
	mustCreate(t, s, ns)

	before := time.Now()
	id2, key2, err := s.RotateKey(ctx, "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id2 != 2 || len(key2) != metadb.GeneratedKeyBytes {
		t.Fatalf("rotation gave key %d of %d bytes", id2, len(key2))
	}
	st, err := s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if st.KeyID != 2 || !bytes.Equal(st.CurrentKey(), key2) || len(st.Previous) != 1 || st.Previous[0].ID != 1 {
		t.Fatalf("after rotation: %+v", st)
	}
	notAfter := st.Previous[0].NotAfter
	if notAfter.Before(before.Add(time.Hour-time.Minute)) || notAfter.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Fatalf("old key accepted until %v, want about an hour from now", notAfter)
	}
	now := time.Now()
	if k, ok := st.KeyAt(1, now); !ok || !bytes.Equal(k, key(1, 16)) {
		t.Fatal("old key refused during the overlap")
	}
	if k, ok := st.KeyAt(2, now); !ok || !bytes.Equal(k, key2) {
		t.Fatal("new key refused")
	}
	if _, ok := st.KeyAt(1, notAfter); ok {
		t.Fatal("old key accepted at its not_after")
	}
	if _, ok := st.KeyAt(2, notAfter.Add(time.Hour)); !ok {
		t.Fatal("current key refused after the overlap")
	}

	// A shorter overlap cuts the older key's too: no key outlives the newest rotation's overlap.
	id3, _, err := s.RotateKey(ctx, "A", 10*time.Minute)
	if err != nil || id3 != 3 {
		t.Fatalf("second rotation: key %d, %v", id3, err)
	}
	st, err = s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Previous) != 2 {
		t.Fatalf("previous keys %+v, want 2 and 1", st.Previous)
	}
	for _, old := range st.Previous {
		if old.NotAfter.After(time.Now().Add(11 * time.Minute)) {
			t.Errorf("key %d accepted until %v, past the latest overlap", old.ID, old.NotAfter)
		}
	}

	// Overlap 0 revokes every old key at once; the table keeps them.
	id4, key4, err := s.RotateKey(ctx, "A", 0)
	if err != nil || id4 != 4 {
		t.Fatalf("revoking rotation: key %d, %v", id4, err)
	}
	st, err = s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if st.KeyID != 4 || !bytes.Equal(st.CurrentKey(), key4) || len(st.Previous) != 0 {
		t.Fatalf("after overlap 0: %+v", st)
	}
	for _, id := range []uint32{1, 2, 3} {
		if _, ok := st.KeyAt(id, time.Now()); ok {
			t.Errorf("key %d accepted after a rotation with overlap 0", id)
		}
	}
	var kept int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM station_keys WHERE station_id = 'A'").Scan(&kept); err != nil || kept != 4 {
		t.Fatalf("station_keys keeps %d rows (%v), want all 4", kept, err)
	}

	if _, _, err := s.RotateKey(ctx, "A", -time.Second); !errors.Is(err, metadb.ErrInvalid) {
		t.Fatalf("negative overlap: err = %v, want ErrInvalid", err)
	}
	if _, _, err := s.RotateKey(ctx, "nope", time.Hour); !errors.Is(err, metadb.ErrNotFound) {
		t.Fatalf("unknown station: err = %v, want ErrNotFound", err)
	}
}

func TestConcurrentRotationsGetDistinctKeyIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, hualien("A"))
	const n = 6
	ids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, _, err := s.RotateKey(ctx, "A", time.Hour)
			ids[i], errs[i] = int(id), err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int{2, 3, 4, 5, 6, 7}) {
		t.Fatalf("key IDs %v, want 2 to 7", ids)
	}
	st, err := s.GetStation(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if st.KeyID != 7 || len(st.Previous) != n {
		t.Fatalf("current key %d with %d previous, want 7 with %d", st.KeyID, len(st.Previous), n)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	set, err := s.Snapshot(ctx)
	if err != nil || set.Len() != 0 {
		t.Fatalf("empty registry: %v stations, %v", set, err)
	}
	for _, id := range []string{"B", "A", "C"} {
		mustCreate(t, s, hualien(id))
	}
	_, keyB2, err := s.RotateKey(ctx, "B", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RetireStation(ctx, "C"); err != nil {
		t.Fatal(err)
	}
	set, err = s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 3 || set.All()[0].ID != "A" {
		t.Fatalf("snapshot %v", set.All())
	}
	b, ok := set.Lookup("B")
	if !ok {
		t.Fatal("B missing")
	}
	if k, ok := b.Key(2); !ok || !bytes.Equal(k, keyB2) {
		t.Fatal("B's new key refused")
	}
	if _, ok := b.Key(1); !ok {
		t.Fatal("B's old key refused during its overlap")
	}
	if c, ok := set.Lookup("C"); !ok || c.InService() {
		t.Fatalf("retired C: present %v, in service %v", ok, ok && c.InService())
	}
	if a, _ := set.Lookup("A"); !a.InService() || a.Code != 970 {
		t.Fatalf("A = %+v", a)
	}
}

func TestInjectionLookingIDsAreStoredLiterally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	ids := []string{
		`'; DROP TABLE stations; --`,
		`Robert'); DELETE FROM station_keys;--`,
		`" OR 1=1 --`,
		`$1`,
		`%s%d`,
		`\x00\'`,
		`a' OR 'a'='a`,
		`台北-01`,
		`*`,
	}
	for _, id := range ids {
		ns := hualien(id)
		ns.Net = id
		mustCreate(t, s, ns)
	}
	for _, id := range ids {
		st, err := s.GetStation(ctx, id)
		if err != nil || st.ID != id {
			t.Fatalf("get %q: %+v, %v", id, st, err)
		}
		list, err := s.ListStations(ctx, metadb.Filter{Net: id})
		if err != nil || len(list) != 1 || list[0].ID != id {
			t.Fatalf("list net %q: %d stations, %v", id, len(list), err)
		}
		if _, _, err := s.RotateKey(ctx, id, time.Hour); err != nil {
			t.Fatalf("rotate %q: %v", id, err)
		}
	}
	var stations, keys int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM stations), (SELECT count(*) FROM station_keys)").Scan(&stations, &keys); err != nil {
		t.Fatal(err)
	}
	if stations != len(ids) || keys != 2*len(ids) {
		t.Fatalf("%d stations and %d keys, want %d and %d", stations, keys, len(ids), 2*len(ids))
	}
}

func TestStoreReportsUnavailableDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	pool.Close()
	if _, err := s.GetStation(ctx, "A"); !errors.Is(err, metadb.ErrUnavailable) {
		t.Fatalf("closed pool: err = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	live, _ := newStore(t)
	if _, err := live.Snapshot(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: err = %v, want context.Canceled", err)
	}
}

func BenchmarkSnapshot1000(b *testing.B) {
	ctx := context.Background()
	s, _ := newStore(b)
	for i := range 1000 {
		ns := hualien(fmt.Sprintf("S%04d", i))
		if _, err := s.CreateStation(ctx, ns); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := s.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

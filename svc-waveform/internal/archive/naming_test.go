package archive

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
)

// TestRegistryCodes: the archive names a station's files and records by
// the codes its records carry from the registry, keeps them across a
// restart, and never lets codes that disagree with its files rename a
// station or merge two.
func TestRegistryCodes(t *testing.T) {
	t.Parallel()
	midnight := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC).UnixMilli()
	c := &clock{t: time.UnixMilli(midnight + 10*60*1000)}
	dir := t.TempDir()
	s := openTest(t, dir, c, nil)
	t0 := midnight + 60*1000

	named := func(st int, seed seedcode.Codes) []Frame {
		a, b := sensorFrame(st, t0), intensityFrame(st, t0+500)
		a.SEED, b.SEED = seed, seed
		return []Frame{a, b}
	}
	hua := seedcode.Codes{Network: "TW", Station: "HUA", Location: ""}
	// Station 1 under the registry's codes, an empty location among them;
	// station 2 without codes (a record journaled before the registry
	// held them): the archive's own rule, as before.
	for _, o := range s.apply(append(named(1, hua), named(2, seedcode.Codes{})...)...) {
		if o != Stored {
			t.Fatalf("outcome %v", o)
		}
	}
	// Station 3 is given the codes station 2's files carry: refused, so
	// the two are never one file; station 2 later given other codes keeps
	// its names.
	taken := seedcode.Codes{Network: "SH", Station: "00002", Location: "00"}
	s.apply(named(3, taken)...)
	s.apply(named(2, seedcode.Codes{Network: "SH", Station: "NEW", Location: "00"})...)
	if n := testutil.ToFloat64(s.m.namingConflicts); n != 2 {
		t.Errorf("naming conflicts %v, want 2", n)
	}
	// Codes that are not codes: the frame is refused before it names a
	// path.
	bad := named(4, seedcode.Codes{Network: "..", Station: "X", Location: ""})
	if out := s.apply(bad...); out[0] != Malformed || out[1] != Malformed {
		t.Errorf("frames with bad codes: %v", out)
	}

	want := map[int]seedcode.Codes{1: hua, 2: taken}
	check := func(when string) {
		t.Helper()
		for st, w := range want {
			if got, ok := s.Names(stationID(st)); !ok || got != w {
				t.Errorf("%s: station %d named %v, want %v", when, st, got, w)
			}
			res, err := s.Query(stationID(st), t0, t0+500, true)
			if err != nil || res.Network != w.Network || res.Station != w.Station || res.Location != w.Location {
				t.Errorf("%s: query of station %d: %+v, %v", when, st, res, err)
			}
		}
		if got, ok := s.Names(stationID(3)); !ok || got.Key() == taken.Key() {
			t.Errorf("%s: station 3 named %v, the codes of station 2's files", when, got)
		}
	}
	check("before the restart")
	s.stop()
	s = openTest(t, dir, c, nil)
	check("after the restart")
	// The files: SDS paths and record headers with the empty location.
	path := filepath.Join(dir, "sds", "2025", "TW", "HUA", "BNZ.D", "TW.HUA..BNZ.D.2025.063")
	s.stop()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("station 1's file: %v", err)
	}
	counts := diskRecords(t, dir)
	if counts["BNZ"] == 0 {
		t.Errorf("no BNZ records on disk: %v", counts)
	}
}

// TestStationMapWithoutLocation: lines of stations.jsonl written before
// stations had their own location code read as location 00.
func TestStationMapWithoutLocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stationMapName),
		[]byte(`{"id":"SIM00001","net":"SH","sta":"00001","scale_gal":0.001}`+"\n"+`{"id":"HUA","net":"TW","sta":"HUA","loc":"","scale_gal":0.001}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2025, 3, 4, 0, 10, 0, 0, time.UTC)}
	s := openTest(t, dir, c, nil)
	for id, want := range map[string]string{"SIM00001": "SH.00001.00", "HUA": "TW.HUA."} {
		if got, ok := s.Names(id); !ok || got.String() != want {
			t.Errorf("%s: %v, want %s", id, got, want)
		}
	}
	s.stop()
	if err := os.WriteFile(filepath.Join(dir, stationMapName), []byte(`{"id":"X","net":"SH","sta":"X","loc":"../","scale_gal":0.001}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Now: c.Now}); err == nil || !strings.Contains(err.Error(), "not a station entry") {
		t.Errorf("a bad location in the map: %v", err)
	}
}

// TestKindsAreTheRegistrysChannels: the archive writes each channel at the
// rate station metadata describes it with (seedcode.Channels).
func TestKindsAreTheRegistrysChannels(t *testing.T) {
	if len(kinds) != len(seedcode.Channels) {
		t.Fatalf("archive has %d channels, seedcode %d", len(kinds), len(seedcode.Channels))
	}
	for i, k := range kinds {
		c := seedcode.Channels[i]
		if k.code != c.Code || k.rate != c.RateHz || k.periodMs*int64(c.RateHz) != 1000 || (k.enc == mseed.Steim2) != c.Counts {
			t.Errorf("channel %d: archive %+v, seedcode %+v", i, k, c)
		}
	}
}

package witness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
)

// fakeDeployment is two cores, each with its own archive behind a waveform
// server, and a data API, all in-process.
type fakeDeployment struct {
	api      *dataAPI
	cfg      Config
	archives map[string]*archive
}

func newFakeDeployment(t *testing.T, dropAtPrimary func(*stationv1.Packet) bool, existing ...string) *fakeDeployment {
	t.Helper()
	d := &fakeDeployment{api: &dataAPI{keys: map[string][]byte{}}, archives: map[string]*archive{"TNN-1": newArchive(), "TYO-1": newArchive()}}
	for _, id := range existing {
		d.api.keys[id] = []byte("a key the witness never learns")
	}
	d.cfg = Config{
		DataAPI:    serveDataAPI(t, d.api, "admin"),
		AdminToken: "admin",
		Primary:    serveCore(t, d.archives["TNN-1"], d.api.key, dropAtPrimary),
		Backup:     serveCore(t, d.archives["TYO-1"], d.api.key, nil),
		Waveform: map[string]string{
			"TNN-1": serveWaveform(t, d.archives["TNN-1"]),
			"TYO-1": serveWaveform(t, d.archives["TYO-1"]),
		},
		ReadyTimeout: 10 * time.Second,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return d
}

// runWitness starts a witness, lets it send until it has sent at least
// sent packets, and stops it.
func runWitness(t *testing.T, cfg Config, sent int) *Witness {
	t.Helper()
	w, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !poll.Within(20*time.Second, func() bool { return w.Stats().Sent >= sent }) {
		w.Stop()
		t.Fatalf("only %+v sent in 20 s", w.Stats())
	}
	w.Stop()
	return w
}

func TestWitnessProvesACleanRun(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, nil, "WIT00002")
	w := runWitness(t, d.cfg, 3*2*4)

	s := w.Stats()
	if !slices.Equal(s.Stations, []string{"WIT00001", "WIT00002", "WIT00003"}) {
		t.Fatalf("stations %q", s.Stations)
	}
	if s.Acked != s.Sent || s.Unacked != 0 || s.Uplinks[Primary].Acked != s.Sent || s.Uplinks[Backup].Acked != s.Sent {
		t.Fatalf("a clean path left packets unacked: %+v", s)
	}
	// The existing station was taken over: seq reset, then a new key.
	d.api.mu.Lock()
	calls := slices.Clone(d.api.calls)
	d.api.mu.Unlock()
	want := []string{"POST /v1/stations", "POST /v1/stations", "POST /v1/stations/WIT00002:resetSeq", "POST /v1/stations/WIT00002:rotateKey", "POST /v1/stations"}
	if !slices.Equal(calls, want) {
		t.Fatalf("data API calls %q, want %q", calls, want)
	}

	r := w.Verify(context.Background(), 5*time.Second)
	if v := r.Violations(); len(v) > 0 {
		t.Fatalf("violations on a clean run: %q\n%s", v, r)
	}
	for site, c := range r.Cores {
		if c.Checked != s.Sent {
			t.Errorf("%s: checked %d of %d packets", site, c.Checked, s.Sent)
		}
	}
	if r.Passes != 1 || r.Acked != s.Acked {
		t.Errorf("report %+v", r)
	}
}

func TestWitnessFindsAnAckedPacketOneArchiveLacks(t *testing.T) {
	t.Parallel()
	var victim atomic.Int64
	drop := func(p *stationv1.Packet) bool {
		if p.GetStationId() != "WIT00001" || p.GetSensor() == nil {
			return false
		}
		victim.CompareAndSwap(0, p.GetSensor().GetFirstSampleMs())
		return victim.Load() == p.GetSensor().GetFirstSampleMs()
	}
	d := newFakeDeployment(t, drop)
	d.cfg.Stations = 1
	w := runWitness(t, d.cfg, 2*4)

	settle := 1500 * time.Millisecond
	began := time.Now()
	r := w.Verify(context.Background(), settle)
	if took := time.Since(began); took < settle {
		t.Errorf("gave up after %s, before the settle time", took)
	}
	v := r.Violations()
	want := fmt.Sprintf("TNN-1: 1 of %d acked packets missing; e.g. WIT00001 sensor first_sample_ms=%d", r.Acked, victim.Load())
	if len(v) != 1 || !strings.HasPrefix(v[0], want) || !strings.HasSuffix(v[0], "missing; acked on primary and backup") {
		t.Fatalf("violations %q, want one starting %q", v, want)
	}
	if c := r.Cores["TYO-1"]; c.Missing != 0 || c.Checked != r.Acked {
		t.Fatalf("TYO-1 has every packet, found %+v", c)
	}
	if r.Passes < 2 {
		t.Errorf("%d passes: the missing frame was not looked for again", r.Passes)
	}
}

func TestStartFailsWithoutAcks(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, nil)
	d.cfg.Backup = "127.0.0.1:9" // discard: nothing acks
	d.cfg.ReadyTimeout = 1500 * time.Millisecond
	d.cfg.Stations = 1
	_, err := Start(context.Background(), d.cfg)
	if err == nil || !strings.Contains(err.Error(), "WIT00001 on backup") {
		t.Fatalf("Start without a backup core: %v", err)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{DataAPI: "http://x", AdminToken: "t", Primary: "a:1"},
		{DataAPI: "http://x", AdminToken: "t", Primary: "a:1", Backup: "b:1", Stations: 101},
	} {
		if _, err := Start(context.Background(), cfg); err == nil {
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

package rtsgrpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/svc-rts/internal/shake"
)

// direct is a Peer that is another server in the same process.
type direct struct{ s *Server }

func (d direct) Ask(_ context.Context, tick, since int64) (PeerState, bool, error) {
	ps, ok := d.s.Answer(tick, since)
	return ps, ok, nil
}

// TestPeerStateMendsAnOutage: a core whose ingest is gone for 20 s in the
// middle of an earthquake — longer than late frames are accounted for —
// comes back to stations still triggered, among them an outlying cluster
// that began to shake during the outage. On its own it names what it sees
// afresh, under IDs its peer does not have (the control below); having
// adopted its peer's state it publishes, from the tick it came back on,
// exactly its peer's detections: IDs, serials, stations, final.
func TestPeerStateMendsAnOutage(t *testing.T) {
	t.Parallel()
	places := map[string]shake.Place{
		"A": {Lat: 23.99, Lon: 121.61, Code: 970}, "B": {Lat: 23.96, Lon: 121.57, Code: 973},
		"C": {Lat: 23.86, Lon: 121.51, Code: 974}, "D": {Lat: 24.13, Lon: 121.64, Code: 971},
		// Kinmen, 330 km west.
		"K1": {Lat: 24.44, Lon: 118.32, Code: 892}, "K2": {Lat: 24.43, Lon: 118.39, Code: 891},
		"K3": {Lat: 24.46, Lon: 118.43, Code: 893},
	}
	engine := func() *shake.Engine {
		return shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(id string) (shake.Place, bool) {
			p, ok := places[id]
			return p, ok
		}})
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	const t0 = int64(1_800_000_000_000)
	const (
		quakeAt, islandAt, quietAt = t0 + 5_000, t0 + 20_000, t0 + 45_000
		outFrom, outTo             = t0 + 8_000, t0 + 28_000 // the outage, 20 s
	)
	intensity := func(id string, u int64) float32 {
		switch {
		case id[0] == 'K' && u >= islandAt && u < quietAt:
			return 2.2
		case id[0] != 'K' && u >= quakeAt && u < quietAt:
			return 4
		}
		return 0.2
	}

	run := func(withPeer bool) (mismatch []string, adopted float64) {
		clock := t0
		now := func() time.Time { return time.UnixMilli(clock) }
		peer := New(engine(), "TYO-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
		srv := New(engine(), "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
		peer.now, srv.now = now, now
		peer.continuous.Store(t0 - 60_000) // ran long before
		peer.lastApplied.Store(t0)
		srv.lastApplied.Store(t0)
		if withPeer {
			srv.SetPeer(direct{peer}, 6*time.Minute)
		}
		ctx := context.Background()
		for u := t0; u <= t0+60_000; u += shake.TickMs {
			clock = u + 50
			for id := range places {
				r := record(id, u, intensity(id, u))
				peer.apply(r)
				peer.noteApplied(u)
				if u < outFrom || u >= outTo {
					srv.apply(r)
					srv.noteApplied(u)
				}
			}
			// The peer loop, woken by the first record after the outage.
			select {
			case <-srv.kick:
				srv.askPeer(ctx)
			default:
			}
			peer.emit(ctx, u)
			srv.emit(ctx, u)
			srv.watchInput(ctx)
			if u < outTo {
				continue
			}
			a, _ := peer.hub.Latest()
			b, _ := srv.hub.Latest()
			if got, want := summary(b.GetSnapshot().GetDetections()), summary(a.GetSnapshot().GetDetections()); got != want {
				mismatch = append(mismatch, fmt.Sprintf("tick +%ds: %s, peer %s", (u-t0)/1000, got, want))
			}
		}
		return mismatch, testutil.ToFloat64(srv.peerAsks.WithLabelValues("adopted"))
	}

	mismatch, adopted := run(true)
	if adopted != 1 {
		t.Errorf("adopted the peer's state %v times, want once", adopted)
	}
	for _, m := range mismatch {
		t.Error(m)
	}
	if control, _ := run(false); len(control) == 0 {
		t.Fatal("without the peer's state the cores agreed anyway: the test shows nothing")
	}
}

func summary(ds []*rtsv1.Detection) string {
	s := "["
	for _, d := range ds {
		s += fmt.Sprintf("%s#%d(%d st, final %t) ", d.GetId(), d.GetSerial(), d.GetStations(), d.GetFinal())
	}
	return s + "]"
}

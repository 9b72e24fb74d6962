package rtsgrpc

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/svc-rts/internal/shake"
)

// TestRebuildBeforeFirstTick: a restarted server asks the ingest stream for
// the records of the last window, computes no snapshot until the sender
// marks the replay caught up, and then publishes the earthquake in
// progress under the ID and serial of a core that ran throughout and
// computed every tick as its frames came. Without the rebuild, the same
// frames make no detection at all: the triggers are older than what a
// fresh engine looks back on.
func TestRebuildBeforeFirstTick(t *testing.T) {
	t.Parallel()
	places := map[string]shake.Place{
		"A": {Lat: 23.99, Lon: 121.61, Code: 970}, "B": {Lat: 23.96, Lon: 121.57, Code: 973},
		"C": {Lat: 23.86, Lon: 121.51, Code: 974}, "D": {Lat: 24.13, Lon: 121.64, Code: 971},
	}
	engine := func() *shake.Engine {
		return shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(id string) (shake.Place, bool) {
			p, ok := places[id]
			return p, ok
		}})
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	// An earthquake 40 s ago: A, B and C shaken for 15 s, D from 2.5 s on.
	now := time.Now()
	last := now.UnixMilli() / shake.TickMs * shake.TickMs
	t0 := last - 40_000
	var ticks [][]*ingestv1.Record
	for u := t0 - 5_000; u <= last; u += shake.TickMs {
		var recs []*ingestv1.Record
		for _, id := range []string{"A", "B", "C", "D"} {
			intensity := float32(0.2)
			if u >= t0 && u < t0+15_000 && (id != "D" || u >= t0+2_500) {
				intensity = 3
			}
			recs = append(recs, record(id, u, intensity))
		}
		ticks = append(ticks, recs)
	}

	// The core that ran throughout.
	peer := New(engine(), "TYO-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
	for _, recs := range ticks {
		for _, r := range recs {
			peer.apply(r)
		}
		peer.emit(context.Background(), recs[0].GetPacket().GetIntensity().GetWindowEndMs())
	}

	// The restarted one.
	srv := New(engine(), "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
	srv.SetRebuild(6*time.Minute, 20*time.Second)
	client := serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go srv.Run(ctx)
	sub, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "test"})
	if err != nil {
		t.Fatal(err)
	}
	snaps := make(chan *rtsv1.Snapshot, 64)
	go func() {
		for {
			resp, err := sub.Recv()
			if err != nil {
				return
			}
			snaps <- resp.GetSnapshot()
		}
	}()
	ing, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	since := hello(t, ing)
	if want := now.Add(-6 * time.Minute).UnixMilli(); since < want-2_000 || since > want+2_000 {
		t.Fatalf("asked for records since %d, want about %d", since, want)
	}
	send := func(id uint64, recs []*ingestv1.Record, caughtUp bool) {
		t.Helper()
		if err := ing.Send(&rtsv1.IngestRequest{BatchId: id, Records: recs, CaughtUp: caughtUp}); err != nil {
			t.Fatal(err)
		}
		if ack, err := ing.Recv(); err != nil || ack.GetAckedBatchId() != id {
			t.Fatalf("ack of batch %d: %v %v", id, ack, err)
		}
	}
	// The replay, in batches that do not follow the ticks.
	var all []*ingestv1.Record
	for _, recs := range ticks {
		all = append(all, recs...)
	}
	var id uint64
	for len(all) > 0 {
		n := min(len(all), 7)
		id++
		send(id, all[:n], false)
		all = all[n:]
	}
	select {
	case s := <-snaps:
		t.Fatalf("snapshot of %d published while rebuilding", s.GetTimeMs())
	case <-srv.Warm():
		t.Fatal("warm before the replay was marked caught up")
	case <-time.After(1200 * time.Millisecond):
	}
	id++
	send(id, nil, true)
	select {
	case <-srv.Warm():
	case <-ctx.Done():
		t.Fatal("not warm after the caught-up batch")
	}
	first := <-snaps
	want := first.GetDetections()
	if len(want) == 0 {
		t.Fatalf("the rebuilt core's first snapshot (%d) lists no detection", first.GetTimeMs())
	}

	// The core that ran throughout, at the same tick.
	for u := last + shake.TickMs; u <= first.GetTimeMs(); u += shake.TickMs {
		peer.emit(context.Background(), u)
	}
	latest, _ := peer.hub.Latest()
	got := latest.GetSnapshot()
	if got.GetTimeMs() != first.GetTimeMs() || len(got.GetDetections()) != len(want) {
		t.Fatalf("peer at %d lists %v, the rebuilt core at %d %v", got.GetTimeMs(), got.GetDetections(), first.GetTimeMs(), want)
	}
	for i, d := range got.GetDetections() {
		w := want[i]
		if d.GetId() != w.GetId() || d.GetSerial() != w.GetSerial() || d.GetFinal() != w.GetFinal() || d.GetStations() != w.GetStations() {
			t.Errorf("detection %d: peer %s serial %d final %v stations %d; rebuilt %s serial %d final %v stations %d", i,
				d.GetId(), d.GetSerial(), d.GetFinal(), d.GetStations(), w.GetId(), w.GetSerial(), w.GetFinal(), w.GetStations())
		}
	}

	// Control: the same frames, at once, to a core that does not rebuild.
	plain := New(engine(), "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
	for _, recs := range ticks {
		for _, r := range recs {
			plain.apply(r)
		}
	}
	plain.emit(context.Background(), first.GetTimeMs())
	if s, _ := plain.hub.Latest(); len(s.GetSnapshot().GetDetections()) != 0 {
		t.Fatalf("a core without the rebuild found %v: the test shows nothing", s.GetSnapshot().GetDetections())
	}
}

// TestRebuildGivenUpEndsTheReplay: a rebuild that gives up ends the stream
// that carries the replay, so the rest of it does not hold back the
// records of now; the next stream asks for no replay.
func TestRebuildGivenUpEndsTheReplay(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15}), "TNN-1", 100*time.Millisecond,
		make(chan struct{}), prometheus.NewRegistry(), logger)
	srv.SetRebuild(6*time.Minute, time.Second)
	client := serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go srv.Run(ctx)
	ing, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if since := hello(t, ing); since == 0 {
		t.Fatal("a rebuilding server asked for no replay")
	}
	old := time.Now().Add(-5*time.Minute).UnixMilli() / shake.TickMs * shake.TickMs
	if err := ing.Send(&rtsv1.IngestRequest{BatchId: 1, Records: []*ingestv1.Record{record("A", old, 0.2)}}); err != nil {
		t.Fatal(err)
	}
	if ack, err := ing.Recv(); err != nil || ack.GetAckedBatchId() != 1 {
		t.Fatalf("ack of a replayed batch: %v %v", ack, err)
	}
	<-srv.Warm() // the wait of 1 s ran out
	_ = ing.Send(&rtsv1.IngestRequest{BatchId: 2, Records: []*ingestv1.Record{record("A", old+shake.TickMs, 0.2)}})
	if _, err := ing.Recv(); status.Code(err) != codes.Aborted {
		t.Fatalf("the replay's stream after the rebuild gave up: %v, want Aborted", err)
	}

	again, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if since := hello(t, again); since != 0 {
		t.Fatalf("the next stream asked for records since %d, want no replay", since)
	}
	now := time.Now().UnixMilli() / shake.TickMs * shake.TickMs
	if err := again.Send(&rtsv1.IngestRequest{BatchId: 1, Records: []*ingestv1.Record{record("A", now, 0.2)}}); err != nil {
		t.Fatal(err)
	}
	if ack, err := again.Recv(); err != nil || ack.GetAckedBatchId() != 1 {
		t.Fatalf("ack on the next stream: %v %v", ack, err)
	}
}

// TestBacklogIsABreak: batches whose newest frame is older than late frames
// are accounted for — a stream held behind a backlog — are no input: once
// nothing in time has come for that long it is an outage, and the first
// batch in time after it a break that asks the peer. A stale batch among
// fresh ones (a backfill) is neither.
func TestBacklogIsABreak(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(shake.New(shake.Config{}), "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), logger)
	clock := time.Now().UnixMilli()
	srv.now = func() time.Time { return time.UnixMilli(clock) }
	ctx := context.Background()
	step := func(newest int64) {
		srv.noteApplied(newest)
		srv.watchInput(ctx)
		clock += shake.TickMs
	}
	srv.noteApplied(clock)
	for k := range 10 {
		if k%3 == 0 {
			step(clock - shake.LateWindowMs - 5_000) // a backfill
		} else {
			step(clock - 300)
		}
	}
	if srv.outage.Load() || srv.broken.Load() {
		t.Fatal("stale batches among fresh ones made an outage")
	}
	// 20 s of nothing but a backlog a minute old.
	for range 40 {
		step(clock - 60_000)
	}
	if !srv.outage.Load() || srv.broken.Load() {
		t.Fatalf("20 s of a backlog: outage %v broken %v, want an outage, no break yet", srv.outage.Load(), srv.broken.Load())
	}
	srv.noteApplied(clock - 300)
	if srv.outage.Load() || !srv.broken.Load() || srv.continuous.Load() != clock {
		t.Fatalf("the first batch in time: outage %v broken %v continuous %d, want a break now (%d)", srv.outage.Load(), srv.broken.Load(), srv.continuous.Load(), clock)
	}
	select {
	case <-srv.kick:
	default:
		t.Fatal("the break did not wake the peer loop")
	}
}

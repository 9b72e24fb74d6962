package rtsgrpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/svc-rts/internal/shake"
)

func start(t *testing.T) (*Server, rtsv1.RTSServiceClient, chan struct{}) {
	t.Helper()
	stopping := make(chan struct{})
	eng := shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15})
	srv := New(eng, "TNN-1", 100*time.Millisecond, stopping, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	return srv, serve(t, srv), stopping
}

// serve serves srv over gRPC on a loopback port until the test ends.
func serve(t *testing.T, srv *Server) rtsv1.RTSServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rtsv1.RegisterRTSServiceServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rtsv1.NewRTSServiceClient(conn)
}

// hello reads the server's first message on an Ingest stream and returns
// the replay it asks for.
func hello(t *testing.T, ing rtsv1.RTSService_IngestClient) int64 {
	t.Helper()
	resp, err := ing.Recv()
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	if resp.GetAckedBatchId() != 0 {
		t.Fatalf("first message acks batch %d", resp.GetAckedBatchId())
	}
	return resp.GetReplaySinceMs()
}

func record(station string, windowEnd int64, intensity float32) *ingestv1.Record {
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Seq: uint64(windowEnd),
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: windowEnd, Intensity: intensity}}}}
}

// TestIngestTickSubscribe runs the tick loop for real: records sent over
// the Ingest stream are acked per batch and show up in the snapshots that
// Subscribe streams, one per 500 ms tick.
func TestIngestTickSubscribe(t *testing.T) {
	t.Parallel()
	srv, client, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go srv.Run(ctx)

	sub, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if since := hello(t, ing); since != 0 {
		t.Fatalf("a server without rebuild asked for records since %d", since)
	}
	// Frames for the next three ticks, sent in one batch, then the same
	// batch again (a resend after reconnect).
	base := (time.Now().UnixMilli()/500 + 1) * 500
	batch := &rtsv1.IngestRequest{BatchId: 7, Records: []*ingestv1.Record{
		record("A", base, 2.5), record("A", base+500, 2.6), record("A", base+1000, 2.7), {Packet: &stationv1.Packet{StationId: "A"}},
	}}
	for range 2 {
		if err := ing.Send(batch); err != nil {
			t.Fatal(err)
		}
		ack, err := ing.Recv()
		if err != nil || ack.GetAckedBatchId() != 7 {
			t.Fatalf("ack %v %v", ack, err)
		}
	}
	want := map[int64]float32{base: 2.5, base + 500: 2.6, base + 1000: 2.7}
	for len(want) > 0 {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		s := resp.GetSnapshot()
		if s.GetTimeMs()%500 != 0 || s.GetSite() != "TNN-1" {
			t.Fatalf("snapshot %v", s)
		}
		if v, ok := want[s.GetTimeMs()]; ok {
			if len(s.GetStations()) != 1 || s.GetStations()[0].GetIntensity() != v || !s.GetStations()[0].GetAlert() {
				t.Fatalf("tick %d: %v", s.GetTimeMs(), s.GetStations())
			}
			delete(want, s.GetTimeMs())
		}
	}
	got, err := client.GetSnapshot(ctx, &rtsv1.GetSnapshotRequest{})
	if err != nil || got.GetSnapshot().GetTimeMs() < base+1000 {
		t.Fatalf("GetSnapshot %v %v", got, err)
	}
}

func TestSlowSubscriberDropped(t *testing.T) {
	t.Parallel()
	srv, client, _ := start(t)
	// A bound for a broken test, not a measure: under -race on a busy
	// machine the 300 snapshots take several seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slow, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, srv, 2)
	// Publish far more than the buffer plus what the transport holds; the
	// slow subscriber reads nothing, the fast one everything.
	payload := make([]*rtsv1.StationState, 2000)
	for i := range payload {
		payload[i] = &rtsv1.StationState{StationId: "S"}
	}
	got := make(chan error)
	go func() {
		for {
			_, err := fast.Recv()
			got <- err
			if err != nil {
				return
			}
		}
	}()
	for i := range int64(300) {
		srv.hub.Publish(&rtsv1.SubscribeResponse{Snapshot: &rtsv1.Snapshot{TimeMs: i * 500, Stations: payload}})
		if err := <-got; err != nil { // the fast subscriber keeps up
			t.Fatalf("fast subscriber at %d: %v", i, err)
		}
	}
	for {
		_, err := slow.Recv()
		if err == nil {
			continue // drains what was buffered before the drop
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("slow subscriber ended with %v", err)
		}
		break
	}
}

func TestStreamsEndWhenStopping(t *testing.T) {
	t.Parallel()
	_, client, stopping := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello(t, ing)
	close(stopping)
	if _, err := sub.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("subscription: %v", err)
	}
	if _, err := ing.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("ingest: %v", err)
	}
}

func waitSubscribers(t *testing.T, s *Server, n int) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("%d subscribers", n), func() bool { got, _ := s.hub.Stats(); return got == n })
}

type recorder struct {
	snapshots  []*rtsv1.Snapshot
	detections []string // "id/serial"
}

func (r *recorder) PublishSnapshot(_ context.Context, s *rtsv1.Snapshot) {
	r.snapshots = append(r.snapshots, s)
}
func (r *recorder) PublishDetection(_ context.Context, d *rtsv1.Detection) {
	r.detections = append(r.detections, fmt.Sprintf("%s/%d", d.GetId(), d.GetSerial()))
}

// TestDetectionsPublished: the tick loop's snapshots carry the engine's
// detections, and the publisher gets every snapshot and each (ID, serial)
// of a detection once.
func TestDetectionsPublished(t *testing.T) {
	t.Parallel()
	places := map[string]shake.Place{
		"A": {Lat: 23.99, Lon: 121.61, Code: 970}, "B": {Lat: 23.96, Lon: 121.57, Code: 973},
		"C": {Lat: 23.86, Lon: 121.51, Code: 974}, "D": {Lat: 24.13, Lon: 121.64, Code: 971},
	}
	eng := shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, Locate: func(id string) (shake.Place, bool) {
		p, ok := places[id]
		return p, ok
	}})
	srv := New(eng, "TNN-1", 100*time.Millisecond, make(chan struct{}), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	rec := &recorder{}
	srv.SetPublisher(rec)
	const t0 = int64(1_800_000_000_000)
	for k := range int64(8) {
		tick := t0 + k*500
		for i, id := range []string{"A", "B", "C", "D"} {
			intensity := float32(0.2)
			if k >= int64(i) && (id != "D" || k >= 5) {
				intensity = 3
			}
			srv.apply(record(id, tick, intensity))
		}
		srv.emit(context.Background(), tick)
	}
	if len(rec.snapshots) != 8 {
		t.Fatalf("%d snapshots published", len(rec.snapshots))
	}
	id := fmt.Sprintf("%d-18", t0)
	want := []string{id + "/1", id + "/2"} // founded by A, B, C at tick 2; D joins at tick 5
	if !reflect.DeepEqual(rec.detections, want) {
		t.Fatalf("detections published %v, want %v", rec.detections, want)
	}
	latest, _ := srv.hub.Latest()
	ds := latest.GetSnapshot().GetDetections()
	if len(ds) != 1 || ds[0].GetId() != id || ds[0].GetSerial() != 2 || ds[0].GetStations() != 4 || ds[0].GetMaxLevel() != 3 ||
		ds[0].GetLocation() == "" || ds[0].GetDepthKm() != 10 || ds[0].GetFirstTriggerMs() != t0 || ds[0].GetUpdatedMs() != t0+2500 {
		t.Fatalf("snapshot detections %v", ds)
	}
}

// TestCarriedValuesMarked: a tick emitted without a station's frame for
// it sends that station's latest values with age_ms 500 (the others with
// 0), as the archive keeps it, and counts the carried-over value.
func TestCarriedValuesMarked(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv := New(shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15}), "TNN-1", 100*time.Millisecond,
		make(chan struct{}), reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	arch := &memArchive{ticks: map[int64]*rtsv1.Snapshot{}}
	srv.SetArchive(arch)
	const t0 = int64(1_800_000_000_000)
	srv.apply(record("A", t0, 1))
	srv.apply(record("B", t0, 2))
	srv.emit(context.Background(), t0)
	srv.apply(record("A", t0+500, 1.1)) // B's frame is late
	srv.emit(context.Background(), t0+500)
	srv.apply(record("B", t0+500, 2.1)) // and comes after the tick
	srv.apply(record("A", t0+1000, 1.2))
	srv.apply(record("B", t0+1000, 2.2))
	srv.emit(context.Background(), t0+1000)

	// Over the wire, as subscribers and GetSnapshot clients read it.
	client := serve(t, srv)
	for _, tc := range []struct {
		tick                   int64
		ageA, ageB             uint32
		intensityA, intensityB float32
	}{
		{t0, 0, 0, 1, 2},
		{t0 + 500, 0, 500, 1.1, 2}, // B carried over from t0
		{t0 + 1000, 0, 0, 1.2, 2.2},
	} {
		resp, err := client.GetSnapshot(context.Background(), &rtsv1.GetSnapshotRequest{TimeMs: tc.tick})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetSnapshot().GetStations()
		if len(st) != 2 || st[0].GetAgeMs() != tc.ageA || st[1].GetAgeMs() != tc.ageB ||
			st[0].GetIntensity() != tc.intensityA || st[1].GetIntensity() != tc.intensityB {
			t.Fatalf("tick %d: stations %v, want A age %d, B age %d", tc.tick, st, tc.ageA, tc.ageB)
		}
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "shindo_rts_station_values_carried_total" {
			if got := f.GetMetric()[0].GetCounter().GetValue(); got != 1 {
				t.Fatalf("%v carried values counted, want 1", got)
			}
			return
		}
	}
	t.Fatal("shindo_rts_station_values_carried_total not exported")
}

// memArchive keeps snapshots in memory, as ticklog.Log does on disk.
type memArchive struct {
	mu     sync.Mutex
	ticks  map[int64]*rtsv1.Snapshot
	latest int64
}

func (m *memArchive) Append(s *rtsv1.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ticks[s.GetTimeMs()] = s
	m.latest = max(m.latest, s.GetTimeMs())
}

func (m *memArchive) At(ms int64) (*rtsv1.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := ms - ms%500
	if t > m.latest {
		return nil, ErrNotYet
	}
	if s, ok := m.ticks[t]; ok {
		return s, nil
	}
	return nil, ErrNotArchived
}

// TestGetSnapshotOfPastTick: every emitted tick goes to the archive, and
// GetSnapshot with a time answers from it, with a status that says why
// when it cannot.
func TestGetSnapshotOfPastTick(t *testing.T) {
	t.Parallel()
	srv, client, _ := start(t)
	arch := &memArchive{ticks: map[int64]*rtsv1.Snapshot{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.GetSnapshot(ctx, &rtsv1.GetSnapshotRequest{TimeMs: 1_800_000_000_000}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("without an archive: %v", err)
	}
	srv.SetArchive(arch)
	go srv.Run(ctx)
	sub, err := client.Subscribe(ctx, &rtsv1.SubscribeRequest{Subscriber: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []*rtsv1.Snapshot
	for len(seen) < 3 {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, resp.GetSnapshot())
	}
	for _, s := range seen {
		got, err := client.GetSnapshot(ctx, &rtsv1.GetSnapshotRequest{TimeMs: s.GetTimeMs() + 250})
		if err != nil || got.GetSnapshot().GetTimeMs() != s.GetTimeMs() {
			t.Fatalf("tick %d: %v %v", s.GetTimeMs(), got, err)
		}
	}
	for _, tc := range []struct {
		ms   int64
		code codes.Code
	}{
		{seen[0].GetTimeMs() - 3_600_000, codes.NotFound},
		{seen[2].GetTimeMs() + 3_600_000, codes.OutOfRange},
		{-5, codes.InvalidArgument},
	} {
		if _, err := client.GetSnapshot(ctx, &rtsv1.GetSnapshotRequest{TimeMs: tc.ms}); status.Code(err) != tc.code {
			t.Errorf("time %d: %v, want %v", tc.ms, err, tc.code)
		}
	}
}

// TestTickClosesAtQuorum: of 200 stations with a quorum of 0.99, a tick
// missing two frames closes the grace after its time, not at its deadline;
// missing three, at its deadline; with every frame in, at its time.
func TestTickClosesAtQuorum(t *testing.T) {
	t.Parallel()
	const stations, maxDelay, grace = 200, 400 * time.Millisecond, 20 * time.Millisecond
	for _, c := range []struct {
		missing int
		by      string
		atMost  time.Duration
	}{{0, "complete", 60 * time.Millisecond}, {2, "quorum", grace + 60*time.Millisecond}, {3, "deadline", maxDelay + 60*time.Millisecond}} {
		eng := shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, TickQuorum: 0.99})
		srv := New(eng, "TNN-1", maxDelay, make(chan struct{}), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		srv.SetQuorumGrace(grace)
		tick := (time.Now().UnixMilli()/500 + 2) * 500 // at least half a second ahead
		for i := range stations {
			srv.apply(record(fmt.Sprint(i), tick-500, 0.5))
		}
		for i := range stations - c.missing {
			srv.apply(record(fmt.Sprint(i), tick, 0.5))
		}
		by, ok := srv.close(context.Background(), tick)
		late := time.Since(time.UnixMilli(tick))
		if !ok || by != c.by || late < 0 || late > c.atMost {
			t.Errorf("%d frames missing: closed by %q %s after the tick, want %q within %s", c.missing, by, late, c.by, c.atMost)
		}
	}
}

// TestTickWaitsForFramesStillComing: of 300 stations with a quorum of 0.99
// (297), a tick whose 298th and 299th frames come after its quorum, each
// within the grace of the one before, closes the grace after the last of
// them, with both in, and not at the first grace's end without them; the
// 300th, lost, does not hold it to the deadline.
func TestTickWaitsForFramesStillComing(t *testing.T) {
	t.Parallel()
	const stations, maxDelay, grace, step = 300, time.Second, 150 * time.Millisecond, 30 * time.Millisecond
	eng := shake.New(shake.Config{AlertIntensity: 1.5, DisplayDecayPerSec: 0.15, TickQuorum: 0.99})
	srv := New(eng, "TNN-1", maxDelay, make(chan struct{}), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.SetQuorumGrace(grace)
	tick := (time.Now().UnixMilli()/500 + 2) * 500
	for i := range stations {
		srv.apply(record(fmt.Sprint(i), tick-500, 0.5))
	}
	for i := range stations - 3 {
		srv.apply(record(fmt.Sprint(i), tick, 0.5))
	}
	go func() {
		// The frames' arrival times are the stimulus, not a condition
		// waited for.
		time.Sleep(time.Until(time.UnixMilli(tick))) //nolint:forbidigo // the tick's time
		for i := stations - 3; i < stations-1; i++ {
			time.Sleep(step) //nolint:forbidigo // a frame arriving step after the one before
			srv.apply(record(fmt.Sprint(i), tick, 0.5))
		}
	}()
	by, ok := srv.close(context.Background(), tick)
	late := time.Since(time.UnixMilli(tick))
	if !ok || by != "quorum" || late < 2*step+grace || late >= maxDelay {
		t.Fatalf("closed by %q %s after the tick, want %q from %s on, before the deadline %s", by, late, "quorum", 2*step+grace, maxDelay)
	}
	current := 0
	for _, v := range eng.Snapshot(tick).Stations {
		if v.AgeMs == 0 {
			current++
		}
	}
	if current != stations-1 {
		t.Errorf("%d stations current in the tick, want %d (all but the lost one)", current, stations-1)
	}
}

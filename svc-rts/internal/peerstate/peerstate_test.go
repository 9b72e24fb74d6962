package peerstate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/poll"
	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/svc-rts/internal/detect"
	"shindo.dev/svc-rts/internal/detectpb"
	"shindo.dev/svc-rts/internal/rtsgrpc"
)

func natsConn(t *testing.T, opts *server.Options) *nats.Conn {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// answerer answers with state when the asker's input broke after since.
type answerer struct {
	tick, since int64
	state       detect.Saved
}

func (a answerer) Answer(tick, since int64) (rtsgrpc.PeerState, bool) {
	if a.since >= since {
		return rtsgrpc.PeerState{ContinuousSinceMs: a.since}, false
	}
	return rtsgrpc.PeerState{TickMs: min(tick, a.tick), ContinuousSinceMs: a.since, State: a.state}, true
}

// state is a detection with flash and long-period stations.
func state(t *testing.T) detect.Saved {
	t.Helper()
	s := detect.New(detect.Config{})
	const t0 = 1_800_000_000_000
	trig := []detect.Trigger{
		{Station: "A", Lat: 23.99, Lon: 121.61, Box: 18, InBox: true, Code: 970, Intensity: 4.1},
		{Station: "B", Lat: 23.96, Lon: 121.57, Box: 18, InBox: true, Code: 973, Intensity: 3.2},
		{Station: "C", Lat: 23.86, Lon: 121.51, Box: 18, InBox: true, Code: 974, Intensity: 2.7},
	}
	s.Step(t0, trig, nil, nil)
	s.Step(t0+500, trig, []detect.LongPeriod{{Station: "A", Lat: 23.99, Lon: 121.61, SvaCms: 17.3}}, nil)
	v := s.Save()
	if len(v.Events) != 1 || v.Events[0].Pub.Flash == nil || len(v.Events[0].LongPeriod) != 1 {
		t.Fatalf("setup: %+v", v)
	}
	return v
}

// TestAskAndAnswer: over a real NATS server, a core whose input broke
// after the peer's gets the peer's state as it was — the message's
// conversion loses nothing — and one whose input broke earlier gets none.
func TestAskAndAnswer(t *testing.T) {
	t.Parallel()
	nc := natsConn(t, &server.Options{})
	want := state(t)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, nc, "TYO-1", answerer{tick: 1_800_000_000_500, since: 1_000, state: want}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c := NewClient(nc, "TYO-1")
	var (
		ps  rtsgrpc.PeerState
		ok  bool
		err error
	)
	for range 50 { // until the subscription is in place
		actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
		ps, ok, err = c.Ask(actx, 1_800_000_001_000, 5_000)
		acancel()
		if err == nil {
			break
		}
	}
	if err != nil || !ok {
		t.Fatalf("ask: ok %v, %v", ok, err)
	}
	if ps.TickMs != 1_800_000_000_500 || ps.ContinuousSinceMs != 1_000 {
		t.Errorf("state of tick %d, unbroken since %d", ps.TickMs, ps.ContinuousSinceMs)
	}
	if !proto.Equal(detectpb.State(ps.State), detectpb.State(want)) {
		t.Errorf("state received differs from the state sent:\n%v\n%v", detectpb.State(ps.State), detectpb.State(want))
	}
	if _, err := detect.Restore(detect.Config{}, ps.State); err != nil {
		t.Errorf("state received refused: %v", err)
	}

	if _, ok, err := c.Ask(ctx, 1_800_000_001_000, 500); ok || err != nil {
		t.Errorf("a core whose input broke before the peer's: ok %v, %v", ok, err)
	}
	// Garbage on the subject is counted, not answered.
	if err := nc.Publish(natsbus.DetectorSync.Subject("TYO-1"), []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the garbage counted", func() bool { return answered(t, reg, "malformed") == 1 })
	for _, answer := range []string{"state", "not_older"} {
		if got := answered(t, reg, answer); got != 1 {
			t.Errorf("answers %s: %v, want 1", answer, got)
		}
	}
}

// answered is the count of answers of one kind in reg.
func answered(t *testing.T, reg *prometheus.Registry, answer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "answer" && l.GetValue() == answer {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestAnswerOutOfContract: a peer answering with a state of a later tick
// than asked, or no older than the asker's, is an error, not a state.
func TestAnswerOutOfContract(t *testing.T) {
	t.Parallel()
	nc := natsConn(t, &server.Options{})
	v := state(t)
	for _, tc := range []struct {
		name        string
		tick, since int64
	}{{"later tick", 2_000, 100}, {"not older", 1_000, 5_000}, {"no tick", 0, 100}} {
		sub, err := nc.Subscribe(natsbus.DetectorSync.Subject("X"), func(m *nats.Msg) {
			reply, _ := natsbus.DetectorSync.Reply(context.Background(), m.Reply,
				&natsbusv1.DetectorSync{TickMs: tc.tick, ContinuousSinceMs: tc.since, State: detectpb.State(v)})
			nc.PublishMsg(reply)
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, ok, err := NewClient(nc, "X").Ask(ctx, 1_000, 5_000)
		cancel()
		sub.Unsubscribe()
		if ok || !errors.Is(err, errOutOfContract) {
			t.Errorf("%s: ok %v, error %v", tc.name, ok, err)
		}
	}
}

// TestTooLargeNotSent: a state larger than the server's largest message is
// answered without it, and counted.
func TestTooLargeNotSent(t *testing.T) {
	t.Parallel()
	nc := natsConn(t, &server.Options{MaxPayload: 200})
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, nc, "TYO-1", answerer{tick: 1_800_000_000_500, since: 1_000, state: state(t)}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ok bool
	err := errors.New("not asked")
	for i := 0; i < 50 && err != nil; i++ {
		actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, ok, err = NewClient(nc, "TYO-1").Ask(actx, 1_800_000_001_000, 5_000)
		acancel()
	}
	if ok || err != nil {
		t.Errorf("ok %v, %v; want an answer without a state", ok, err)
	}
	if got := answered(t, reg, "too_large"); got != 1 {
		t.Errorf("too_large answers: %v", got)
	}
}

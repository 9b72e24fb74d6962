package rtsgrpc

import (
	"context"
	"log/slog"
	"time"

	"shindo.dev/svc-rts/internal/detect"
	"shindo.dev/svc-rts/internal/shake"
)

// Two cores fed the same frames name the same events alike (package
// shake), and frames that come late are accounted for up to
// shake.LateWindowMs. A core whose input broke for longer — it restarted
// and its rebuild gave up, its ingest was gone, its tick loop stalled —
// cannot know what it missed; left alone it founds the events still in
// progress afresh, under IDs of its own, and clients that switch cores see
// one earthquake twice. So it asks its peer, whose input has been unbroken
// for longer, for the peer's detection state and adopts it: from then on
// both step the same state with the same frames.

// Peer is the other core's svc-rts (package peerstate carries the
// exchange).
type Peer interface {
	// Ask returns the peer's detection state at or before tick, if the
	// peer's input has been unbroken since before since; ok is false when
	// it has not, or the peer has no state yet.
	Ask(ctx context.Context, tick, since int64) (st PeerState, ok bool, err error)
}

// PeerState is a core's detection state at a tick, and since when (Unix
// ms) its input has been unbroken.
type PeerState struct {
	TickMs            int64
	ContinuousSinceMs int64
	State             detect.Saved
}

// peerAskTimeout bounds one question to the peer, and peerAskEvery how
// often a core whose input broke asks again while the peer's is no older.
const (
	peerAskTimeout = 2 * time.Second
	peerAskEvery   = 2 * time.Second
)

// SetPeer makes the server ask p for its detection state after a break of
// its input, for as long as within after the break (a detection's life:
// after that both cores' states hold the same events anyway). Call it
// before Run.
func (s *Server) SetPeer(p Peer, within time.Duration) {
	s.peer, s.peerWithin = p, within
}

// Answer is what this core tells a peer that asks for its detection state:
// the state of tick (or of the latest tick before it) if this core's input
// has been unbroken since before since.
func (s *Server) Answer(tick, since int64) (PeerState, bool) {
	c := s.continuous.Load()
	if !s.warmed() || s.broken.Load() || c >= since {
		return PeerState{ContinuousSinceMs: c}, false
	}
	at, st, ok := s.engine.DetectorState(tick)
	if !ok {
		return PeerState{ContinuousSinceMs: c}, false
	}
	return PeerState{TickMs: at, ContinuousSinceMs: c, State: st}, true
}

// broke records a break of the detections' input now.
func (s *Server) broke(why string) {
	s.continuous.Store(s.now().UnixMilli())
	s.broken.Store(true)
	if s.peer != nil {
		s.log.Warn("detection input broken: asking the peer core for its state", slog.String("why", why))
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// watchInput runs after every tick: an input silent for longer than late
// frames are accounted for is an outage (its end is a break, noted when
// records come again), and a fresh start of the engine's detections is a
// break.
func (s *Server) watchInput(ctx context.Context) {
	if r := s.engine.Restarts(); r != s.restarts {
		s.restarts = r
		s.broke("the tick loop stalled")
	}
	if s.now().UnixMilli()-s.lastApplied.Load() > shake.LateWindowMs && s.outage.CompareAndSwap(false, true) {
		s.log.WarnContext(ctx, "no record in time from ingest for longer than late frames are accounted for",
			slog.Duration("silent", time.Duration(shake.LateWindowMs)*time.Millisecond))
	}
}

// noteApplied follows a batch of records applied from the input, the
// newest frame of which ended at newest (Unix ms). Only a batch in time —
// its newest frame within what late frames are accounted for — counts as
// input: a backlog that old (an ingest that was away, a stream held behind
// a replay) is an outage as much as silence is, once it has lasted as
// long (watchInput). A few stale batches among fresh ones — a backfill
// from the peer — are not. The first batch in time after an outage is a
// break; the peer loop asks at once, so the answer is usually in before
// the tick closes.
func (s *Server) noteApplied(newest int64) {
	now := s.now().UnixMilli()
	if now-newest > shake.LateWindowMs {
		return
	}
	s.lastApplied.Store(now)
	if s.outage.CompareAndSwap(true, false) {
		s.broke("the input came back after an outage")
	}
}

// peerLoop asks the peer after each break, and again every peerAskEvery
// while the break is recent, until ctx ends.
func (s *Server) peerLoop(ctx context.Context) {
	if s.peer == nil {
		return
	}
	t := time.NewTicker(peerAskEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
		s.askPeer(ctx)
	}
}

// askPeer adopts the peer's state if the input broke lately and the
// peer's has been unbroken for longer.
func (s *Server) askPeer(ctx context.Context) {
	if s.peer == nil || !s.broken.Load() {
		return
	}
	since := s.continuous.Load()
	if s.now().UnixMilli()-since > s.peerWithin.Milliseconds() {
		// The events of before the break have ended by now at both cores.
		s.broken.CompareAndSwap(true, false)
		return
	}
	tick := s.engine.DetTick()
	if tick == 0 {
		tick = nextTick(s.now()) - shake.TickMs
	}
	actx, cancel := context.WithTimeout(ctx, peerAskTimeout)
	defer cancel()
	ps, ok, err := s.peer.Ask(actx, tick, since)
	switch {
	case err != nil:
		s.peerAsks.WithLabelValues("failed").Inc()
		s.log.DebugContext(ctx, "peer core did not give its detection state", slog.Any("error", err))
		return
	case !ok:
		s.peerAsks.WithLabelValues("not_older").Inc()
		return
	}
	if err := s.engine.Adopt(ps.TickMs, ps.State); err != nil {
		s.peerAsks.WithLabelValues("failed").Inc()
		s.log.WarnContext(ctx, "peer core's detection state refused", slog.Any("error", err))
		return
	}
	// A break during the question stays a break.
	if s.continuous.CompareAndSwap(since, ps.ContinuousSinceMs) {
		s.broken.Store(false)
	}
	s.peerAsks.WithLabelValues("adopted").Inc()
	ids := make([]string, len(ps.State.Events))
	for i, e := range ps.State.Events {
		ids[i] = e.Pub.ID
	}
	s.log.InfoContext(ctx, "adopted the peer core's detection state", slog.Int64("tick", ps.TickMs),
		slog.Time("peer_unbroken_since", time.UnixMilli(ps.ContinuousSinceMs)), slog.Any("detections", ids))
}

// Package peerstate carries detection state between the cores' svc-rts on
// the NATS contract's hop natsbus.DetectorSync: each core answers on its
// own server, at its own site's subject, and asks its peer on the peer's
// server (the same link the ingest sync takes). The decision of when to
// ask and whether to adopt is package rtsgrpc's.
package peerstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/svc-rts/internal/detectpb"
	"shindo.dev/svc-rts/internal/rtsgrpc"
)

// Answerer gives this core's state to a peer that asks (rtsgrpc.Server).
type Answerer interface {
	Answer(tick, since int64) (rtsgrpc.PeerState, bool)
}

// Serve answers the peer's questions on nc at site's subject until ctx
// ends. Every question is counted by result in
// shindo_rts_peer_state_answers_total.
func Serve(ctx context.Context, nc *nats.Conn, site string, a Answerer, reg prometheus.Registerer, log *slog.Logger) error {
	answers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_rts_peer_state_answers_total",
		Help: "Questions of the peer core for this core's detection state, by answer: state, not_older (this core's input broke later than the peer's, or it has no state yet), too_large (more than the server's largest message), malformed.",
	}, []string{"answer"})
	reg.MustRegister(answers)
	sub, err := nc.Subscribe(natsbus.DetectorSync.Subject(site), func(m *nats.Msg) {
		req, err := natsbus.DetectorSync.Decode(m.Data)
		if err != nil || m.Reply == "" {
			answers.WithLabelValues("malformed").Inc()
			return
		}
		ps, ok := a.Answer(req.GetTickMs(), req.GetContinuousSinceMs())
		out := &natsbusv1.DetectorSync{TickMs: ps.TickMs, ContinuousSinceMs: ps.ContinuousSinceMs}
		result := "not_older"
		if ok {
			out.State, result = detectpb.State(ps.State), "state"
		}
		reply, err := natsbus.DetectorSync.Reply(ctx, m.Reply, out)
		if err == nil && int64(len(reply.Data)) > nc.MaxPayload() {
			log.WarnContext(ctx, "detection state larger than the NATS server's largest message: not sent",
				slog.Int("bytes", len(reply.Data)), slog.Int64("max", nc.MaxPayload()))
			out.State, result = nil, "too_large"
			reply, err = natsbus.DetectorSync.Reply(ctx, m.Reply, out)
		}
		if err == nil {
			err = nc.PublishMsg(reply)
		}
		if err != nil {
			log.DebugContext(ctx, "answer to the peer core not sent", slog.Any("error", err))
			return
		}
		answers.WithLabelValues(result).Inc()
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", natsbus.DetectorSync.Subject(site), err)
	}
	<-ctx.Done()
	return sub.Unsubscribe()
}

// Client asks the peer core, on the peer's server nc; it implements
// rtsgrpc.Peer.
type Client struct {
	nc       *nats.Conn
	peerSite string
}

// NewClient returns a client of the core at peerSite, reached through nc.
func NewClient(nc *nats.Conn, peerSite string) *Client { return &Client{nc: nc, peerSite: peerSite} }

// errOutOfContract: the answer is not what the question allows.
var errOutOfContract = errors.New("peer core answered out of contract")

// Ask implements rtsgrpc.Peer.
func (c *Client) Ask(ctx context.Context, tick, since int64) (rtsgrpc.PeerState, bool, error) {
	msg, err := natsbus.DetectorSync.Msg(ctx, c.peerSite, &natsbusv1.DetectorSync{TickMs: tick, ContinuousSinceMs: since})
	if err != nil {
		return rtsgrpc.PeerState{}, false, err
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return rtsgrpc.PeerState{}, false, fmt.Errorf("ask %s: %w", c.peerSite, err)
	}
	a, err := natsbus.DetectorSync.Decode(resp.Data)
	if err != nil {
		return rtsgrpc.PeerState{}, false, err
	}
	if a.State == nil {
		return rtsgrpc.PeerState{ContinuousSinceMs: a.GetContinuousSinceMs()}, false, nil
	}
	if a.GetTickMs() <= 0 || a.GetTickMs() > tick || a.GetContinuousSinceMs() >= since {
		return rtsgrpc.PeerState{}, false, fmt.Errorf("%w: state of tick %d for %d, unbroken since %d for %d",
			errOutOfContract, a.GetTickMs(), tick, a.GetContinuousSinceMs(), since)
	}
	return rtsgrpc.PeerState{TickMs: a.GetTickMs(), ContinuousSinceMs: a.GetContinuousSinceMs(), State: detectpb.FromState(a.GetState())}, true, nil
}

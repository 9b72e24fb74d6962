// Package verify is svc-ingest's packet gate: it takes one raw datagram from
// a station and decides, in SPEC §3 order — decode, station lookup, MAC,
// freshness, replay window — whether to process it, ack it again, or drop
// it, and builds the signed ack. It knows nothing of sockets.
//
// A new packet is acked only once it is recorded: Check finds it new,
// the caller makes it durable, then Commit marks its seq in the replay
// window and signs the ack. A retransmission that arrives before the commit
// is new too and recorded twice, which consumers absorb; one that arrives
// after is a duplicate, acked again at once because its original is safe.
package verify

import (
	"errors"
	"time"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/stationwire"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-ingest/internal/replay"
)

// Result is what happened to a datagram; its String is the `result` label
// of shindo_ingest_packets_total.
type Result int

// Results, one per label value of SPEC §3, plus Overloaded for a valid new
// packet that could not be handed on (not acked, so the station retries),
// OutOfBounds for a signed packet whose content no station could mean (a
// frame time far from its send time, a value off any scale, a seq leaping
// past the jump bound) and RateLimited for a station sending faster than
// its budget. A key can leak; what it signs is bounded before it is
// trusted, so one key cannot take its station, or a core, down.
const (
	Accepted Result = iota
	Duplicate
	BadMAC
	Replayed
	Stale
	Malformed
	Oversize
	UnknownStation
	Overloaded
	OutOfBounds
	RateLimited
)

var resultNames = [...]string{"accepted", "duplicate", "bad_mac", "replayed", "stale", "malformed", "oversize", "unknown_station",
	"overloaded", "out_of_bounds", "rate_limited"}

func (r Result) String() string { return resultNames[r] }

// Results lists every result, for pre-creating metric series.
func Results() []Result {
	rs := make([]Result, len(resultNames))
	for i := range rs {
		rs[i] = Result(i)
	}
	return rs
}

// Stations finds a station by ID.
type Stations interface {
	Lookup(id string) (*registry.Station, bool)
}

// Limits bound what a station may send and claim.
type Limits struct {
	// Freshness is how far sent_at_ms, and the times a frame carries, may
	// be from the server clock.
	Freshness time.Duration
	// Window is how many seqs per station are remembered for replay
	// protection.
	Window int
	// MaxSeqJump is how far above the highest seq recorded a new one may
	// be (0: no bound): a seq leaping further is refused, so a packet with
	// seq 2^63−1 cannot make every later one a replay. An admin resets a
	// station whose counter really restarted (registry.Station.SeqResetMs).
	MaxSeqJump uint64
	// Rate and Burst are the packets per second a station may send, and
	// at once (0: no bound).
	Rate, Burst float64
}

// DefaultLimits are the limits of SPEC §3 and the bounds ingest applies.
// A station sends 4 packets a second (intensity and sensor frames every
// 500 ms), twice that while it retransmits: 20 a second with a burst of
// 100 leave room; 100 million seqs are 290 days of a station's packets.
func DefaultLimits() Limits {
	return Limits{Freshness: 30 * time.Second, Window: 4096, MaxSeqJump: 100_000_000, Rate: 20, Burst: 100}
}

// Gate checks datagrams for one core site.
type Gate struct {
	site     string
	stations Stations
	limits   Limits
	windows  *replay.Set
	buckets  buckets // new packets, per station
	copies   buckets // copies of packets already had, per station
	now      func() time.Time
}

// New returns a gate for site.
func New(site string, stations Stations, limits Limits) *Gate {
	return &Gate{site: site, stations: stations, limits: limits, windows: replay.NewSet(limits.Window),
		buckets: buckets{m: map[string]*bucket{}}, copies: buckets{m: map[string]*bucket{}}, now: time.Now}
}

// Outcome is the gate's decision on one datagram.
type Outcome struct {
	Result Result
	// Packet is the decoded packet when the MAC was good.
	Packet *stationv1.Packet
	// Raw is the packet as the station serialized it (what the MAC covers).
	Raw []byte
	// Ack is the signed ack datagram to send back; nil when none is due.
	// For a new packet it is set by Commit.
	Ack []byte
	// RecvAt is the server clock at the decision.
	RecvAt time.Time
	// SEED are the station's codes in the registry, when it is known:
	// the record carries them to the archive.
	SEED seedcode.Codes

	signer *stationwire.Signer
	keyID  uint32
}

// Check decides on datagram b. Accepted means new: the caller records the
// packet durably and then calls Commit (or gives up, and the station will
// retransmit).
func (g *Gate) Check(b []byte) Outcome {
	now := g.now()
	out := Outcome{RecvAt: now}
	d, err := stationwire.Open(b)
	if err != nil {
		if errors.Is(err, stationwire.ErrOversize) {
			out.Result = Oversize
		} else {
			out.Result = Malformed
		}
		return out
	}
	p, err := stationwire.Packet(d)
	if err != nil {
		out.Result = Malformed
		return out
	}
	st, ok := g.stations.Lookup(p.GetStationId())
	if !ok || !st.InService() {
		out.Result = UnknownStation
		return out
	}
	out.SEED = st.SEED
	signer, ok := st.Signer(d.GetKeyId())
	if !ok || !signer.Verify(d) {
		out.Result = BadMAC
		return out
	}
	out.Packet, out.Raw = p, d.GetPacket()
	if p.GetBody() == nil {
		out.Result = Malformed
		return out
	}
	if skew := now.Sub(time.UnixMilli(p.GetSentAtMs())); skew > g.limits.Freshness || skew < -g.limits.Freshness {
		out.Result = Stale
		return out
	}
	if !Bounded(p, g.limits.Freshness) {
		out.Result = OutOfBounds
		return out
	}
	out.signer, out.keyID = signer, d.GetKeyId()
	// The replay window comes before the station's budget, and a copy of
	// a packet already had draws on a budget of its own: anyone who saw
	// one of a station's datagrams may send it again for as long as it is
	// fresh, and copies drawing on the station's budget would leave none
	// for its new packets. Copies stay bounded all the same: each is
	// acked, to whatever address it came from.
	w := g.window(st)
	switch w.Check(p.GetSeq()) {
	case replay.TooOld:
		out.Result = Replayed
	case replay.Duplicate:
		if !g.copies.take(p.GetStationId(), now, g.limits.Rate, g.limits.Burst) {
			out.Result = RateLimited
			break
		}
		out.Result = Duplicate
		out.Ack = out.sign(g.site)
	case replay.New:
		if top := w.Top(); g.limits.MaxSeqJump > 0 && top > 0 && p.GetSeq() > top && p.GetSeq()-top > g.limits.MaxSeqJump {
			out.Result = OutOfBounds
			break
		}
		if !g.buckets.take(p.GetStationId(), now, g.limits.Rate, g.limits.Burst) {
			out.Result = RateLimited
			break
		}
		out.Result = Accepted
	}
	return out
}

// Commit marks an accepted packet as recorded and signs its ack. It
// reports false when a concurrent delivery of the same seq committed first
// (the ack is then signed all the same: the packet is recorded).
func (g *Gate) Commit(o *Outcome) bool {
	first := g.windows.For(o.Packet.GetStationId()).Accept(o.Packet.GetSeq()) == replay.New
	o.Ack = o.sign(g.site)
	return first
}

// AckOnly signs an accepted packet's ack without marking it recorded: for
// probes, which are answered but not kept.
func (g *Gate) AckOnly(o *Outcome) []byte {
	o.Ack = o.sign(g.site)
	return o.Ack
}

// window is the station's replay window, forgotten first if an admin
// reset the station's counter since (registry.Station.SeqResetMs): its
// new seqs start low again.
func (g *Gate) window(st *registry.Station) *replay.Window {
	w := g.windows.For(st.ID)
	if st.SeqResetMs > 0 {
		w.Reset(st.SeqResetMs)
	}
	return w
}

// Record marks (station, seq), received at Unix ms recvAtMs, as recorded
// when it arrived another way (from the peer core, or the journal after a
// restart) and reports whether it was new. A record received before the
// station's counter was reset belongs to the old count and is not new.
func (g *Gate) Record(station string, seq uint64, recvAtMs int64) bool {
	if st, ok := g.stations.Lookup(station); ok {
		if recvAtMs < st.SeqResetMs {
			return false
		}
		return g.window(st).Accept(seq) == replay.New
	}
	return g.windows.For(station).Accept(seq) == replay.New
}

// Windows returns a copy of every station's replay window, for keeping
// them across a restart.
func (g *Gate) Windows() map[string]replay.State { return g.windows.States() }

// WindowWords is how many 64-bit words a replay window's bitmap has.
func (g *Gate) WindowWords() int { return g.windows.Words() }

// RestoreWindows replaces the replay windows with those Windows returned
// before a restart.
func (g *Gate) RestoreWindows(states map[string]replay.State) error { return g.windows.Restore(states) }

// Recorded returns the station's replay window, the record of which seqs
// this core holds, for the sync with the peer core.
func (g *Gate) Recorded(station string) *replay.Window { return g.windows.For(station) }

func (o *Outcome) sign(site string) []byte {
	ack, err := o.signer.Seal(o.keyID, &stationv1.Ack{
		StationId: o.Packet.GetStationId(),
		Seq:       o.Packet.GetSeq(),
		RecvAtMs:  o.RecvAt.UnixMilli(),
		Site:      site,
	})
	if err != nil {
		return nil
	}
	return ack
}

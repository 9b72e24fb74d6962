// Package verify is svc-ingest's packet gate: it takes one raw datagram from
// a station and decides, in SPEC §3 order — decode, station lookup, MAC,
// freshness, replay window — whether to process it, ack it again, or drop
// it, and builds the signed ack. It knows nothing of sockets.
package verify

import (
	"time"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/replay"
	"shindo.dev/lib/stationwire"
)

// Result is what happened to a datagram; its String is the `result` label
// of shindo_ingest_packets_total.
type Result int

// Results, one per label value of SPEC §3, plus Overloaded for a valid new
// packet that could not be handed on (not acked, so the station retries).
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
)

var resultNames = [...]string{"accepted", "duplicate", "bad_mac", "replayed", "stale", "malformed", "oversize", "unknown_station", "overloaded"}

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

// Gate checks datagrams for one core site.
type Gate struct {
	site      string
	stations  Stations
	freshness time.Duration
	windows   *replay.Set
	now       func() time.Time
}

// New returns a gate for site. Packets whose sent_at_ms is further than
// freshness from the server clock are stale; windowSize seqs per station are
// remembered for replay protection.
func New(site string, stations Stations, freshness time.Duration, windowSize int) *Gate {
	return &Gate{site: site, stations: stations, freshness: freshness, windows: replay.NewSet(windowSize), now: time.Now}
}

// Outcome is the gate's decision on one datagram.
type Outcome struct {
	Result Result
	// Packet is the decoded packet when the MAC was good.
	Packet *stationv1.Packet
	// Ack is the signed ack datagram to send back; nil when none is due.
	Ack []byte
	// RecvAt is the server clock at the decision.
	RecvAt time.Time
}

// Check decides on datagram b. For a new packet it calls handOn, which must
// take the packet (true) or refuse it (false, e.g. a full queue downstream);
// only a packet handed on is acked, so an ack always means the core has it.
func (g *Gate) Check(b []byte, handOn func(*stationv1.Packet, time.Time) bool) Outcome {
	now := g.now()
	out := Outcome{RecvAt: now}
	d, err := stationwire.Open(b)
	if err != nil {
		if err == stationwire.ErrOversize {
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
	signer, ok := st.Signer(d.GetKeyId())
	if !ok || !signer.Verify(d) {
		out.Result = BadMAC
		return out
	}
	out.Packet = p
	if p.GetBody() == nil {
		out.Result = Malformed
		return out
	}
	if skew := now.Sub(time.UnixMilli(p.GetSentAtMs())); skew > g.freshness || skew < -g.freshness {
		out.Result = Stale
		return out
	}
	w := g.windows.For(p.GetStationId())
	switch w.Accept(p.GetSeq()) {
	case replay.TooOld:
		out.Result = Replayed
		return out
	case replay.Duplicate:
		out.Result = Duplicate
	case replay.New:
		if !handOn(p, now) {
			w.Forget(p.GetSeq())
			out.Result = Overloaded
			return out
		}
		out.Result = Accepted
	}
	ack, err := signer.Seal(d.GetKeyId(), &stationv1.Ack{
		StationId: p.GetStationId(),
		Seq:       p.GetSeq(),
		RecvAtMs:  now.UnixMilli(),
		Site:      g.site,
	})
	if err == nil {
		out.Ack = ack
	}
	return out
}

package peersync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/recordwire"
	"shindo.dev/svc-ingest/internal/replay"
)

// natsServer runs a real NATS server in-process on a random port.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// gate is the record of held seqs of one core.
type gate struct {
	w *replay.Set
}

func (g *gate) Recorded(station string) *replay.Window { return g.w.For(station) }
func (g *gate) Record(station string, seq uint64, _ int64) bool {
	return g.w.For(station).Accept(seq) == replay.New
}

// core is one side: NATS server, journal, gate, syncer.
type core struct {
	site    string
	srv     *server.Server
	journal *journal.Journal
	gate    *gate
	syncer  *Syncer
}

func newCore(t *testing.T, site string) *core {
	j, err := journal.Open(t.TempDir(), journal.Options{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &core{site: site, srv: natsServer(t), journal: j, gate: &gate{w: replay.NewSet(4096)}}
}

// receive records packets as if they came straight from stations.
func (c *core) receive(t *testing.T, station string, seqs ...uint64) {
	t.Helper()
	for _, seq := range seqs {
		if !c.gate.Record(station, seq, 0) {
			continue
		}
		rec := &ingestv1.Record{Site: c.site, Packet: &stationv1.Packet{StationId: station, Seq: seq,
			Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: int64(seq) * 500}}}}
		b, _ := proto.Marshal(rec)
		idx, err := c.journal.Append(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if c.syncer != nil {
			c.syncer.Indexed(station, seq, idx)
		}
	}
}

// held returns each station's seqs recorded in the journal, with counts.
func (c *core) held(t *testing.T) map[string]map[uint64]int {
	t.Helper()
	out := map[string]map[uint64]int{}
	for from := uint64(0); ; {
		es, err := c.journal.Read(from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		for _, e := range es {
			st, seq, ok := recordwire.Peek(e.Payload)
			if !ok {
				t.Fatalf("unreadable record %d", e.Index)
			}
			if out[st] == nil {
				out[st] = map[uint64]int{}
			}
			out[st][seq]++
		}
		from = es[len(es)-1].Index + 1
	}
}

func pair(t *testing.T, interval, longEvery time.Duration) (a, b *core) {
	a, b = newCore(t, "TNN-1"), newCore(t, "TYO-1")
	for _, c := range []struct{ self, other *core }{{a, b}, {b, a}} {
		c.self.syncer = New(Config{
			Site: c.self.site, PeerSite: c.other.site,
			Local: connect(t, c.self.srv.ClientURL()), Peer: connect(t, c.other.srv.ClientURL()),
			Gate: c.self.gate, Journal: c.self.journal, Stations: func() []string { return []string{"S1", "S2"} },
			Interval: interval, ShortWindow: 64, LongWindow: 4096, LongEvery: longEvery, MaxRecords: 100_000,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: prometheus.NewRegistry(),
		})
	}
	return a, b
}

func run(t *testing.T, cs ...*core) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, c := range cs {
		go c.syncer.Run(ctx)
	}
}

// serving waits until c's syncer answers requests: its server has its
// subscription.
func serving(t *testing.T, c *core) {
	t.Helper()
	subject := natsbus.Sync.Subject(c.site)
	if !poll.Within(10*time.Second, func() bool { return c.srv.GlobalAccount().SubscriptionInterest(subject) }) {
		t.Fatalf("%s does not serve %s", c.site, subject)
	}
}

func waitConverged(t *testing.T, a, b *core, want map[string]int) {
	t.Helper()
	waitConvergedWithin(t, 10*time.Second, a, b, want)
}

func waitConvergedWithin(t *testing.T, within time.Duration, a, b *core, want map[string]int) {
	t.Helper()
	var ha, hb map[string]map[uint64]int
	if !poll.Within(within, func() bool {
		ha, hb = a.held(t), b.held(t)
		for st, n := range want {
			if len(ha[st]) != n || len(hb[st]) != n {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not converged: A holds %d/%d, B holds %d/%d of S1", len(ha["S1"]), want["S1"], len(hb["S1"]), want["S1"])
	}
	for _, h := range []map[string]map[uint64]int{ha, hb} {
		for st, seqs := range h {
			for seq, k := range seqs {
				if k != 1 {
					t.Fatalf("%s seq %d recorded %d times", st, seq, k)
				}
			}
		}
	}
}

func seqs(from, to uint64, skip func(uint64) bool) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		if skip == nil || !skip(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestGapsFilledEachOnce: each core misses different packets (one uplink
// lost them); after the exchange both hold everything, each seq once.
func TestGapsFilledEachOnce(t *testing.T) {
	t.Parallel()
	a, b := pair(t, 50*time.Millisecond, time.Hour)
	a.receive(t, "S1", seqs(1, 300, func(s uint64) bool { return s%7 == 0 })...)
	b.receive(t, "S1", seqs(1, 300, func(s uint64) bool { return s%11 == 0 })...)
	b.receive(t, "S2", seqs(1, 50, nil)...) // A never heard S2
	run(t, a, b)
	// Multiples of 77 reached neither core.
	waitConverged(t, a, b, map[string]int{"S1": 300 - 300/77, "S2": 50})
	// A core counts what it received once its journal holds it, just
	// after the records became visible to waitConverged.
	want := float64(300/7 + 300/11 - 2*(300/77) + 50)
	exchanged := func() float64 { return counter(a.syncer.received) + counter(b.syncer.received) }
	poll.Within(5*time.Second, func() bool { return exchanged() >= want })
	if got := exchanged(); got != want {
		t.Fatalf("%v records exchanged, want exactly the missing ones (%v)", got, want)
	}
}

// TestSteadyStateSendsNoRecords: when both cores hold the same packets,
// the exchange moves holdings only.
func TestSteadyStateSendsNoRecords(t *testing.T) {
	t.Parallel()
	a, b := pair(t, 20*time.Millisecond, time.Hour)
	a.receive(t, "S1", seqs(1, 500, nil)...)
	b.receive(t, "S1", seqs(1, 500, nil)...)
	run(t, a, b)
	poll.Until(t, 5*time.Second, "ten exchanges each way", func() bool {
		return counter(a.syncer.requests) >= 10 && counter(b.syncer.requests) >= 10
	})
	if n := counter(a.syncer.sent) + counter(b.syncer.sent); n != 0 {
		t.Fatalf("%v records sent between cores holding the same", n)
	}
}

// TestBackfillAfterPeerOutage: while A is unreachable, B records what A
// misses (A's uplinks were down too); once A is back, a long exchange —
// periodic, and after B's failed ones — fills A far beyond the short
// window.
func TestBackfillAfterPeerOutage(t *testing.T) {
	t.Parallel()
	a, b := pair(t, 50*time.Millisecond, 500*time.Millisecond)
	a.receive(t, "S1", seqs(1, 100, nil)...)
	b.receive(t, "S1", seqs(1, 100, nil)...)
	run(t, a, b)
	waitConverged(t, a, b, map[string]int{"S1": 100})
	// A's server goes away; B keeps receiving 2,000 packets A never sees.
	port := a.srv.Addr().(*net.TCPAddr).Port
	a.srv.Shutdown()
	b.receive(t, "S1", seqs(101, 2100, nil)...)
	a.receive(t, "S1", 2101, 2102)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats did not come back")
	}
	t.Cleanup(srv.Shutdown)
	waitConverged(t, a, b, map[string]int{"S1": 2102})
}

// bulk records a run of packets of station, as receive does, in batches:
// the busy journal of a core whose other stations send too.
func (c *core) bulk(t *testing.T, station string, from, to uint64) {
	t.Helper()
	for lo := from; lo <= to; lo += 4096 {
		var payloads [][]byte
		var got []uint64
		for seq := lo; seq <= min(lo+4095, to); seq++ {
			if !c.gate.Record(station, seq, 0) {
				continue
			}
			rec := &ingestv1.Record{Site: c.site, Packet: &stationv1.Packet{StationId: station, Seq: seq,
				Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: int64(seq) * 500}}}}
			b, _ := proto.Marshal(rec)
			payloads, got = append(payloads, b), append(got, seq)
		}
		first, err := c.journal.Append(context.Background(), payloads...)
		if err != nil {
			t.Fatal(err)
		}
		for k, seq := range got {
			c.syncer.Indexed(station, seq, first+uint64(k))
		}
	}
}

// TestAnswerJumpsOverTheJournal: a core back from an outage lacks an old
// stretch and a recent one of S1, with the records of a busy station in
// between in its peer's journal; the answer reads where S1's wanted
// blocks are and jumps over the rest. (Reading it all, under the load of
// 1,000 stations, outlasted the asker's wait — and the asker asked as far
// back again, for ever: the hour of chaos of 2026-12-02.)
func TestAnswerJumpsOverTheJournal(t *testing.T) {
	t.Parallel()
	a, b := pair(t, 20*time.Millisecond, time.Hour)
	b.receive(t, "S1", seqs(1, 100, nil)...)
	b.bulk(t, "X", 1, 60_000) // not compared: another core's business
	b.receive(t, "S1", seqs(101, 4000, nil)...)
	a.receive(t, "S1", seqs(1, 4000, func(s uint64) bool { return s >= 10 && s <= 12 || s >= 3900 && s <= 3990 })...)
	run(t, a, b)
	waitConverged(t, a, b, map[string]int{"S1": 4000})
	if n := counter(b.syncer.scanned); n >= 20_000 {
		t.Fatalf("%v journal records read to answer, of the %d between the stretches", n, 60_000)
	}
}

// TestAnswerWithinBudget: an answer stops reading at its budget and sends
// what it found; the exchanges after it bring the rest, none failing.
func TestAnswerWithinBudget(t *testing.T) {
	t.Parallel()
	a, b := pair(t, 20*time.Millisecond, 20*time.Millisecond) // every exchange looks far back
	b.syncer.cfg.AnswerBudget = time.Nanosecond               // one read per answer
	for lo := uint64(1); lo <= 2000; lo += 200 {
		b.receive(t, "S1", seqs(lo, lo+199, nil)...)
		b.bulk(t, "X", lo*25, lo*25+4999)
	}
	a.receive(t, "S1", seqs(1, 2000, func(s uint64) bool { return s%10 == 0 })...)
	// b answers before a asks: a request that finds no responder yet is
	// an exchange failed, and this test counts them.
	run(t, b)
	serving(t, b)
	run(t, a)
	// An answer a round, many rounds: slow under the race detector.
	waitConvergedWithin(t, time.Minute, a, b, map[string]int{"S1": 2000})
	if f := counter(a.syncer.failures); f != 0 {
		t.Fatalf("%v exchanges failed", f)
	}
	// The wanted records are spread over a journal of 52,000: each answer
	// read one batch of 4,096, and it took several.
	if r := counter(a.syncer.requests); r < 5 || counter(b.syncer.scanned) > 4096*r {
		t.Fatalf("%v journal records read over %v exchanges", counter(b.syncer.scanned), r)
	}
}

func counter(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// encodedFrame is a frame as it goes on the wire.
func encodedFrame(t testing.TB, f *natsbusv1.SyncFrame) []byte {
	t.Helper()
	b, err := natsbus.Sync.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzUnframe(f *testing.F) {
	f.Add(encodedFrame(f, frame([]byte("holdings"))))
	f.Add(encodedFrame(f, frame(bytes.Repeat([]byte{0xff}, 1000))))
	f.Add(encodedFrame(f, &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_NONE, Message: []byte{1, 2}}))
	f.Add(encodedFrame(f, &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_DEFLATE, Message: []byte{0xff}}))
	f.Add(encodedFrame(f, &natsbusv1.SyncFrame{Compression: 7}))
	f.Add([]byte{1, 0xff}) // the framing before natsbus: a byte, then deflate
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := unframe(b)
		if err == nil && len(out) > maxUnframed {
			t.Fatal("oversize")
		}
		var req ingestv1.SyncRequest
		if err == nil {
			proto.Unmarshal(out, &req)
		}
	})
}

// TestFrameRoundTrip: what compresses is deflated, what does not goes as
// it is; either comes back whole, and frames that do not follow the
// contract are refused.
func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []byte
		want natsbusv1.Compression
	}{
		{nil, natsbusv1.Compression_COMPRESSION_NONE},
		{[]byte("x"), natsbusv1.Compression_COMPRESSION_NONE},
		{bytes.Repeat([]byte{0xff}, 10_000), natsbusv1.Compression_COMPRESSION_DEFLATE},
	} {
		f := frame(c.in)
		if f.GetCompression() != c.want {
			t.Errorf("%d bytes framed %v, want %v", len(c.in), f.GetCompression(), c.want)
		}
		out, err := unframe(encodedFrame(t, f))
		if err != nil || !bytes.Equal(out, c.in) {
			t.Fatalf("round trip of %d bytes: %v", len(c.in), err)
		}
	}
	for name, b := range map[string][]byte{
		"before natsbus":          {1, 0x4b, 0x04, 0x00},
		"compression missing":     encodedFrame(t, &natsbusv1.SyncFrame{Message: []byte("x")}),
		"unknown compression":     encodedFrame(t, &natsbusv1.SyncFrame{Compression: 7, Message: []byte("x")}),
		"deflate of a bad stream": encodedFrame(t, &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_DEFLATE, Message: []byte{0xff}}),
	} {
		if _, err := unframe(b); err == nil {
			t.Errorf("%s: unframed without error", name)
		}
	}
}

// TestUnreadableRequestRefused: a request in a SyncFrame is answered; one
// in another framing (a peer of the version before natsbus: one byte, then
// the message) is counted and left unanswered.
func TestUnreadableRequestRefused(t *testing.T) {
	t.Parallel()
	a, _ := pair(t, time.Hour, time.Hour)
	a.receive(t, "S1", seqs(1, 10, nil)...)
	run(t, a)
	nc := connect(t, a.srv.ClientURL())
	req, _ := proto.Marshal(&ingestv1.SyncRequest{Site: "TYO-1", Stations: []*ingestv1.StationHoldings{{StationId: "S1"}}})
	msg, err := natsbus.Sync.Msg(t.Context(), "TNN-1", frame(req))
	if err != nil {
		t.Fatal(err)
	}
	var answer *nats.Msg
	poll.Within(5*time.Second, func() bool { // until the syncer serves
		answer, err = nc.RequestMsg(msg, 5*time.Second)
		return !errors.Is(err, nats.ErrNoResponders)
	})
	if err != nil {
		t.Fatal(err)
	}
	var resp ingestv1.SyncResponse
	data, err := unframe(answer.Data)
	if err == nil {
		err = proto.Unmarshal(data, &resp)
	}
	if err != nil || !resp.GetLast() || len(resp.GetRecords()) != 10 {
		t.Fatalf("answer: %d records, last %v, %v", len(resp.GetRecords()), resp.GetLast(), err)
	}

	if _, err := nc.Request(natsbus.Sync.Subject("TNN-1"), append([]byte{0}, req...), 300*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a request in the old framing: %v, want no answer", err)
	}
	if n := counter(a.syncer.refused); n != 1 {
		t.Fatalf("refused %v, want 1", n)
	}
}

// Package peersync fills a core's gaps from its peer (SPEC §2 step 5).
//
// Both cores normally receive every packet directly, so mirroring the
// peer's stream would mostly move duplicates between sites. Instead each
// core asks its peer every second for what it lacks: it sends, per station,
// the highest seq it holds and a bitmap of the seqs below it (SyncRequest),
// and the peer answers with just the records the bitmap misses
// (SyncResponse). In steady state that is a few dozen bytes per station and
// second. Every LongEvery, and after any failed exchange (the peer was down
// or unreachable), the bitmaps cover LongWindow seqs instead of
// ShortWindow, which is how a core that was away backfills what it missed.
//
// Records that arrive this way go through the same replay windows as
// direct packets — a (station, seq) is recorded once, whichever path it
// came by — and into the journal, and from there to rts and waveform.
//
// The exchange rides on NATS, on the hop natsbus.Sync of the NATS contract:
// each core serves the subject of its own site on its own server, and asks
// its peer on the peer's server. Every message travels in a SyncFrame,
// deflated when that makes it smaller, which it says in the frame's
// compression: holdings are mostly runs of ones and sequential station IDs,
// which compress several-fold, so the frame's few bytes cost far less than
// deflating saves.
package peersync

import (
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/telemetry"
	"shindo.dev/svc-ingest/internal/checkpoint"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/recordwire"
	"shindo.dev/svc-ingest/internal/replay"
)

// Gate is the part of the packet gate the sync uses.
type Gate interface {
	Recorded(station string) *replay.Window
	Record(station string, seq uint64, recvAtMs int64) bool
}

// Config wires a Syncer.
type Config struct {
	Site, PeerSite string
	// Local is this core's NATS, where the peer's requests are served;
	// Peer the peer's, where this core asks. Either may be nil (no sync in
	// that direction).
	Local, Peer *nats.Conn
	Gate        Gate
	Journal     *journal.Journal
	// Guard, if set, is held around each recording of what the peer
	// sent, so a checkpoint never sees the windows and the journal apart.
	Guard *checkpoint.Guard
	// Stations lists the stations to compare.
	Stations func() []string

	Interval    time.Duration // between requests (1s)
	ShortWindow int           // seqs compared per station normally (64)
	LongWindow  int           // seqs compared in a long exchange (4096)
	LongEvery   time.Duration // period of long exchanges (30s)
	// MaxRecords bounds one answer; the rest comes with the next.
	MaxRecords int
	// AnswerBudget bounds the journal reading of one answer (default 3s):
	// what it found by then is sent, the rest comes with the next
	// exchange. Without it an answer looking far back could outlast the
	// asker's wait, and the asker, having failed, would ask as far back
	// again — for ever.
	AnswerBudget time.Duration
	Log          *slog.Logger
	Metrics      prometheus.Registerer
}

const (
	stationsPerRequest = 1000
	responseBytes      = 512 << 10
	answerTimeout      = 10 * time.Second
	blockSeqs          = 64
)

// Syncer runs both sides of the exchange for one core.
type Syncer struct {
	cfg    Config
	tracer trace.Tracer

	mu    sync.Mutex
	index map[string]*blocks // where each station's seqs sit in the journal
	// resume is, by asking site and station, for each seq an answer
	// looked for and did not find, where its reading stopped: the record
	// lies after it (the journal only grows), so the next answer reads on
	// from there rather than again from the block's start. Answers run one
	// at a time.
	resume map[string]map[string]map[uint64]uint64

	sent, received, requests, failures, refused, scanned prometheus.Counter
}

// blocks remembers, for each run of 64 seqs of a station, the journal
// index of its first record, so an answer scans the journal only from
// there (a ring over the long window).
type blocks struct {
	block []uint64 // seq/64 of the slot, +1 (0 = empty)
	first []uint64
}

// New returns a syncer.
func New(cfg Config) *Syncer {
	s := &Syncer{cfg: cfg, index: map[string]*blocks{}, resume: map[string]map[string]map[uint64]uint64{}, tracer: telemetry.Tracer("shindo.dev/svc-ingest"),
		sent:     prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_records_sent_total", Help: "Records sent to the peer core because it lacked them."}),
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_records_received_total", Help: "Records received from the peer core that this core lacked."}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_requests_total", Help: "Exchanges asked of the peer core."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_failures_total", Help: "Exchanges with the peer core that failed."}),
		refused:  prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_requests_refused_total", Help: "Requests of the peer core left unanswered: no reply subject, or not a SyncFrame holding a SyncRequest."}),
		scanned:  prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_sync_journal_scanned_total", Help: "Journal records read to answer the peer core's requests."}),
	}
	if s.cfg.AnswerBudget <= 0 {
		s.cfg.AnswerBudget = 3 * time.Second
	}
	cfg.Metrics.MustRegister(s.sent, s.received, s.requests, s.failures, s.refused, s.scanned)
	for _, c := range []struct {
		conn *nats.Conn
		name string
	}{{cfg.Peer, "peer"}, {cfg.Local, "local"}} {
		if c.conn == nil {
			continue
		}
		conn := c.conn
		cfg.Metrics.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shindo_sync_bytes_total", Help: "Bytes of the sync exchange, by connection (peer: this core's requests and the answers; local: answers to the peer) and direction.",
				ConstLabels: prometheus.Labels{"conn": c.name, "direction": "out"}}, func() float64 { return float64(conn.Stats().OutBytes) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shindo_sync_bytes_total", Help: "Bytes of the sync exchange, by connection (peer: this core's requests and the answers; local: answers to the peer) and direction.",
				ConstLabels: prometheus.Labels{"conn": c.name, "direction": "in"}}, func() float64 { return float64(conn.Stats().InBytes) }))
	}
	return s
}

// Indexed notes that (station, seq) is at journal index idx.
func (s *Syncer) Indexed(station string, seq, idx uint64) {
	n := s.slots()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.index[station]
	if b == nil {
		b = &blocks{block: make([]uint64, n), first: make([]uint64, n)}
		s.index[station] = b
	}
	blk := seq / blockSeqs
	slot := blk % uint64(n)
	if b.block[slot] != blk+1 || idx < b.first[slot] {
		if b.block[slot] != blk+1 {
			b.block[slot], b.first[slot] = blk+1, idx
		} else {
			b.first[slot] = idx
		}
	}
}

// slots is the length of each station's ring of blocks.
func (s *Syncer) slots() int { return max(s.cfg.LongWindow/blockSeqs, 1) + 1 }

// Index returns a copy of the index, for a checkpoint.
func (s *Syncer) Index() (map[string]checkpoint.Blocks, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]checkpoint.Blocks, len(s.index))
	for id, b := range s.index {
		out[id] = checkpoint.Blocks{Block: slices.Clone(b.block), First: slices.Clone(b.first)}
	}
	return out, s.slots()
}

// RestoreIndex replaces the index with one Index returned before a
// restart; one of another ring size (the long window was changed) is
// refused.
func (s *Syncer) RestoreIndex(index map[string]checkpoint.Blocks, slots int) error {
	if slots != s.slots() {
		return fmt.Errorf("sync: index of %d blocks per station, want %d", slots, s.slots())
	}
	m := make(map[string]*blocks, len(index))
	for id, b := range index {
		if len(b.Block) != slots || len(b.First) != slots {
			return fmt.Errorf("sync: index of %s has %d blocks, want %d", id, len(b.Block), slots)
		}
		m[id] = &blocks{block: slices.Clone(b.Block), first: slices.Clone(b.First)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index = m
	return nil
}

// firstIndex returns where to start scanning for (station, seq), or false
// when the block is not indexed.
func (s *Syncer) firstIndex(station string, seq uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.index[station]
	if b == nil {
		return 0, false
	}
	blk := seq / blockSeqs
	slot := blk % uint64(len(b.block))
	if b.block[slot] != blk+1 {
		return 0, false
	}
	return b.first[slot], true
}

// Run serves the peer's requests and asks the peer, until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	if s.cfg.Local != nil {
		subject := natsbus.Sync.Subject(s.cfg.Site)
		sub, err := s.cfg.Local.Subscribe(subject, func(m *nats.Msg) { s.answer(ctx, m) })
		if err != nil {
			return fmt.Errorf("sync: serve %s: %w", subject, err)
		}
		defer sub.Unsubscribe()
	}
	if s.cfg.Peer == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	lastLong := time.Time{} // the first exchange is a long one
	long := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if time.Since(lastLong) >= s.cfg.LongEvery {
			long = true
		}
		window := s.cfg.ShortWindow
		if long {
			window = s.cfg.LongWindow
		}
		if err := s.exchange(ctx, window); err != nil {
			s.failures.Inc()
			if ctx.Err() == nil {
				s.cfg.Log.WarnContext(ctx, "sync with peer failed", slog.String("peer", s.cfg.PeerSite), slog.Any("error", err))
			}
			long = true // once it works again, look far back
			continue
		}
		if long {
			lastLong, long = time.Now(), false
		}
	}
}

// exchange asks the peer for what this core lacks within window seqs of
// each station, and records what comes back.
func (s *Syncer) exchange(ctx context.Context, window int) error {
	stations := s.cfg.Stations()
	for start := 0; start < len(stations); start += stationsPerRequest {
		req := &ingestv1.SyncRequest{Site: s.cfg.Site}
		for _, id := range stations[start:min(start+stationsPerRequest, len(stations))] {
			top, held := s.cfg.Gate.Recorded(id).Holdings(window)
			req.Stations = append(req.Stations, &ingestv1.StationHoldings{StationId: id, Top: top, Held: held})
		}
		if err := s.ask(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

func (s *Syncer) ask(ctx context.Context, req *ingestv1.SyncRequest) error {
	ctx, span := s.tracer.Start(ctx, "peersync ask", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("shindo.peer", s.cfg.PeerSite), attribute.Int("shindo.stations", len(req.GetStations()))))
	defer span.End()
	b, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := natsbus.Sync.Msg(ctx, s.cfg.PeerSite, frame(b))
	if err != nil {
		return err
	}
	msg.Reply = s.cfg.Peer.NewRespInbox()
	sub, err := s.cfg.Peer.SubscribeSync(msg.Reply)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	s.requests.Inc()
	if err := s.cfg.Peer.PublishMsg(msg); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	// The answer comes in parts: each must follow the one before within
	// answerTimeout, and the whole within answerTimeout plus the peer's
	// budget for reading its journal, and some for sending.
	end := time.Now().Add(answerTimeout + 3*s.cfg.AnswerBudget)
	for {
		wait := time.Now().Add(answerTimeout)
		if wait.After(end) {
			wait = end
		}
		mctx, cancel := context.WithDeadline(ctx, wait)
		m, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("no answer from %s within %s", s.cfg.PeerSite, answerTimeout)
			}
			return err
		}
		var resp ingestv1.SyncResponse
		data, err := unframe(m.Data)
		if err == nil {
			err = proto.Unmarshal(data, &resp)
		}
		if err != nil {
			return fmt.Errorf("bad answer from %s: %w", s.cfg.PeerSite, err)
		}
		if err := s.record(ctx, resp.GetRecords()); err != nil {
			return err
		}
		if resp.GetLast() {
			return nil
		}
	}
}

// record keeps the records this core does not hold yet.
func (s *Syncer) record(ctx context.Context, recs []*ingestv1.Record) error {
	if g := s.cfg.Guard; g != nil {
		g.Hold()
		defer g.Release()
	}
	var payloads [][]byte
	var fresh []*ingestv1.Record
	for _, r := range recs {
		p := r.GetPacket()
		if p.GetStationId() == "" || !s.cfg.Gate.Record(p.GetStationId(), p.GetSeq(), r.GetRecvAtMs()) {
			continue
		}
		b, err := proto.Marshal(r)
		if err != nil {
			continue
		}
		payloads = append(payloads, b)
		fresh = append(fresh, r)
	}
	if len(payloads) == 0 {
		return nil
	}
	first, err := s.cfg.Journal.Append(ctx, payloads...)
	if err != nil {
		for _, r := range fresh {
			s.cfg.Gate.Recorded(r.GetPacket().GetStationId()).Forget(r.GetPacket().GetSeq())
		}
		return fmt.Errorf("record what the peer sent: %w", err)
	}
	for k, r := range fresh {
		s.Indexed(r.GetPacket().GetStationId(), r.GetPacket().GetSeq(), first+uint64(k))
	}
	s.received.Add(float64(len(fresh)))
	return nil
}

// answer serves one request: it works out which of the requester's seqs
// this core holds and the requester does not, finds them in the journal
// and sends them back. A request it cannot read (a peer of another
// version of the contract) is counted and logged, and left unanswered: the
// peer's exchange fails, which it counts and logs too.
func (s *Syncer) answer(ctx context.Context, m *nats.Msg) {
	var req ingestv1.SyncRequest
	data, err := unframe(m.Data)
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err == nil && m.Reply == "" {
		err = errors.New("no reply subject")
	}
	if err != nil {
		s.refused.Inc()
		s.cfg.Log.Warn("sync request refused", slog.String("peer", s.cfg.PeerSite), slog.Any("error", err))
		return
	}
	// Under the asking core's span: one trace holds both sides.
	ctx, span := s.tracer.Start(telemetry.ExtractNATS(context.Background(), m.Header), "peersync answer",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("shindo.peer", req.GetSite())))
	defer span.End()
	type key struct {
		station string
		seq     uint64
	}
	want := map[key]bool{}
	// starts are the wanted records by the journal index of their block's
	// first record: a record is never before it.
	type start struct {
		idx uint64
		k   key
	}
	var starts []start
	for _, h := range req.GetStations() {
		id := h.GetStationId()
		n := min(len(h.GetHeld())*8, s.cfg.LongWindow)
		if h.GetTop() == 0 {
			n = s.cfg.LongWindow // the requester has nothing: all we have
		}
		top, held := s.cfg.Gate.Recorded(id).Holdings(n)
		for i := range uint64(len(held) * 8) {
			if held[i/8]&(1<<(i%8)) == 0 || i >= top {
				continue
			}
			seq := top - i
			// Below the requester's bitmap is outside the comparison.
			if h.GetTop() != 0 && (seq+uint64(len(h.GetHeld()))*8 <= h.GetTop()) {
				continue
			}
			if replay.Holds(h.GetTop(), h.GetHeld(), seq) {
				continue
			}
			idx, ok := s.firstIndex(id, seq)
			if !ok {
				continue // not in the journal any more
			}
			if at := s.resume[req.GetSite()][id][seq]; at > idx {
				idx = at // read up to there before, and not there
			}
			want[key{id, seq}] = true
			starts = append(starts, start{idx, key{id, seq}})
			if len(want) >= s.cfg.MaxRecords {
				break
			}
		}
	}
	var batch []byte
	flush := func(last bool) {
		out := batch
		if last {
			out = protowire.AppendTag(out, 2, protowire.VarintType)
			out = protowire.AppendVarint(out, 1)
		}
		msg, err := natsbus.Sync.Reply(ctx, m.Reply, frame(out))
		if err == nil {
			err = s.cfg.Local.PublishMsg(msg)
		}
		if err != nil {
			s.cfg.Log.WarnContext(ctx, "sync answer not sent", slog.Any("error", err))
		}
		batch = nil
	}
	slices.SortFunc(starts, func(a, b start) int { return cmp.Compare(a.idx, b.idx) })
	stop := time.Now().Add(s.cfg.AnswerBudget)
	var next uint64
	reads := 0
	for i := 0; len(want) > 0; {
		// Where no wanted record's block begins before the read position,
		// the journal up to the first that does holds none: jump there.
		// Blocks are sparse in a journal of every station's records, and a
		// core back from an outage lacks stretches minutes apart.
		for i < len(starts) && !want[starts[i].k] {
			i++
		}
		if i < len(starts) && starts[i].idx > next {
			next = starts[i].idx
		}
		// At least one read, so every answer brings something.
		if next >= s.cfg.Journal.Next() || (reads > 0 && time.Now().After(stop)) {
			break
		}
		reads++
		entries, err := s.cfg.Journal.Read(next, 4096)
		if err != nil || len(entries) == 0 {
			break
		}
		s.scanned.Add(float64(len(entries)))
		next = entries[len(entries)-1].Index + 1
		for _, e := range entries {
			station, seq, ok := recordwire.Peek(e.Payload)
			if !ok || !want[key{station, seq}] {
				continue
			}
			delete(want, key{station, seq})
			// A SyncResponse is its repeated records field, record
			// bytes as they are in the journal.
			batch = protowire.AppendTag(batch, 1, protowire.BytesType)
			batch = protowire.AppendBytes(batch, e.Payload)
			s.sent.Inc()
			if len(batch) >= responseBytes {
				flush(false)
			}
		}
	}
	flush(true)
	// Every record still wanted whose reading began before next was read
	// for up to next (a jump never passes a wanted block's start): the
	// next answer goes on from there. What was found, or fell out of any
	// window, is forgotten.
	site := req.GetSite()
	if s.resume[site] == nil {
		s.resume[site] = map[string]map[uint64]uint64{}
	}
	for _, st := range starts {
		k := st.k
		seen := s.resume[site][k.station]
		switch {
		case want[k] && st.idx < next:
			if seen == nil {
				seen = map[uint64]uint64{}
				s.resume[site][k.station] = seen
			}
			seen[k.seq] = next
		case !want[k] && seen != nil:
			delete(seen, k.seq)
		}
	}
	for _, h := range req.GetStations() {
		seen := s.resume[site][h.GetStationId()]
		for seq := range seen {
			if seq+uint64(s.cfg.LongWindow) <= h.GetTop() {
				delete(seen, seq)
			}
		}
		if len(seen) == 0 {
			delete(s.resume[site], h.GetStationId())
		}
	}
}

// maxUnframed bounds what a deflated message may expand to.
const maxUnframed = 64 << 20

// frame wraps a serialized message for the wire, deflated unless that
// makes it no smaller.
func frame(b []byte) *natsbusv1.SyncFrame {
	var buf bytes.Buffer
	// Writing to memory cannot fail; BestSpeed is a valid level.
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = w.Write(b)
	_ = w.Close()
	if buf.Len() >= len(b) {
		return &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_NONE, Message: b}
	}
	return &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_DEFLATE, Message: buf.Bytes()}
}

// unframe returns the serialized message of a frame as it came off the
// wire, inflated to at most maxUnframed bytes.
func unframe(data []byte) ([]byte, error) {
	f, err := natsbus.Sync.Decode(data)
	if err != nil {
		return nil, err
	}
	switch f.GetCompression() {
	case natsbusv1.Compression_COMPRESSION_NONE:
		return f.GetMessage(), nil
	case natsbusv1.Compression_COMPRESSION_DEFLATE:
		r := flate.NewReader(bytes.NewReader(f.GetMessage()))
		defer r.Close()
		out, err := io.ReadAll(io.LimitReader(r, maxUnframed+1))
		if err != nil {
			return nil, err
		}
		if len(out) > maxUnframed {
			return nil, errors.New("message too large")
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression %v", f.GetCompression())
}

package ingest

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/stationwire"
	"shindo.dev/lib/telemetry"
	"shindo.dev/lib/telemetry/telemetrytest"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/links"
	"shindo.dev/svc-ingest/internal/verify"
)

// TestEncodeRecordMatchesProto: the hand-built record decodes to the same
// message proto would have encoded, with and without a trace context, with
// and without SEED codes (an empty location among them).
func TestEncodeRecordMatchesProto(t *testing.T) {
	t.Parallel()
	p := &stationv1.Packet{StationId: "S1", Seq: 42, SentAtMs: 1_800_000_000_000, RttUs: 900,
		Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{FirstSampleMs: 5, RateHz: 50, Ns: []int32{1, -2, 3}}}}
	raw, _ := proto.Marshal(p)
	for _, tc := range []map[string]string{
		nil,
		{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "shindo=1"},
	} {
		for _, seed := range []seedcode.Codes{{}, {Network: "SH", Station: "00001", Location: "00"}, {Network: "TW", Station: "HUA"}} {
			want := &ingestv1.Record{Packet: p, RecvAtMs: 1_800_000_000_123, Site: "TYO-1", Transport: ingestv1.Transport_TRANSPORT_WS, TraceContext: tc,
				NetworkCode: seed.Network, StationCode: seed.Station, LocationCode: seed.Location}
			var got ingestv1.Record
			if err := proto.Unmarshal(encodeRecord(raw, 1_800_000_000_123, "TYO-1", ingestv1.Transport_TRANSPORT_WS, tc, seed), &got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, want) {
				t.Fatalf("got %v, want %v", &got, want)
			}
		}
	}
}

// newTestIntake is the accept path over a real gate and journal, for one
// station with an all-zero key, tracing one intensity packet in every.
func newTestIntake(tb testing.TB, dir string, every uint64, tp trace.TracerProvider) (*intake, *journal.Journal) {
	tb.Helper()
	set, err := registry.NewSet([]*registry.Station{{ID: "S1", KeyID: 1, KeyHex: hex.EncodeToString(make([]byte, 32))}})
	if err != nil {
		tb.Fatal(err)
	}
	j, err := journal.Open(dir, journal.Options{Retention: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { j.Close() })
	ps := newPacketSampler(every)
	ps.tracer = tp.Tracer("test")
	return &intake{site: "TNN-1", gate: verify.New("TNN-1", set, verify.Limits{Freshness: time.Minute, Window: 4096}), journal: j,
		links: links.New("TNN-1"), counts: newPacketCounter(prometheus.NewRegistry(), "TNN-1"),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), overloaded: func() bool { return false }, sampler: ps}, j
}

func sealed(tb testing.TB, seq uint64) []byte {
	tb.Helper()
	b, err := stationwire.Seal(make([]byte, 32), 1, &stationv1.Packet{StationId: "S1", Seq: seq, SentAtMs: time.Now().UnixMilli(),
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: time.Now().UnixMilli() / 500 * 500, Intensity: 1.5}}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestIntakeTracesPacket: a sampled packet's span ends once it is recorded
// and acked, and the journal record carries the span's trace context,
// which is how svc-rts joins the trace; the others carry none.
func TestIntakeTracesPacket(t *testing.T) {
	tp, rec := telemetrytest.Recorder(t)
	in, j := newTestIntake(t, t.TempDir(), 2, tp)

	acks := in.handle([][]byte{sealed(t, 1), sealed(t, 2), sealed(t, 3)}, ingestv1.Transport_TRANSPORT_UDP)()
	for i, a := range acks {
		if a == nil {
			t.Fatalf("packet %d not acked", i)
		}
	}
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1 (the second packet of three, tracing one in 2)", len(ended))
	}
	span := ended[0]
	if span.Name() != "ingest packet" {
		t.Errorf("span name %q", span.Name())
	}
	entries, err := j.Read(j.First(), 10)
	if err != nil || len(entries) != 3 {
		t.Fatalf("journal holds %d records (%v), want 3", len(entries), err)
	}
	for i, e := range entries {
		var r ingestv1.Record
		if err := proto.Unmarshal(e.Payload, &r); err != nil {
			t.Fatal(err)
		}
		got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), r.GetTraceContext()))
		if r.GetPacket().GetSeq() != 2 {
			if got.IsValid() {
				t.Errorf("record of seq %d carries trace context %v", r.GetPacket().GetSeq(), r.GetTraceContext())
			}
			continue
		}
		if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("record %d carries %v, want the span %v", i, got, span.SpanContext())
		}
	}
}

// BenchmarkPacketTrace is the cost of packet tracing on ingest's accept
// path: a batch of 64 intensity packets through the gate, the journal and
// the acks, tracing none (the baseline), one in 1000 (the default) and
// every one, with spans handed to the SDK's batch processor as an exporter
// is fed. The journal is on tmpfs (/dev/shm) where there is one: a real
// disk's fsync costs milliseconds that vary more than the whole CPU work
// measured here.
func BenchmarkPacketTrace(b *testing.B) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	for _, bc := range []struct {
		name  string
		every uint64
	}{{"none", 0}, {"1-in-1000", 1000}, {"every", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			defer tp.Shutdown(context.Background())
			dir := b.TempDir()
			if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
				if dir, err = os.MkdirTemp("/dev/shm", "shindo-bench-"); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(dir) })
			}
			in, _ := newTestIntake(b, dir, bc.every, tp)
			const batch = 64
			seq := uint64(0)
			dgrams := make([][]byte, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				for k := range dgrams {
					seq++
					dgrams[k] = sealed(b, seq)
				}
				b.StartTimer()
				in.handle(dgrams, ingestv1.Transport_TRANSPORT_UDP)()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/packet")
		})
	}
}

// indexLog records what rebuild reports to the sync.
type indexLog map[uint64]uint64 // seq → journal index

func (l indexLog) Indexed(_ string, seq, index uint64) { l[seq] = index }

// TestIntakeRestoresFromJournal: a restarted ingest reads its journal back
// — the replay windows, so a packet recorded before the restart is not
// recorded twice, and the sync's index, so it can offer the peer what it
// recorded before.
func TestIntakeRestoresFromJournal(t *testing.T) {
	tp, _ := telemetrytest.Recorder(t)
	dir := t.TempDir()
	in, j := newTestIntake(t, dir, 0, tp)
	for seq := uint64(1); seq <= 300; seq += 3 {
		in.handle([][]byte{sealed(t, seq), sealed(t, seq+1), sealed(t, seq+2)}, ingestv1.Transport_TRANSPORT_UDP)()
	}
	if j.Next() != 300 {
		t.Fatalf("journal holds %d records, want 300", j.Next())
	}
	j.Close()

	in, j = newTestIntake(t, dir, 0, tp)
	idx := indexLog{}
	in.indexed = idx.Indexed
	if err := in.rebuild(in.log, nil); err != nil {
		t.Fatal(err)
	}
	if len(idx) != 300 || idx[1] != 0 || idx[300] != 299 {
		t.Fatalf("index restored for %d seqs (seq 1 at %d, 300 at %d), want 300 at 0…299", len(idx), idx[1], idx[300])
	}
	in.handle([][]byte{sealed(t, 5), sealed(t, 300), sealed(t, 301)}, ingestv1.Transport_TRANSPORT_UDP)()
	if j.Next() != 301 {
		t.Fatalf("journal holds %d records after two replays and one new packet, want 301", j.Next())
	}
}

package ingest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/batchrecv"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/stationwire"
	"shindo.dev/lib/udpload"
	"shindo.dev/svc-ingest/internal/forward"
	"shindo.dev/svc-ingest/internal/listen"
	"shindo.dev/svc-ingest/internal/verify"
)

// sink is an RTS Ingest endpoint that applies nothing and acks every batch:
// the forwarding cost without a consumer's.
type sink struct {
	rtsv1.UnimplementedRTSServiceServer
}

func (sink) Ingest(stream rtsv1.RTSService_IngestServer) error {
	return batchrecv.Serve(stream, func(*ingestv1.Record) {},
		func(id uint64) *rtsv1.IngestResponse { return &rtsv1.IngestResponse{AckedBatchId: id} })
}

// pipeline runs ingest's packet path — UDP listener, gate, signed acks,
// forwarding over a real gRPC stream — and returns its address.
func pipeline(ctx context.Context, tb testing.TB, set *registry.Set) string {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer()
	rtsv1.RegisterRTSServiceServer(gs, sink{})
	go gs.Serve(ln)
	context.AfterFunc(ctx, gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	fwd := forward.New("rts", rtsOpener(conn), forward.Options{Queue: 1 << 20, MaxBatch: 512, Window: 64, DrainTimeout: time.Second},
		forward.NewMetrics(prometheus.NewRegistry()), log)
	go fwd.Run(ctx)
	gate := verify.New("TNN-1", set, time.Minute, 4096)
	udp, err := listen.ListenUDP("127.0.0.1:0", 0, func(b []byte, tr ingestv1.Transport) []byte {
		out := gate.Check(b, func(p *stationv1.Packet, at time.Time) bool {
			return fwd.Offer(&ingestv1.Record{Packet: p, RecvAtMs: at.UnixMilli(), Site: "TNN-1", Transport: tr})
		})
		return out.Ack
	}, log)
	if err != nil {
		tb.Fatal(err)
	}
	go udp.Run(ctx)
	return udp.Addr().String()
}

// traffic pre-signs n intensity datagrams per socket from many stations,
// each with a seq that is unique overall, so the generator spends the
// same on echo and ingest runs.
func traffic(tb testing.TB, stations, conns, n int) (*registry.Set, [][][]byte) {
	tb.Helper()
	key := make([]byte, 32)
	var list []*registry.Station
	for i := range stations {
		list = append(list, &registry.Station{ID: fmt.Sprintf("L%05d", i), KeyID: 1, KeyHex: hex.EncodeToString(key)})
	}
	set, err := registry.NewSet(list)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UnixMilli()
	out := make([][][]byte, conns)
	seq := uint64(1)
	for c := range conns {
		for i := range n {
			st := list[(c*n+i)%stations]
			b, err := stationwire.Seal(key, 1, &stationv1.Packet{StationId: st.ID, Seq: seq, SentAtMs: now,
				Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: now, Intensity: 1.2, PgaGal: 3}}})
			if err != nil {
				tb.Fatal(err)
			}
			out[c] = append(out[c], b)
			seq++
		}
	}
	return set, out
}

// replySeq reads the seq of an ack or of an echoed packet: both carry it in
// field 2 of the inner message.
func replySeq(b []byte) (uint64, bool) {
	d, err := stationwire.Open(b)
	if err != nil {
		return 0, false
	}
	var a stationv1.Ack
	if proto.Unmarshal(d.GetPacket(), &a) != nil {
		return 0, false
	}
	return a.GetSeq(), true
}

// BenchmarkThroughput compares ingest's packet path with a bare UDP echo
// server in the same run, driven by the same closed-loop generator: the
// ratio of their replies per second is the figure of merit.
//
//	cd svc-ingest && go test -run '^$' -bench Throughput -benchtime 1x
func BenchmarkThroughput(b *testing.B) {
	const conns, window, perConn = 4, 32, 150_000
	set, datagrams := traffic(b, 2000, conns, perConn)
	next := func(c int, i uint64) ([]byte, uint64) {
		d := datagrams[c][i%perConn]
		seq, _ := replySeq(d)
		return d, seq
	}
	run := func(b *testing.B, target string) udpload.Result {
		r, err := udpload.Run(context.Background(), udpload.Options{
			Target: target, Conns: conns, Window: window, Duration: 2 * time.Second, Next: next, ReplyID: replySeq,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Log(r)
		return r
	}
	var echo, ingest float64
	b.Run("echo", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			addr, err := udpload.Echo(ctx, "127.0.0.1:0", 2)
			if err != nil {
				b.Fatal(err)
			}
			echo = run(b, addr.String()).PerSecond
			cancel()
			b.ReportMetric(echo, "pkts/s")
		}
	})
	b.Run("ingest", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			r := run(b, pipeline(ctx, b, set))
			cancel()
			ingest = r.PerSecond
			b.ReportMetric(ingest, "pkts/s")
			b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
		}
	})
	if echo > 0 {
		b.Logf("ingest / echo = %.0f %%", 100*ingest/echo)
	}
}

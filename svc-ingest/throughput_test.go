package ingest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/udpload"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/stationwire"
	"shindo.dev/svc-ingest/internal/forward"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/links"
	"shindo.dev/svc-ingest/internal/listen"
	"shindo.dev/svc-ingest/internal/verify"
)

// sink is an RTS Ingest endpoint that asks for no replay, applies nothing
// and acks every batch: the forwarding cost without a consumer's.
type sink struct {
	rtsv1.UnimplementedRTSServiceServer
}

func (sink) Ingest(stream rtsv1.RTSService_IngestServer) error {
	if err := stream.Send(&rtsv1.IngestResponse{}); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // the forwarder went away
		}
		if err := stream.Send(&rtsv1.IngestResponse{AckedBatchId: req.GetBatchId()}); err != nil {
			return err
		}
	}
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
	jr, err := journal.Open(tb.TempDir(), journal.Options{Retention: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	context.AfterFunc(ctx, func() { jr.Close() })
	fwd := forward.New("rts", rtsOpener(conn), jr, forward.Options{MaxBatch: 512, Window: 64},
		forward.NewMetrics(prometheus.NewRegistry()), log)
	go fwd.Run(ctx)
	in := &intake{site: "TNN-1", gate: verify.New("TNN-1", set, verify.Limits{Freshness: time.Minute, Window: 4096}), journal: jr,
		links: links.New("TNN-1"), counts: newPacketCounter(prometheus.NewRegistry(), "TNN-1"), log: log,
		overloaded: func() bool { return false }}
	udp, err := listen.ListenUDP("127.0.0.1:0", 0, in.handle, log)
	if err != nil {
		tb.Fatal(err)
	}
	go udp.Run(ctx)
	return udp.Addr().String()
}

// traffic pre-signs n intensity datagrams per socket from many stations.
// Datagram i of socket c is the (i·conns+c)-th of the whole run, which
// gives its station (round robin) and its seq: the sockets advance at the
// same pace, so each station's seqs arrive in about the order sent, as a
// real station's do, and stay inside the replay window.
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
	for c := range conns {
		out[c] = make([][]byte, n)
		for i := range n {
			k := i*conns + c
			b, err := stationwire.Seal(key, 1, &stationv1.Packet{StationId: list[k%stations].ID, Seq: uint64(k + 1), SentAtMs: now,
				Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: now, Intensity: 1.2, PgaGal: 3}}})
			if err != nil {
				tb.Fatal(err)
			}
			out[c][i] = b
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
// server, driven by the same closed-loop generator, in alternating rounds
// so that the machine's background load hits both alike; the ratio of
// their median replies per second is the figure of merit.
//
//	cd svc-ingest && go test -run '^$' -bench Throughput -benchtime 1x
func BenchmarkThroughput(b *testing.B) {
	const conns, window, perConn, rounds = 4, 256, 150_000, 3
	set, datagrams := traffic(b, 2000, conns, perConn)
	next := func(c int, i uint64) ([]byte, uint64) {
		d := datagrams[c][i%perConn]
		seq, _ := replySeq(d)
		return d, seq
	}
	run := func(target string) udpload.Result {
		r, err := udpload.Run(context.Background(), udpload.Options{
			Target: target, Conns: conns, Window: window, Duration: time.Second, Next: next, ReplyID: replySeq,
		})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	for b.Loop() {
		var echo, ingest []float64
		var p99 []float64
		for range rounds {
			ctx, cancel := context.WithCancel(context.Background())
			addr, err := udpload.Echo(ctx, "127.0.0.1:0", 2)
			if err != nil {
				b.Fatal(err)
			}
			r := run(addr.String())
			b.Logf("echo:   %v", r)
			echo = append(echo, r.PerSecond)
			cancel()

			// Fresh replay windows each round: the datagrams repeat.
			ctx, cancel = context.WithCancel(context.Background())
			r = run(pipeline(ctx, b, set))
			b.Logf("ingest: %v", r)
			ingest = append(ingest, r.PerSecond)
			p99 = append(p99, float64(r.P99.Microseconds())/1000)
			cancel()
		}
		e, i := median(echo), median(ingest)
		b.ReportMetric(e, "echo-pkts/s")
		b.ReportMetric(i, "ingest-pkts/s")
		b.ReportMetric(100*i/e, "%-of-echo")
		b.ReportMetric(median(p99), "ingest-p99-ms")
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAckLatency offers ingest the load of 10,000 stations sending 4
// packets a second each (40,000 datagrams/s, open loop, spread evenly) and
// reports the ack round trip seen by the stations.
//
//	cd svc-ingest && go test -run '^$' -bench AckLatency -benchtime 1x
func BenchmarkAckLatency(b *testing.B) {
	const stations, rate, seconds, conns = 10_000, 40_000, 5, 8
	perConn := rate * seconds / conns
	set, datagrams := traffic(b, stations, conns, perConn)
	next := func(c int, i uint64) ([]byte, uint64) {
		d := datagrams[c][i%uint64(perConn)]
		seq, _ := replySeq(d)
		return d, seq
	}
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		r, err := udpload.Run(ctx, udpload.Options{
			Target: pipeline(ctx, b, set), Conns: conns, Rate: rate, Duration: seconds * time.Second,
			Next: next, ReplyID: replySeq,
		})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.Log(r)
		b.ReportMetric(r.PerSecond, "acks/s")
		b.ReportMetric(float64(r.P50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(100*float64(r.Received)/float64(r.Sent), "%-acked")
	}
}

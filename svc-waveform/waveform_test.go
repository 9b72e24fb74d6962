package waveform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/conf"
	"shindo.dev/seismo/mseed"
	"shindo.dev/svc-waveform/internal/archive"
	"shindo.dev/svc-waveform/internal/wavegrpc"
)

// count is the deterministic sample of a test station's axis at a time:
// a slow wave with noise, and now and then a spike of a few million counts
// that needs Steim-2's 30-bit packing (still exact as a float32 in SAC).
func count(station string, axis int, ms int64) int32 {
	h := uint64(ms/20)*0x9e3779b97f4a7c15 ^ uint64(len(station)+int(station[len(station)-1]))*0xbf58476d1ce4e5b9 ^ uint64(axis+1)*0x94d049bb133111eb
	h ^= h >> 29
	v := int32(500*math.Sin(float64(ms)/300)) + int32(h%61) - 30
	if h%211 == 0 {
		v += 4_000_000
	}
	return v
}

// sensorRecord is a 500 ms sensor frame of station at first (ms) with n
// samples per axis.
func sensorRecord(station string, first int64, n int) *ingestv1.Record {
	f := &stationv1.SensorFrame{FirstSampleMs: first, RateHz: 50, ScaleGal: 0.001}
	for i := range int64(n) {
		t := first + 20*i
		f.Ns = append(f.Ns, count(station, 1, t))
		f.Ew = append(f.Ew, count(station, 2, t))
		f.Ud = append(f.Ud, count(station, 0, t))
	}
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Body: &stationv1.Packet_Sensor{Sensor: f}}}
}

func intensityRecord(station string, end int64) *ingestv1.Record {
	return &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
		WindowEndMs: end, Intensity: float32(end%7000) / 1000, PgaGal: float32(end%900) / 10, PgvCms: 0.25,
	}}}}
}

// testServer is svc-waveform's transport over a real archive, in-process.
type testServer struct {
	reg    *prometheus.Registry
	store  *archive.Store
	srv    *wavegrpc.Server
	client waveformv1.WaveformServiceClient
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	store, err := archive.Open(archive.Options{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()
	reg := prometheus.NewRegistry()
	srv := wavegrpc.New(store, ctx.Done(), reg, slog.New(slog.DiscardHandler))
	gs := grpc.NewServer()
	waveformv1.RegisterWaveformServiceServer(gs, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		cancel()
		<-done
		if err := store.Close(context.Background()); err != nil {
			t.Errorf("archive close: %v", err)
		}
	})
	return &testServer{reg: reg, store: store, srv: srv, client: waveformv1.NewWaveformServiceClient(conn)}
}

// ingest sends batches on one stream and waits for the last ack.
func (ts *testServer) ingest(t *testing.T, batches ...*waveformv1.IngestRequest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ing, err := ts.client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := ing.Send(b); err != nil {
			t.Fatal(err)
		}
	}
	last := batches[len(batches)-1].GetBatchId()
	for {
		ack, err := ing.Recv()
		if err != nil {
			t.Fatalf("ack: %v", err)
		}
		if ack.GetAckedBatchId() == last {
			break
		}
	}
	ing.CloseSend()
}

// TestIngestToLive: chunks ingested over the batch stream reach the Live
// subscribers of their station, once each even when a batch is resent.
func TestIngestToLive(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	empty, _ := ts.client.Live(ctx, &waveformv1.LiveRequest{})
	if _, err := empty.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Live without stations: %v", err)
	}
	live, err := ts.client.Live(ctx, &waveformv1.LiveRequest{StationIds: []string{"A"}})
	if err != nil {
		t.Fatal(err)
	}
	// Ingest only once the server holds the subscription.
	poll.Until(t, 5*time.Second, "the subscription registered", func() bool { return ts.srv.LiveSubscribers() == 1 })
	now := time.Now().UnixMilli() / 500 * 500
	batch := &waveformv1.IngestRequest{BatchId: 1, Records: []*ingestv1.Record{
		sensorRecord("A", now-1000, 2), sensorRecord("B", now-1000, 2), intensityRecord("A", now-500), sensorRecord("A", now-500, 2),
	}}
	ts.ingest(t, batch, batch) // the second time as a resend after a reconnect
	for _, want := range []int64{now - 1000, now - 500} {
		r, err := live.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetChunk(); c.GetStationId() != "A" || c.GetFirstSampleMs() != want || len(c.GetUd()) != 2 {
			t.Fatalf("chunk %v, want A at %d", c, want)
		}
	}
	// A late frame still goes out; nothing else before it: not B's chunk,
	// not the resent ones.
	ts.ingest(t, &waveformv1.IngestRequest{BatchId: 2, Records: []*ingestv1.Record{sensorRecord("A", now-1000, 2), sensorRecord("A", now-2000, 2)}})
	r, err := live.Recv()
	if err != nil || r.GetChunk().GetFirstSampleMs() != now-2000 {
		t.Fatalf("after the resend: %v %v", r, err)
	}
	// The five frames that brought new data were timed from their
	// receipt; the duplicates were not.
	if n := testutil.CollectAndCount(ts.reg, "shindo_waveform_store_delay_seconds"); n != 1 {
		t.Fatalf("store delay histogram: %d series", n)
	}
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "shindo_waveform_store_delay_seconds" {
			if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != 5 {
				t.Errorf("store delay observed %d frames, want 5", c)
			}
		}
	}
}

// TestQueryAndExport reads the archive back over gRPC, and checks how bad
// requests are answered.
func TestQueryAndExport(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	start := time.Now().Add(-time.Hour).UnixMilli() / 500 * 500
	var recs []*ingestv1.Record
	for j := range int64(240) { // two minutes, a gap of one frame at j = 100
		if j == 100 {
			continue
		}
		recs = append(recs, sensorRecord("TW-01", start+500*j, 25), intensityRecord("TW-01", start+500*j+500))
	}
	ts.ingest(t, &waveformv1.IngestRequest{BatchId: 1, Records: recs})
	ctx := context.Background()

	resp, err := ts.client.Query(ctx, &waveformv1.QueryRequest{StationId: "TW-01", StartMs: start, EndMs: start + 120_000, WithIntensity: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetNetworkCode() != "SH" || resp.GetStationCode() != "TW01" || resp.GetLocationCode() != "00" {
		t.Errorf("names %s.%s.%s", resp.GetNetworkCode(), resp.GetStationCode(), resp.GetLocationCode())
	}
	// 50 s before the gap, then 69.5 s in chunks of at most 60 s; the
	// intensity frame ending at the end of the window is not in it.
	var lens []int
	for _, c := range resp.GetChunks() {
		lens = append(lens, len(c.GetUd()))
		for i, v := range c.GetUd() {
			if w := count("TW-01", 0, c.GetFirstSampleMs()+20*int64(i)); v != w {
				t.Fatalf("sample %d of chunk at %d: %d, want %d", i, c.GetFirstSampleMs(), v, w)
			}
		}
		if c.GetScaleGal() != 0.001 || c.GetRateHz() != 50 {
			t.Fatalf("chunk %v", c)
		}
	}
	if fmt.Sprint(lens) != "[2500 3000 475]" || len(resp.GetIntensity()) != 238 {
		t.Errorf("chunks %v, %d intensity samples", lens, len(resp.GetIntensity()))
	}
	for _, tc := range []struct {
		req  *waveformv1.QueryRequest
		code codes.Code
	}{
		{&waveformv1.QueryRequest{StationId: "nobody", StartMs: start, EndMs: start + 1000}, codes.NotFound},
		{&waveformv1.QueryRequest{StationId: "TW-01", StartMs: start, EndMs: start}, codes.InvalidArgument},
		{&waveformv1.QueryRequest{StationId: "TW-01", StartMs: start, EndMs: start + 2*3600_000}, codes.InvalidArgument},
		{&waveformv1.QueryRequest{StartMs: start, EndMs: start + 1}, codes.InvalidArgument},
	} {
		if _, err := ts.client.Query(ctx, tc.req); status.Code(err) != tc.code {
			t.Errorf("Query(%v): %v, want %v", tc.req, err, tc.code)
		}
	}

	// Export: records of BNZ, BNN, BNE and the intensity series, the
	// station's codes in the first part only.
	raw, parts := ts.export(t, &waveformv1.ExportRequest{StationId: "TW-01", StartMs: start, EndMs: start + 120_000, WithIntensity: true})
	if p := parts[0]; p.GetNetworkCode() != "SH" || p.GetStationCode() != "TW01" || p.GetLocationCode() != "00" {
		t.Errorf("first part names %s.%s.%s", p.GetNetworkCode(), p.GetStationCode(), p.GetLocationCode())
	}
	for i, p := range parts[1:] {
		if p.GetNetworkCode()+p.GetStationCode()+p.GetLocationCode() != "" {
			t.Errorf("part %d names the station again", i+1)
		}
	}
	samples := map[string]int{}
	recsOut, err := mseed.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recsOut {
		samples[r.Channel] += r.NumSamples
		if r.Network != "SH" || r.Station != "TW01" || r.Location != "00" {
			t.Fatalf("record %s", r.SourceName())
		}
	}
	if samples["BNZ"] != 5975 || samples["BNN"] != 5975 || samples["BNE"] != 5975 || samples["MXI"] != 238 || samples["MXV"] != 238 {
		t.Errorf("exported samples %v", samples)
	}
	// Channels asked for by code: those, in that order, and no other.
	raw, _ = ts.export(t, &waveformv1.ExportRequest{StationId: "TW-01", StartMs: start, EndMs: start + 120_000, Channels: []string{"MXA", "BNE"}})
	recsOut, err = mseed.ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	picked := map[string]int{}
	var order []string
	for _, r := range recsOut {
		picked[r.Channel] += r.NumSamples
		if len(order) == 0 || order[len(order)-1] != r.Channel {
			order = append(order, r.Channel)
		}
	}
	if len(picked) != 2 || picked["BNE"] != 5975 || picked["MXA"] != 238 || order[0] != "MXA" {
		t.Errorf("channels MXA, BNE: exported %v in the order %v", picked, order)
	}
	// A window without data is a stream without parts; an unknown station
	// is NotFound whatever the window.
	if raw, parts := ts.export(t, &waveformv1.ExportRequest{StationId: "TW-01", StartMs: start - 7200_000, EndMs: start - 3600_000}); len(raw) != 0 || len(parts) != 0 {
		t.Errorf("empty window: %d parts", len(parts))
	}
	for _, tc := range []struct {
		req  *waveformv1.ExportRequest
		code codes.Code
	}{
		{&waveformv1.ExportRequest{StationId: "nobody", StartMs: start, EndMs: start + 1000}, codes.NotFound},
		{&waveformv1.ExportRequest{StationId: "nobody", StartMs: 5000, EndMs: 1000}, codes.NotFound},
		{&waveformv1.ExportRequest{StationId: "TW-01", StartMs: 5000, EndMs: 1000}, codes.InvalidArgument},
		{&waveformv1.ExportRequest{StationId: "TW-01", StartMs: start, EndMs: start + 2*86400_000}, codes.InvalidArgument},
		{&waveformv1.ExportRequest{StartMs: start, EndMs: start + 1}, codes.InvalidArgument},
		{&waveformv1.ExportRequest{StationId: "TW-01", StartMs: start, EndMs: start + 1000, Channels: []string{"BHZ"}}, codes.InvalidArgument},
		{&waveformv1.ExportRequest{StationId: "TW-01", StartMs: start, EndMs: start + 1000, Channels: []string{"BNZ", "BNZ"}}, codes.InvalidArgument},
	} {
		exp, err := ts.client.Export(ctx, tc.req)
		if err == nil {
			_, err = exp.Recv()
		}
		if status.Code(err) != tc.code {
			t.Errorf("Export(%v): %v, want %v", tc.req, err, tc.code)
		}
	}
}

// export reads a whole Export stream: the miniSEED bytes and the parts.
func (ts *testServer) export(t *testing.T, req *waveformv1.ExportRequest) ([]byte, []*waveformv1.ExportResponse) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := ts.client.Export(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var (
		raw   []byte
		parts []*waveformv1.ExportResponse
	)
	for {
		part, err := exp.Recv()
		if errors.Is(err, io.EOF) {
			return raw, parts
		}
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		raw = append(raw, part.GetData()...)
		parts = append(parts, part)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-data-dir", "x"}, ""},
		{nil, "data-dir is required"},
		{[]string{"-data-dir", "x", "-network", "TOO"}, `network "TOO"`},
		{[]string{"-data-dir", "x", "-retention", "5m"}, "retention must be at least 1h"},
		{[]string{"-data-dir", "x", "-flush-age", "0s"}, "flush-age"},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		err := conf.Load(&cfg, "WAVEFORM", tt.args, conf.Options{Name: Name, Env: func(string) (string, bool) { return "", false }})
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
	cfg := DefaultConfig()
	if err := conf.Load(&cfg, "WAVEFORM", []string{"-data-dir", "x"}, conf.Options{Env: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatal(err)
	}
	if cfg.Retention != 168*time.Hour || cfg.Network != "SH" || cfg.FlushAge != time.Minute {
		t.Errorf("defaults %+v", cfg)
	}
}

// TestRecordCodes: the SEED codes a record carries from ingest's registry
// name the station in queries, exports and the miniSEED records.
func TestRecordCodes(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	start := time.Now().Add(-time.Hour).UnixMilli() / 500 * 500
	var recs []*ingestv1.Record
	for j := range int64(20) {
		recs = append(recs, sensorRecord("HUA-X", start+500*j, 25), intensityRecord("HUA-X", start+500*j+500))
	}
	for _, r := range recs {
		r.NetworkCode, r.StationCode, r.LocationCode = "TW", "HUA1", "10"
	}
	ts.ingest(t, &waveformv1.IngestRequest{BatchId: 1, Records: recs})
	resp, err := ts.client.Query(context.Background(), &waveformv1.QueryRequest{StationId: "HUA-X", StartMs: start, EndMs: start + 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetNetworkCode() != "TW" || resp.GetStationCode() != "HUA1" || resp.GetLocationCode() != "10" {
		t.Errorf("names %s.%s.%s, want TW.HUA1.10", resp.GetNetworkCode(), resp.GetStationCode(), resp.GetLocationCode())
	}
	raw, parts := ts.export(t, &waveformv1.ExportRequest{StationId: "HUA-X", StartMs: start, EndMs: start + 10_000})
	if p := parts[0]; p.GetNetworkCode() != "TW" || p.GetStationCode() != "HUA1" || p.GetLocationCode() != "10" {
		t.Errorf("first part names %s.%s.%s", p.GetNetworkCode(), p.GetStationCode(), p.GetLocationCode())
	}
	out, err := mseed.ReadAll(bytes.NewReader(raw))
	if err != nil || len(out) == 0 {
		t.Fatalf("%d records, %v", len(out), err)
	}
	for _, r := range out {
		if r.SourceName() != "TW_HUA1_10_"+r.Channel {
			t.Fatalf("record of %s", r.SourceName())
		}
	}
}

// TestAvailability: the Availability call lists each station's channels
// with their stretches without a gap, under the archive's SEED names;
// unknown stations are left out, unknown channels and too many stations
// refused.
func TestAvailability(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	start := time.Now().Add(-time.Hour).UnixMilli() / 500 * 500
	var recs []*ingestv1.Record
	for j := range int64(20) {
		if j == 8 || j == 9 {
			continue // a second missing
		}
		recs = append(recs, sensorRecord("S1", start+500*j, 25), intensityRecord("S1", start+500*j+500))
	}
	for _, r := range recs {
		r.NetworkCode, r.StationCode, r.LocationCode = "TW", "HUA1", "10"
	}
	ts.ingest(t, &waveformv1.IngestRequest{BatchId: 1, Records: recs})
	resp, err := ts.client.Availability(context.Background(), &waveformv1.AvailabilityRequest{
		StationIds: []string{"nobody", "S1"}, Channels: []string{"BNZ", "MXA"}, StartMs: start - 60_000, EndMs: start + 60_000})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.GetChannels() {
		s := fmt.Sprintf("%s %s.%s.%s.%s %gHz", c.GetStationId(), c.GetNetworkCode(), c.GetStationCode(), c.GetLocationCode(), c.GetChannelCode(), c.GetSampleRateHz())
		for _, sp := range c.GetSpans() {
			s += fmt.Sprintf(" [%d,%d)", sp.GetStartMs()-start, sp.GetEndMs()-start)
		}
		got = append(got, s)
	}
	want := []string{"S1 TW.HUA1.10.BNZ 50Hz [0,4000) [5000,10000)", "S1 TW.HUA1.10.MXA 2Hz [500,4500) [5500,10500)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("availability\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for name, req := range map[string]*waveformv1.AvailabilityRequest{
		"unknown channel": {StationIds: []string{"S1"}, Channels: []string{"HHZ"}, StartMs: start, EndMs: start + 1000},
		"no station":      {StartMs: start, EndMs: start + 1000},
		"empty window":    {StationIds: []string{"S1"}, StartMs: start, EndMs: start},
	} {
		if _, err := ts.client.Availability(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

package dataapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/conf"
	"shindo.dev/seismo/mseed"
	"shindo.dev/svc-dataapi/internal/waveforms"
	waveform "shindo.dev/svc-waveform"
)

// archiveProcess is svc-waveform booted in-process from its Run, with a
// real archive in a temporary directory.
type archiveProcess struct {
	client waveformv1.WaveformServiceClient
	stop   func()
}

func startArchive(t testing.TB, grpcAddr string, extra ...string) *archiveProcess {
	t.Helper()
	cfg := waveform.DefaultConfig()
	noEnv := func(string) (string, bool) { return "", false }
	args := []string{"-data-dir", t.TempDir(), "-grpc-addr", grpcAddr, "-admin-addr", freeaddr.TCP(t),
		"-site", "TNN-1", "-log-level", "error", "-shutdown-timeout", "3s", "-seedlink-addr", "127.0.0.1:0"}
	args = append(args, extra...) // later flags win
	if err := conf.Load(&cfg, "WAVEFORM", args, conf.Options{Env: noEnv, Name: waveform.Name, Help: io.Discard, Warn: func(string) {}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- waveform.Run(ctx, cfg) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("svc-waveform Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health := healthpb.NewHealthClient(conn)
	waitStarted(t, "svc-waveform", done, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: waveformv1.WaveformService_ServiceDesc.ServiceName})
		if err != nil {
			return err
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", res.GetStatus())
		}
		return nil
	})
	return &archiveProcess{client: waveformv1.NewWaveformServiceClient(conn), stop: stop}
}

// waveCount is a test station's sample of an axis at a time: a slow wave
// with noise, so that Steim-2 packs it in about two bytes a sample.
func waveCount(axis int, ms int64) int32 {
	h := uint64(ms/20)*0x9e3779b97f4a7c15 ^ uint64(axis+1)*0x94d049bb133111eb
	h ^= h >> 29
	return int32(800*math.Sin(float64(ms)/300+float64(axis))) + int32(h%301) - 150
}

// ingest stores frames of station over [start, end) (ms, on the 500 ms
// grid), with intensity frames for the first two minutes, and waits until
// the archive has acked them all.
func (a *archiveProcess) ingest(t testing.TB, station string, start, end int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := a.client.Ingest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var batch uint64
	var recs []*ingestv1.Record
	send := func() {
		batch++
		if err := stream.Send(&waveformv1.IngestRequest{BatchId: batch, Records: recs}); err != nil {
			t.Fatal(err)
		}
		recs = nil
	}
	for ms := start; ms < end; ms += 500 {
		f := &stationv1.SensorFrame{FirstSampleMs: ms, RateHz: 50, ScaleGal: 0.001}
		for i := range int64(25) {
			f.Ns = append(f.Ns, waveCount(1, ms+20*i))
			f.Ew = append(f.Ew, waveCount(2, ms+20*i))
			f.Ud = append(f.Ud, waveCount(0, ms+20*i))
		}
		recs = append(recs, &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Body: &stationv1.Packet_Sensor{Sensor: f}}})
		if ms < start+120_000 {
			recs = append(recs, &ingestv1.Record{Packet: &stationv1.Packet{StationId: station, Body: &stationv1.Packet_Intensity{
				Intensity: &stationv1.IntensityFrame{WindowEndMs: ms + 500, Intensity: float32(ms%7000) / 1000, PgaGal: 1.5, PgvCms: 0.25}}}})
		}
		if len(recs) >= 400 {
			send()
		}
	}
	if len(recs) > 0 {
		send()
	}
	for {
		ack, err := stream.Recv()
		if err != nil {
			t.Fatalf("ingest: %v", err)
		}
		if ack.GetAckedBatchId() == batch {
			break
		}
	}
	stream.CloseSend()
}

// export reads an Export straight from the archive.
func (a *archiveProcess) export(t *testing.T, req *waveformv1.ExportRequest) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := a.client.Export(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		part, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		out = append(out, part.GetData()...)
	}
}

// relay is a TCP relay between the data API and the archive that can hold
// back, or cut, what the archive sends once a number of bytes more have
// passed: it shows what the data API does with an answer it has only part
// of.
type relay struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	cond      *sync.Cond
	forwarded int64 // bytes from the archive to the data API
	limit     int64 // forwarded stops here; -1: no limit
	conns     []net.Conn
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, limit: -1}
	r.cond = sync.NewCond(&r.mu)
	t.Cleanup(func() {
		ln.Close()
		r.cut()
		r.release()
	})
	go r.accept()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close() // nothing behind: as a refused connection
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { r.down(c, up); c.Close() }()
	}
}

// down copies from the archive, stopping at the limit until released.
func (r *relay) down(dst, src net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		r.mu.Lock()
		for r.limit >= 0 && r.forwarded >= r.limit {
			r.cond.Wait()
		}
		n := int64(len(buf))
		if r.limit >= 0 {
			n = min(n, r.limit-r.forwarded)
		}
		r.mu.Unlock()
		m, err := src.Read(buf[:n])
		if m > 0 {
			if _, werr := dst.Write(buf[:m]); werr != nil {
				return
			}
			r.mu.Lock()
			r.forwarded += int64(m)
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// holdAfter lets n more bytes pass from the archive, then holds the rest.
func (r *relay) holdAfter(n int64) {
	r.mu.Lock()
	r.limit = r.forwarded + n
	r.mu.Unlock()
}

func (r *relay) passed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.forwarded
}

func (r *relay) release() {
	r.mu.Lock()
	r.limit = -1
	r.cond.Broadcast()
	r.mu.Unlock()
}

// cut closes every connection through the relay.
func (r *relay) cut() {
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
}

// TestWaveforms: the data API serves the archive's REST routes from
// svc-waveform's gRPC service — connected lazily, the JSON of Query, the
// miniSEED download streamed from Export as it arrives (and cut, not
// shortened, when the archive goes away mid-way), the archive's answers to
// bad requests, and a 503 in the error shape while the archive is away.
func TestWaveforms(t *testing.T) {
	// Not parallel: see TestProvisioning.
	archiveAddr := freeaddr.TCP(t)
	via := startRelay(t, archiveAddr)
	reg := filepath.Join(t.TempDir(), "stations.json")
	doc := `[{"id":"HUA-01","name":"Hualien","net":"SIM","lat":23.99,"lon":121.61,"code":970,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`
	if err := os.WriteFile(reg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "-registry", reg, "-waveform", via.addr())
	base := start(t, cfg)
	const id = "HUA-01"
	from := time.Now().Add(-3*time.Hour).UnixMilli() / 500 * 500
	get := func(path string) answer { t.Helper(); return do(t, "GET", base+path, "", nil) }
	jsonPath := func(startMs, endMs int64) string {
		return fmt.Sprintf("/v1/waveforms/%s?start_ms=%d&end_ms=%d&with_intensity=true", id, startMs, endMs)
	}
	mseedPath := func(startMs, endMs int64) string {
		return fmt.Sprintf("/v1/waveforms/%s/mseed?start_ms=%d&end_ms=%d&intensity=true", id, startMs, endMs)
	}
	unavailable := func(when string) {
		t.Helper()
		for _, path := range []string{jsonPath(from, from+60_000), mseedPath(from, from+60_000)} {
			a := get(path)
			if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
				t.Fatalf("%s: GET %s: %d %v %s, want 503 with Retry-After", when, path, a.code, a.header, a.body)
			}
			if msg := errorBody(t, a); msg != "archive unavailable" {
				t.Fatalf("%s: GET %s: error %q", when, path, msg)
			}
		}
	}

	// The data API started first: the archive is away, which is a 503.
	unavailable("before svc-waveform started")
	archive := startArchive(t, archiveAddr)
	archive.ingest(t, id, from, from+3600_000)
	// The data API finds the archive once it is there, without a restart.
	awaitArchive := func(when string) {
		t.Helper()
		var a answer
		// Anything but a 503 ends the wait, and anything but a 200 fails.
		poll.Within(10*time.Second, func() bool {
			a = get(jsonPath(from, from+1000))
			return a.code != http.StatusServiceUnavailable
		})
		if a.code != 200 {
			t.Fatalf("%s: %d %s", when, a.code, a.body)
		}
	}
	awaitArchive("svc-waveform started after the data API")

	t.Run("query", func(t *testing.T) {
		a := get(jsonPath(from, from+120_000))
		if a.code != 200 || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %v %.300s", a.code, a.header, a.body)
		}
		for k := range a.header {
			if strings.HasPrefix(k, "Grpc-") {
				t.Errorf("header %s: the archive's gRPC metadata reached the client", k)
			}
		}
		var got waveformv1.QueryResponse
		if err := protojson.Unmarshal(a.body, &got); err != nil {
			t.Fatalf("body: %v", err)
		}
		want, err := archive.client.Query(context.Background(), &waveformv1.QueryRequest{StationId: id, StartMs: from, EndMs: from + 120_000, WithIntensity: true})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, want) || len(got.GetChunks()) != 2 || len(got.GetIntensity()) != 239 || got.GetStationCode() != "HUA01" {
			t.Errorf("JSON answer differs from the archive's: %d chunks, %d intensity samples, station %q", len(got.GetChunks()), len(got.GetIntensity()), got.GetStationCode())
		}
		// Names as the archive's own gateway sent them: proto names, 64-bit
		// integers as strings.
		if !bytes.Contains(a.body, fmt.Appendf(nil, `"first_sample_ms":"%d"`, from)) || !bytes.Contains(a.body, []byte(`"network_code":"SH"`)) {
			t.Errorf("JSON names: %.300s", a.body)
		}
	})

	t.Run("export", func(t *testing.T) {
		a := get(mseedPath(from, from+600_000))
		name := "SH.HUA01.00." + time.UnixMilli(from).UTC().Format("20060102T150405") + ".mseed"
		if a.code != 200 || a.header.Get("Content-Type") != waveforms.MediaType || a.header.Get("Content-Disposition") != `attachment; filename="`+name+`"` {
			t.Fatalf("%d %v", a.code, a.header)
		}
		want := archive.export(t, &waveformv1.ExportRequest{StationId: id, StartMs: from, EndMs: from + 600_000, WithIntensity: true})
		if !bytes.Equal(a.body, want) {
			t.Fatalf("download of %d bytes differs from the archive's export of %d", len(a.body), len(want))
		}
		recs, err := mseed.ReadAll(bytes.NewReader(a.body))
		samples := map[string]int{}
		for _, r := range recs {
			samples[r.Channel] += r.NumSamples
		}
		if err != nil || samples["BNZ"] != 30_000 || samples["MXI"] != 240 {
			t.Errorf("records: %v, samples %v", err, samples)
		}
		// A window without data: 204, as FDSN dataselect answers.
		if a := get(mseedPath(from-7200_000, from-3600_000)); a.code != http.StatusNoContent || len(a.body) != 0 {
			t.Errorf("empty window: %d %q", a.code, a.body)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			code         int
			msg          string
		}{
			{"GET", fmt.Sprintf("/v1/waveforms/NOSUCH?start_ms=%d&end_ms=%d", from, from+1000), 404, "no data for this station"},
			{"GET", fmt.Sprintf("/v1/waveforms/NOSUCH/mseed?start_ms=%d&end_ms=%d", from, from+1000), 404, "no data for this station"},
			{"GET", "/v1/waveforms/NOSUCH/mseed?start_ms=5000&end_ms=1000", 404, "no data for this station"},
			{"GET", jsonPath(from+1000, from), 400, "invalid time window: end must be after start"},
			{"GET", jsonPath(from, from+2*3600_000), 400, "invalid time window: longer than 1h0m0s"},
			{"GET", mseedPath(from+1000, from), 400, "invalid time window: end must be after start"},
			{"GET", mseedPath(from, from+2*86400_000), 400, "invalid time window: longer than 24h0m0s"},
			{"GET", "/v1/waveforms/" + id + "?start_ms=x&end_ms=1000", 400, `parsing field "start_ms"`},
			{"GET", "/v1/waveforms/" + id + "/mseed?start_ms=x&end_ms=1000", 400, "start_ms and end_ms: give Unix milliseconds"},
			{"GET", "/v1/waveforms/" + id + "/mseed?end_ms=1000", 400, "start_ms and end_ms: give Unix milliseconds"},
			{"GET", fmt.Sprintf("/v1/waveforms/%s/mseed?start_ms=%d&end_ms=%d&intensity=maybe", id, from, from+1000), 400, "intensity: give true or false"},
			{"GET", "/v1/waveforms/" + id + "/other", 404, "no such route"},
			{"POST", jsonPath(from, from+1000), 405, "method POST not allowed here"},
			{"DELETE", mseedPath(from, from+1000), 405, "method DELETE not allowed here"},
		} {
			a := do(t, tc.method, base+tc.path, "", nil)
			if a.code != tc.code {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, a.code, a.body, tc.code)
				continue
			}
			if msg := errorBody(t, a); !strings.Contains(msg, tc.msg) {
				t.Errorf("%s %s: error %q, want %q", tc.method, tc.path, msg, tc.msg)
			}
		}
	})

	t.Run("export streams", func(t *testing.T) {
		// An hour of three axes, about 800 KB. The relay lets 128 KiB of
		// the archive's answer through and holds the rest: the client must
		// have the download's start while the data API cannot have more
		// than that of the export.
		want := archive.export(t, &waveformv1.ExportRequest{StationId: id, StartMs: from, EndMs: from + 3600_000})
		const window = 128 << 10
		if len(want) < 4*window {
			t.Fatalf("export of %d bytes: too small to show streaming", len(want))
		}
		before := via.passed()
		via.holdAfter(window)
		t.Cleanup(via.release) // also when the test fails before releasing
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+fmt.Sprintf("/v1/waveforms/%s/mseed?start_ms=%d&end_ms=%d", id, from, from+3600_000), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("download did not start while the archive's answer was held: %v", err)
		}
		defer res.Body.Close()
		head := make([]byte, 32<<10)
		if _, err := io.ReadFull(res.Body, head); err != nil || res.StatusCode != 200 {
			t.Fatalf("first 32 KiB of the download: %d %v", res.StatusCode, err)
		}
		if got := via.passed() - before; got > window {
			t.Fatalf("%d bytes passed the relay while holding after %d", got, window)
		}
		via.release()
		rest, err := io.ReadAll(res.Body)
		if err != nil || !bytes.Equal(append(head, rest...), want) {
			t.Fatalf("download of %d bytes (%v) differs from the export of %d", len(head)+len(rest), err, len(want))
		}
	})

	t.Run("export cut short", func(t *testing.T) {
		// The archive goes away mid-download: the client must see a broken
		// transfer, never a short file that looks whole.
		via.holdAfter(96 << 10)
		t.Cleanup(via.release)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+mseedPath(from, from+3600_000), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if _, err := io.ReadFull(res.Body, make([]byte, 32<<10)); err != nil || res.StatusCode != 200 {
			t.Fatalf("download start: %d %v", res.StatusCode, err)
		}
		via.cut()
		via.release()
		if _, err := io.ReadAll(res.Body); err == nil {
			t.Fatal("a download cut short at the archive ended cleanly")
		}
		awaitArchive("after the cut")
	})

	archive.stop()
	unavailable("after svc-waveform stopped")
}

// dayFiles waits until svc-waveform's BN? day files under dataDir are
// written whole — at least least of them, no longer growing — and returns
// them and their size.
func dayFiles(t testing.TB, dataDir string, least int) ([]string, int64) {
	t.Helper()
	var files []string
	var size int64
	poll.Until(t, 60*time.Second, "the BN? day files written whole", func() bool {
		files, _ = filepath.Glob(filepath.Join(dataDir, "sds", "*", "*", "*", "BN?.D", "*"))
		var n int64
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				n += st.Size()
			}
		}
		stable := n == size && n > 0
		size = n
		return stable && len(files) >= least
	})
	return files, size
}

package playback

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/compatjson"
)

// archiveCore is a core's svc-rts answering GetSnapshot from a map, with
// ticks after latest not computed yet.
type archiveCore struct {
	rtsv1.UnimplementedRTSServiceServer
	ticks  map[int64]*rtsv1.Snapshot
	latest int64
}

func (c *archiveCore) GetSnapshot(_ context.Context, req *rtsv1.GetSnapshotRequest) (*rtsv1.GetSnapshotResponse, error) {
	t := req.GetTimeMs() - req.GetTimeMs()%500
	if t > c.latest {
		return nil, status.Error(codes.OutOfRange, "not yet")
	}
	if s, ok := c.ticks[t]; ok {
		return &rtsv1.GetSnapshotResponse{Snapshot: s}, nil
	}
	return nil, status.Error(codes.NotFound, "not archived")
}

func serve(t *testing.T, c rtsv1.RTSServiceServer) rtsv1.RTSServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rtsv1.RegisterRTSServiceServer(gs, c)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rtsv1.NewRTSServiceClient(conn)
}

const tick = int64(1_800_000_000_000)

func snapshot(ms int64) *rtsv1.Snapshot {
	return &rtsv1.Snapshot{TimeMs: ms, Site: "TYO-1",
		Stations: []*rtsv1.StationState{{StationId: "S1", Pga: 1.5, Intensity: 2.1, DisplayIntensity: 2.2, Alert: true}},
		Detections: []*rtsv1.Detection{{Id: "1-18", Serial: 2, FirstTriggerMs: ms - 5000, Location: "花蓮縣壽豐鄉",
			Areas: []*rtsv1.AreaLevel{{Code: 974, Level: 3}}, AreaSerial: 1,
			Lpgm: []*rtsv1.StationLPGM{{StationId: "S1", Level: 1, SvaCms: 6}}}}}
}

// TestReplayRoutes: a tick this core missed comes from its peer, rendered
// as the live routes render it; a path in seconds or ms; a tick nobody
// holds is an empty, marked answer; the future is a 404; bad times a 400;
// no core answering a 503.
func TestReplayRoutes(t *testing.T) {
	t.Parallel()
	own := &archiveCore{ticks: map[int64]*rtsv1.Snapshot{}, latest: tick + 10_000}
	peer := &archiveCore{ticks: map[int64]*rtsv1.Snapshot{tick: snapshot(tick)}, latest: tick + 10_000}
	mux := http.NewServeMux()
	New([]rtsv1.RTSServiceClient{serve(t, own), serve(t, peer)}, "trem", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil))).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, http.Header, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	s := snapshot(tick)
	for _, tc := range []struct {
		path, want string
	}{
		{"/api/v2/trem/rts/1800000000", string(compatjson.RTS(s))},
		{"/api/v2/trem/rts/1800000000499", string(compatjson.RTS(s))},
		{"/api/v2/eq/eew/1800000000", string(compatjson.EEW("trem", s.Detections))},
		{"/api/v2/trem/intensity/1800000000", string(compatjson.Intensity("trem", s.Detections))},
		{"/api/v2/trem/lpgm/1800000000?cachebuster=1", string(compatjson.LPGM("trem", s.Detections))},
		{"/api/v3/trem/rts/1800000000", string(compatjson.RTSv1(s))},
		{"/api/v3/trem/intensity/1800000000", string(compatjson.IntensityV1(s))},
	} {
		code, hdr, body := get(tc.path)
		if code != 200 || body != tc.want || hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Shindo-Archived") != "1" {
			t.Errorf("%s: %d %v %s, want %s", tc.path, code, hdr, body, tc.want)
		}
	}
	code, hdr, body := get("/api/v2/trem/rts/1800000005")
	if code != 200 || body != `{"station":{},"box":{},"int":[],"time":1800000005000}` || hdr.Get("X-Shindo-Archived") != "0" {
		t.Errorf("a tick nobody holds: %d %s", code, body)
	}
	if code, _, body := get("/api/v2/eq/eew/1800000005"); code != 200 || body != "[]" {
		t.Errorf("alerts of a tick nobody holds: %d %s", code, body)
	}
	if code, _, _ := get("/api/v2/trem/rts/1800000999"); code != http.StatusNotFound {
		t.Errorf("the future: %d", code)
	}
	for _, bad := range []string{"abc", "-5", "1e9", "0", "99999999999999999", "1800000000.5"} {
		if code, _, _ := get("/api/v2/trem/rts/" + bad); code != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400", bad, code)
		}
	}

	// No core answers: a 503, so clients try another entrance.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ln.Close()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	down := http.NewServeMux()
	New([]rtsv1.RTSServiceClient{rtsv1.NewRTSServiceClient(conn)}, "trem", 200*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil))).Register(down)
	rec := httptest.NewRecorder()
	down.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v2/trem/rts/1800000000", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("no core answering: %d", rec.Code)
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1800000000", 1_800_000_000_000, true},
		{"1800000000123", 1_800_000_000_123, true},
		{"99999999999", 99_999_999_999_000, true},
		{"100000000000", 100_000_000_000, true},
		{"253402300799999", 253402300799999, true},
		{"253402300800000", 0, false},
		{"", 0, false},
		{"0", 0, false},
		{"+5", 0, false},
		{"1234567890123456", 0, false},
	} {
		got, err := ParseTime(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %d %v", tc.in, got, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"1800000000", "1800000000123", "٣", "00000000000000001", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseTime(s)
		if err == nil && (ms <= 0 || ms > maxTimeMs) {
			t.Fatalf("%q: %d", s, ms)
		}
	})
}

package edge

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/poll"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/compatjson"
	"shindo.dev/svc-edge/internal/source"
	"shindo.dev/svc-edge/internal/sse"
)

// core is a real RTSService endpoint whose Subscribe streams what the test
// feeds it.
type core struct {
	rtsv1.UnimplementedRTSServiceServer
	feed chan *rtsv1.Snapshot
	srv  *grpc.Server
	addr string
}

func (c *core) Subscribe(_ *rtsv1.SubscribeRequest, stream rtsv1.RTSService_SubscribeServer) error {
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case s := <-c.feed:
			if err := stream.Send(&rtsv1.SubscribeResponse{Snapshot: s}); err != nil {
				return err
			}
		}
	}
}

func startCore(t *testing.T) *core {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &core{feed: make(chan *rtsv1.Snapshot), srv: grpc.NewServer(), addr: ln.Addr().String()}
	rtsv1.RegisterRTSServiceServer(c.srv, c)
	go c.srv.Serve(ln)
	t.Cleanup(c.srv.Stop)
	return c
}

// edgeWithCores runs the edge's streams fed by a source over two fake
// cores, behind an HTTP server with the compatible routes.
func edgeWithCores(t *testing.T) (a, b *core, sel *source.Selector, st *streams, url string) {
	t.Helper()
	a, b = startCore(t), startCore(t)
	var conns []*grpc.ClientConn
	for _, c := range []*core{a, b} {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
	}
	stop := make(chan struct{})
	st, err := newStreams("TPE-1", compatjson.DefaultAuthor, sse.Options{Retry: 3 * time.Second, KeepAlive: time.Hour, Buffer: 16, WriteTimeout: time.Second, MaxClients: 10, Stop: stop,
		History: time.Minute, MaxHistory: 500}, 50)
	if err != nil {
		t.Fatal(err)
	}
	sel = source.New("TPE-1", []string{a.addr, b.addr}, conns, st.serve, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	go sel.Run(ctx)
	mux := http.NewServeMux()
	st.register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(stop)
		cancel()
		srv.CloseClientConnections()
		srv.Close()
	})
	return a, b, sel, st, srv.URL
}

func detection(id string, serial uint32, final bool) *rtsv1.Detection {
	return &rtsv1.Detection{
		Id: id, Serial: serial, Final: final, OriginTimeMs: 1_800_000_001_000, Lat: 23.78, Lon: 121.67,
		DepthKm: 10, Magnitude: 6.1, Location: "Shoufeng", LocationCode: 974, MaxLevel: 5,
		FirstTriggerMs: 1_800_000_005_500, UpdatedMs: 1_800_000_005_500 + int64(serial)*500,
	}
}

func snapshot(ms int64, ds ...*rtsv1.Detection) *rtsv1.Snapshot {
	return &rtsv1.Snapshot{TimeMs: ms, Detections: ds}
}

// alert is what a client reads of an alert.
type alert struct {
	ID     string `json:"id"`
	Serial int    `json:"serial"`
	Final  int    `json:"final"`
}

func decodeAlerts(t *testing.T, data string) []alert {
	t.Helper()
	var as []alert
	if err := json.Unmarshal([]byte(data), &as); err != nil {
		t.Fatalf("alerts %q: %v", data, err)
	}
	return as
}

func getEEW(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/api/v2/eq/eew")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEEWRoute runs GET /api/v2/eq/eew and its SSE stream against two
// cores, across a switch of core: `[]` when quiet, the SSE preamble of
// SPEC §7, the list at every tick while alerts are listed and once when it
// empties, and no serial going back when the new core lags.
func TestEEWRoute(t *testing.T) {
	t.Parallel()
	a, b, sel, st, url := edgeWithCores(t)
	if code, _ := getEEW(t, url); code != http.StatusServiceUnavailable {
		t.Fatalf("before any snapshot: %d", code)
	}

	resp, err := http.Get(url + "/api/v2/eq/eew?sse=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	blocks := readBlocks(resp.Body)
	for _, want := range []string{"retry: 3000\n", "event: info\ndata: {\"location\":\"TPE-1\"}\n"} {
		if got := next(t, blocks); got != want {
			t.Fatalf("block %q, want %q", got, want)
		}
	}
	waitClients(t, st.hub, 1)

	// Served: A while it lives, then B, which lags a serial behind at
	// first.
	tick := func(c *core, ms int64, ds ...*rtsv1.Detection) { t.Helper(); serveTick(t, st, c, ms, ds...) }
	tick(a, 500)
	if code, body := getEEW(t, url); code != http.StatusOK || body != "[]" {
		t.Fatalf("quiet: %d %s", code, body)
	}
	tick(a, 1000, detection("X", 1, false))
	tick(a, 1500, detection("X", 1, false)) // unchanged: the list again
	tick(a, 2000, detection("X", 2, false))

	// A dies; B, one serial behind, takes over.
	a.srv.Stop()
	poll.Until(t, 5*time.Second, "A disconnected", func() bool { return !sel.Status()[0].Connected })
	tick(b, 2500, detection("X", 1, false)) // lagging: the served serial stays
	tick(b, 3000, detection("X", 2, false)) // caught up
	tick(b, 3500, detection("X", 3, false))
	tick(b, 4000, detection("X", 4, true))
	tick(b, 4500)

	want := []string{"[]", "[X/1]", "[X/1]", "[X/2]", "[X/2]", "[X/2]", "[X/3]", "[X/4!]", "[]"}
	for i, w := range want {
		data, ok := strings.CutPrefix(next(t, blocks), "data: ")
		if !ok {
			t.Fatalf("event %d is not a default data event", i)
		}
		if got := render(decodeAlerts(t, strings.TrimSuffix(data, "\n"))); got != w {
			t.Fatalf("event %d: %s, want %s", i, got, w)
		}
	}
	select {
	case extra := <-blocks:
		t.Fatalf("unexpected event %q", extra)
	case <-time.After(100 * time.Millisecond):
	}
	if code, body := getEEW(t, url); code != http.StatusOK || body != "[]" {
		t.Fatalf("after the end: %d %s", code, body)
	}
}

// serveTick has core c send a snapshot and waits until the edge served it.
func serveTick(t *testing.T, st *streams, c *core, ms int64, ds ...*rtsv1.Detection) {
	t.Helper()
	c.feed <- snapshot(ms, ds...)
	poll.Until(t, 5*time.Second, fmt.Sprintf("tick %d served", ms), func() bool { return st.latestTick.Load() >= ms })
}

func render(as []alert) string {
	var parts []string
	for _, a := range as {
		s := a.ID + "/" + strconv.Itoa(a.Serial)
		if a.Final == 1 {
			s += "!"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func readBlocks(body io.Reader) <-chan string {
	out := make(chan string, 64)
	go func() {
		defer close(out)
		r := bufio.NewReader(body)
		var block strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\n" {
				out <- block.String()
				block.Reset()
				continue
			}
			block.WriteString(line)
		}
	}()
	return out
}

// next returns the next event block without its id line; every event must
// carry one so a reconnecting client can resume.
func next(t *testing.T, blocks <-chan string) string {
	t.Helper()
	select {
	case b := <-blocks:
		if strings.HasPrefix(b, "retry:") || strings.HasPrefix(b, ":") {
			return b
		}
		id, rest, ok := strings.Cut(b, "\n")
		if !ok || !strings.HasPrefix(id, "id: ") {
			t.Fatalf("event without an id: %q", b)
		}
		return rest
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return ""
	}
}

func waitClients(t *testing.T, h *sse.Hub, n int) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("%d clients", n), func() bool { c, _ := h.Stats(); return c == n })
}

// TestEEWRouteCompressed: with compress=1 the alerts come as event g,
// base64(gzip(JSON)), starting with the current list; bad parameters get
// 400.
func TestEEWRouteCompressed(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	a.feed <- snapshot(500, detection("X", 2, false))
	poll.Until(t, 5*time.Second, "the alerts served", func() bool { return st.hub.Latest(topicEEW) != nil })
	resp, err := http.Get(url + "/api/v2/eq/eew?sse=1&compress=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	blocks := readBlocks(resp.Body)
	next(t, blocks)
	next(t, blocks)
	data, ok := strings.CutPrefix(next(t, blocks), "event: g\ndata: ")
	if !ok {
		t.Fatal("not a g event")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(data, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if want := compatjson.EEW(compatjson.DefaultAuthor, []*rtsv1.Detection{detection("X", 2, false)}); string(plain) != string(want) {
		t.Fatalf("decompressed %s, want %s", plain, want)
	}

	bad, err := http.Get(url + "/api/v2/eq/eew?sse=2")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("sse=2: %d", bad.StatusCode)
	}
}

// TestCompatNegotiation: the compatible routes stream when the client asks
// with Accept: text/event-stream and no query, as TREM-Lite does
// (src/js/index/data/http.js:165-168 of ExpTechTW/TREM-Lite at 9bbaccf),
// exactly as with sse=1; other Accept headers, a refused stream (q=0) and
// sse=0 get the JSON document.
func TestCompatNegotiation(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	serveTick(t, st, a, 500)
	for _, tc := range []struct {
		path, accept string
		stream       bool
	}{
		{"/api/v2/trem/rts", "text/event-stream", true},
		{"/api/v2/eq/eew", "text/event-stream", true},
		{"/api/v2/trem/rts", "application/json, Text/Event-Stream;q=0.5", true},
		{"/api/v2/trem/rts?sse=1", "", true},
		{"/api/v2/trem/rts", "", false},
		{"/api/v2/trem/rts", "*/*", false},
		{"/api/v2/trem/rts", "application/json", false},
		{"/api/v2/trem/rts", "text/event-stream;q=0", false},
		{"/api/v2/eq/eew?sse=0", "text/event-stream", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, url+tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ct := resp.Header.Get("Content-Type")
		if !strings.Contains(resp.Header.Get("Vary"), "Accept") {
			t.Errorf("%s (Accept %q): no Vary: Accept", tc.path, tc.accept)
		}
		if !tc.stream {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ct != "application/json" || !json.Valid(b) {
				t.Errorf("%s (Accept %q): %s %q, want a JSON document", tc.path, tc.accept, ct, b)
			}
			continue
		}
		if ct != "text/event-stream" {
			t.Errorf("%s (Accept %q): content type %q, want the stream", tc.path, tc.accept, ct)
		}
		blocks := readBlocks(resp.Body)
		for _, want := range []string{"retry: 3000\n", "event: info\ndata: {\"location\":\"TPE-1\"}\n"} {
			if got := next(t, blocks); got != want {
				t.Errorf("%s (Accept %q): block %q, want %q", tc.path, tc.accept, got, want)
			}
		}
		if data, ok := strings.CutPrefix(next(t, blocks), "data: "); !ok || !json.Valid([]byte(data)) {
			t.Errorf("%s (Accept %q): the latest event is not a data event: %q", tc.path, tc.accept, data)
		}
		resp.Body.Close()
	}
}

func TestAcceptsEventStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"text/event-stream"}, true},
		{[]string{"application/json", "text/event-stream; charset=utf-8"}, true},
		{[]string{"text/event-stream;q=0.0"}, false},
		{[]string{"text/event-stream;q=0.001"}, true},
		{[]string{"text/event-stream;q=x"}, true},
		{[]string{"text/*"}, false},
		{[]string{"text/event-streams"}, false},
		{[]string{",,;;=,text/event-stream;;"}, true},
	} {
		if got := acceptsEventStream(tc.accept); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// FuzzAcceptsEventStream: any Accept header is read without a panic, and a
// header that does not mention the stream never selects it.
func FuzzAcceptsEventStream(f *testing.F) {
	for _, s := range []string{"text/event-stream", "application/json, text/event-stream;q=0.5", "text/event-stream;q=0", "*/*", ";;q=;,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got := acceptsEventStream([]string{accept})
		if got && !strings.Contains(strings.ToLower(accept), "text/event-stream") {
			t.Fatalf("%q selects the stream", accept)
		}
	})
}

// TestFlashRoutes: the intensity flash and the long-period stations of the
// served detections, as TREM-Lite polls them (GET /api/v2/trem/intensity
// and /api/v2/trem/lpgm, src/js/index/data/http.js:310-324 of
// ExpTechTW/TREM-Lite at 9bbaccf) and as streams; one event per change.
func TestFlashRoutes(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	serveTick(t, st, a, 500)
	if got := get("/api/v2/trem/intensity"); got != "[]" {
		t.Fatalf("quiet intensity %s", got)
	}
	if got := get("/api/v2/trem/lpgm"); got != "[]" {
		t.Fatalf("quiet lpgm %s", got)
	}
	resp, blocks := openStream(t, url, "topics=intensity,lpgm", "")
	defer resp.Body.Close()
	for _, want := range []string{"500-3", "500-4"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("latest %s, want %s", got, want)
		}
	}
	waitClients(t, st.hub, 1)
	d := detection("X", 1, false)
	d.Areas, d.AreaSerial = []*rtsv1.AreaLevel{{Code: 974, Level: 4}}, 1
	serveTick(t, st, a, 1000, d)
	serveTick(t, st, a, 1500, d) // unchanged: no event
	d2 := detection("X", 1, false)
	d2.Areas, d2.AreaSerial = d.Areas, 1
	d2.Lpgm = []*rtsv1.StationLPGM{{StationId: "S1", Level: 2, SvaCms: 20}}
	serveTick(t, st, a, 2000, d2)
	for _, want := range []string{"1000-3", "2000-4"} {
		if got := eventID(t, blocks); got != want {
			t.Fatalf("live %s, want %s", got, want)
		}
	}
	if got, want := get("/api/v2/trem/intensity"), string(compatjson.Intensity(compatjson.DefaultAuthor, []*rtsv1.Detection{d2})); got != want {
		t.Fatalf("intensity %s, want %s", got, want)
	}
	if got, want := get("/api/v2/trem/lpgm"), string(compatjson.LPGM(compatjson.DefaultAuthor, []*rtsv1.Detection{d2})); got != want {
		t.Fatalf("lpgm %s, want %s", got, want)
	}
}

// TestTremSSE: GET /api/v1/trem/sse, the stream of the newest TREM-Lite
// (packages/core/src/features/data/dataHttp.ts at 2400a0e): the info
// greeting with the topics granted and denied, named events, every tick
// with mode=live and only the triggered ones without, the intensity flash
// as XML when it changes; bad requests refused.
func TestTremSSE(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	serveTick(t, st, a, 500)
	for _, bad := range []string{"", "?topics=", "?topics=trem.eew.v1", "?topics=trem.rts.v1&mode=sleep"} {
		resp, err := http.Get(url + "/api/v1/trem/sse" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %d", bad, resp.StatusCode)
		}
	}
	open := func(query string) <-chan string {
		resp, err := http.Get(url + "/api/v1/trem/sse" + query)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", query, resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		blocks := readBlocks(resp.Body)
		if got := next(t, blocks); got != "retry: 3000\n" {
			t.Fatalf("%q", got)
		}
		return blocks
	}
	live := open("?topics=trem.intensity.v1,trem.rts.v1,trem.eew.v1&mode=live")
	asleep := open("?topics=trem.rts.v1")
	hello := next(t, live)
	if !strings.Contains(hello, `event: info`) || !strings.Contains(hello, `"topics":["trem.intensity.v1","trem.rts.v1"]`) || !strings.Contains(hello, `"denied":{"trem.eew.v1"`) {
		t.Fatalf("greeting %q", hello)
	}
	next(t, asleep)
	// The latest rts.v1 at once for a live client.
	if got := next(t, live); !strings.Contains(got, "event: trem.rts.v1\n") || !strings.Contains(got, `"ts":500`) {
		t.Fatalf("latest %q", got)
	}
	waitClients(t, st.hub, 2)
	d := detection("X", 1, false)
	d.Areas, d.AreaSerial = []*rtsv1.AreaLevel{{Code: 974, Level: 6}}, 1
	a.feed <- &rtsv1.Snapshot{TimeMs: 1000, Site: "TNN-1", Detections: []*rtsv1.Detection{d},
		Stations: []*rtsv1.StationState{{StationId: "S1", Intensity: 4, Alert: true}}}
	for want := 0; want < 2; want++ {
		got := next(t, live)
		switch {
		case strings.Contains(got, "event: trem.rts.v1\n"):
			if !strings.Contains(got, `"alert":1`) {
				t.Fatalf("rts.v1 %q", got)
			}
		case strings.Contains(got, "event: trem.intensity.v1\n"):
			if !strings.Contains(got, `<Area level="5+"><Town code="974"/></Area>`) || !strings.Contains(got, `<InfoType>發表</InfoType>`) {
				t.Fatalf("intensity %q", got)
			}
		default:
			t.Fatalf("unexpected %q", got)
		}
	}
	// Asleep: only the tick with a triggered station.
	if got := next(t, asleep); !strings.Contains(got, "event: trem.rts.v1\n") || !strings.Contains(got, `"ts":1000`) {
		t.Fatalf("asleep %q", got)
	}
	serveTick(t, st, a, 1500) // nobody triggered: no event asleep
	serveTick(t, st, a, 2000)
	select {
	case extra := <-asleep:
		t.Fatalf("asleep, a quiet tick: %q", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

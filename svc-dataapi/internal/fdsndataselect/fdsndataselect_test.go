package fdsndataselect

import (
	"bytes"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
)

// t0 is where the archive stand-in's data begin: 60 s of every channel
// of station tw-hl-01, with a gap of one second from 20 s on.
var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

const (
	dataMs       = 60_000
	gapFrom, gap = 20_000, 1_000
)

// value is the archive's sample of channel c at time ms (counts; the MX
// channels hold the same as a float).
func value(c string, ms int64) int32 {
	return int32(ms/20%1000) + int32(len(c))*int32(c[2])
}

// archive stands in for svc-waveform's Export, which e2e/fdsn_test.go
// answers for real: records of 1024 bytes made with the archive's own
// encoder (seismo/mseed), cut to the window, channel by channel, in parts.
type archive struct {
	waveformv1.UnimplementedWaveformServiceServer
	fail codes.Code // non-zero: every Export fails so
	// sds is the SDS root the handler is given, and span what an Export
	// asked for file spans sends first.
	sds  string
	span *waveformv1.FileSpan
	// spanLast sends the span after the records instead.
	spanLast bool
	// spanAsks counts the Exports that asked for file spans.
	spanAsks atomic.Int32
}

func (a *archive) Export(req *waveformv1.ExportRequest, stream waveformv1.WaveformService_ExportServer) error {
	if a.fail != codes.OK {
		return status.Error(a.fail, "failing on purpose")
	}
	if req.GetStationId() != "tw-hl-01" {
		return status.Error(codes.NotFound, "no data for this station")
	}
	if req.GetEndMs() <= req.GetStartMs() || req.GetEndMs()-req.GetStartMs() > dayMs {
		return status.Error(codes.InvalidArgument, "bad window")
	}
	if req.GetFileSpans() {
		a.spanAsks.Add(1)
	}
	if a.span != nil && req.GetFileSpans() && !a.spanLast {
		if err := stream.Send(&waveformv1.ExportResponse{Span: a.span}); err != nil {
			return err
		}
	}
	from := t0.UnixMilli()
	var part []byte
	for _, code := range req.GetChannels() {
		c := slices.IndexFunc(seedcode.Channels[:], func(ch seedcode.Channel) bool { return ch.Code == code })
		if c < 0 {
			return status.Error(codes.InvalidArgument, "unknown channel")
		}
		period := int64(20)
		enc := mseed.Steim2
		if code[0] == 'M' {
			period, enc = 500, mseed.Float32
		}
		// Runs of samples inside the window, cut at the gap.
		lo, hi := max(req.GetStartMs(), from), min(req.GetEndMs(), from+dataMs)
		lo = (lo + period - 1) / period * period
		var run []int64
		flush := func() {
			for len(run) > 0 {
				buf := make([]byte, 1024)
				h := mseed.Header{Network: "SH", Station: "HL01", Location: "00", Channel: code,
					Start: time.UnixMilli(run[0]).UTC(), SampleRate: 1000 / float64(period), Encoding: enc}
				var n int
				var err error
				if enc == mseed.Float32 {
					fl := make([]float32, len(run))
					for i, ms := range run {
						fl[i] = float32(value(code, ms))
					}
					n, err = mseed.PackFloat32s(buf, h, fl)
				} else {
					xs := make([]int32, len(run))
					for i, ms := range run {
						xs[i] = value(code, ms)
					}
					n, err = mseed.PackInts(buf, h, xs)
				}
				if err != nil {
					panic(err)
				}
				part = append(part, buf...)
				run = run[n:]
			}
		}
		for ms := lo; ms < hi; ms += period {
			if ms-from >= gapFrom && ms-from < gapFrom+gap {
				flush()
				continue
			}
			run = append(run, ms)
		}
		flush()
	}
	for len(part) > 0 {
		n := min(len(part), 8*1024)
		if err := stream.Send(&waveformv1.ExportResponse{Data: part[:n]}); err != nil {
			return err
		}
		part = part[n:]
	}
	if a.span != nil && req.GetFileSpans() && a.spanLast {
		return stream.Send(&waveformv1.ExportResponse{Span: a.span})
	}
	return nil
}

func testSet(t testing.TB) *registry.Set {
	t.Helper()
	key := hex.EncodeToString(make([]byte, 32))
	set, err := registry.NewSet([]*registry.Station{
		{ID: "tw-hl-01", Lat: 23.97, Lon: 121.6, KeyID: 1, KeyHex: key, SEED: seedcode.Codes{Network: "SH", Station: "HL01", Location: "00"}},
		{ID: "TP001", Lat: 25.03, Lon: 121.56, KeyID: 1, KeyHex: key, SEED: seedcode.Codes{Network: "SH", Station: "TP001", Location: "00"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newServer(t testing.TB, a *archive, limits Limits) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	waveformv1.RegisterWaveformServiceServer(gs, a)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	set := testSet(t)
	h := New(func() *registry.Set { return set }, waveformv1.NewWaveformServiceClient(conn), a.sds, limits, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.now = func() time.Time { return t0.Add(time.Hour) }
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func do(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func get(t testing.TB, srv *httptest.Server, query string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+Base+"query?"+query, nil)
	return do(t, req)
}

func iso(d time.Duration) string { return t0.Add(d).Format("2006-01-02T15:04:05.000") }

// samples decodes an answer: each channel's samples by time (ms).
func samples(t testing.TB, body []byte) map[string]map[int64]float64 {
	t.Helper()
	recs, err := mseed.ReadAll(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("answer is not miniSEED: %v", err)
	}
	out := map[string]map[int64]float64{}
	for _, r := range recs {
		if r.SourceName() != "SH_HL01_00_"+r.Channel {
			t.Fatalf("record of %s", r.SourceName())
		}
		m := out[r.Channel]
		if m == nil {
			m = map[int64]float64{}
			out[r.Channel] = m
		}
		period := r.SamplePeriod().Milliseconds()
		for i := range r.NumSamples {
			ms := r.Start.UnixMilli() + int64(i)*period
			if _, dup := m[ms]; dup {
				t.Fatalf("%s sample at %d twice", r.Channel, ms)
			}
			if r.Ints != nil {
				m[ms] = float64(r.Ints[i])
			} else {
				m[ms] = r.Floats[i]
			}
		}
	}
	return out
}

// TestQuery: codes with wildcards and lists, the window cut, every sample
// once with its value, the miniSEED media type, and a POST body of two
// selections.
func TestQuery(t *testing.T) {
	t.Parallel()
	srv := newServer(t, &archive{}, DefaultLimits)
	resp, body := get(t, srv, "net=SH&sta=HL0?&loc=00&cha=BN*&start="+iso(10*time.Second)+"&end="+iso(30*time.Second))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != MediaType {
		t.Fatalf("%d %s: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	got := samples(t, body)
	if len(got) != 3 {
		t.Fatalf("channels %v, want BNZ, BNN, BNE", slices.Collect(maps.Keys(got)))
	}
	for _, ch := range []string{"BNZ", "BNN", "BNE"} {
		// 10 s to 30 s at 50 Hz, less the second of the gap.
		if n := len(got[ch]); n != 950 {
			t.Errorf("%s: %d samples, want 950", ch, n)
		}
		for ms, v := range got[ch] {
			if d := ms - t0.UnixMilli(); d < 10_000 || d >= 30_000 || d >= gapFrom && d < gapFrom+gap || v != float64(value(ch, ms)) {
				t.Fatalf("%s at %+d ms: %v, want %d inside the window, outside the gap", ch, d, v, value(ch, ms))
			}
		}
	}

	body2 := "quality=B\nSH HL01 00 BNZ " + iso(0) + " " + iso(5*time.Second) + "\nSH HL01 -- MXI " + iso(50*time.Second) + " *\n"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Base+"query", strings.NewReader(body2))
	resp, body = do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	// The second line's location is empty: HL01's is 00, so only the first
	// selects.
	if got := samples(t, body); len(got) != 1 || len(got["BNZ"]) != 250 {
		t.Errorf("POST: %d channels, BNZ %d samples; want BNZ only, 250", len(got), len(got["BNZ"]))
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+Base+"query", strings.NewReader("SH HL01 00 MXI,MXV "+iso(50*time.Second)+" *\n"))
	resp, body = do(t, req)
	if got := samples(t, body); resp.StatusCode != http.StatusOK || len(got["MXI"]) != 20 || len(got["MXV"]) != 20 || got["MXV"][t0.UnixMilli()+50_000] != float64(value("MXV", t0.UnixMilli()+50_000)) {
		t.Errorf("POST of the MX channels to now: %d, %d and %d samples", resp.StatusCode, len(got["MXI"]), len(got["MXV"]))
	}
}

// TestSegments: minimumlength drops the continuous segments shorter than it,
// longestonly keeps the longest of each channel: here the 39 s after the
// gap, not the 20 s before it.
func TestSegments(t *testing.T) {
	t.Parallel()
	srv := newServer(t, &archive{}, DefaultLimits)
	window := "&sta=HL01&cha=BNZ,MXA&start=" + iso(0) + "&end=" + iso(time.Minute)
	for _, q := range []string{"minimumlength=30", "longestonly=true", "minimumlength=25&longestonly=true"} {
		resp, body := get(t, srv, q+window)
		got := samples(t, body)
		if resp.StatusCode != http.StatusOK || len(got["BNZ"]) != 39*50 || len(got["MXA"]) != 39*2 {
			t.Errorf("%s: %d, BNZ %d samples, MXA %d; want those of the 39 s after the gap", q, resp.StatusCode, len(got["BNZ"]), len(got["MXA"]))
		}
		for ms := range got["BNZ"] {
			if ms-t0.UnixMilli() < gapFrom+gap {
				t.Fatalf("%s: a sample of the segment before the gap", q)
			}
		}
	}
	// Longer than any segment: no data.
	if resp, _ := get(t, srv, "minimumlength=45&nodata=404"+window); resp.StatusCode != http.StatusNotFound {
		t.Errorf("minimumlength=45: %d, want 404", resp.StatusCode)
	}
	// Shorter than both: everything.
	if resp, body := get(t, srv, "minimumlength=5"+window); resp.StatusCode != http.StatusOK || len(samples(t, body)["BNZ"]) != 59*50 {
		t.Errorf("minimumlength=5: %d, want every sample", resp.StatusCode)
	}
}

// TestNoDataAndErrors: what is not there is 204 or 404 as asked; a bad
// request, a too large one and an archive that fails get FDSN error
// documents with their statuses.
func TestNoDataAndErrors(t *testing.T) {
	t.Parallel()
	srv := newServer(t, &archive{}, Limits{MaxSpan: 24 * time.Hour, MaxWindows: 10, Concurrent: 2, WriteStall: time.Second})
	for _, tc := range []struct {
		query  string
		status int
		detail string
	}{
		{"sta=HL01&start=" + iso(-time.Hour) + "&end=" + iso(-time.Minute), http.StatusNoContent, ""},
		{"sta=HL01&start=" + iso(-time.Hour) + "&end=" + iso(-time.Minute) + "&nodata=404", http.StatusNotFound, ""},
		{"sta=TP001&start=" + iso(0) + "&end=" + iso(time.Minute), http.StatusNoContent, ""}, // never archived
		{"sta=HL01&quality=R&start=" + iso(0) + "&end=" + iso(time.Minute), http.StatusNoContent, ""},
		{"sta=HL01&cha=BHZ&start=" + iso(0) + "&end=" + iso(time.Minute), http.StatusNoContent, ""},
		{"sta=HL01&start=" + iso(2*time.Hour), http.StatusNoContent, ""}, // all of it after now
		{"sta=HL01&end=" + iso(time.Minute), http.StatusBadRequest, "starttime is required"},
		{"sta=HL01&start=" + iso(0) + "&end=" + iso(time.Minute) + "&level=channel", http.StatusBadRequest, `unknown parameter "level"`},
		{"sta=HL01&start=" + iso(0) + "&end=" + iso(time.Minute) + "&format=sac", http.StatusBadRequest, "format"},
		{"sta=HL01&start=" + iso(0) + "&end=" + iso(-time.Minute), http.StatusBadRequest, "before starttime"},
		{"sta=HL01&start=" + iso(-10*time.Hour) + "&end=" + iso(time.Minute), http.StatusRequestEntityTooLarge, "split it"},
	} {
		resp, body := get(t, srv, tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.detail) {
			t.Errorf("%s: %d %.300s; want %d %q", tc.query, resp.StatusCode, body, tc.status, tc.detail)
		}
		if tc.status >= 400 && tc.status != http.StatusNotFound && !strings.HasPrefix(string(body), fmt.Sprintf("Error %d: ", tc.status)) {
			t.Errorf("%s: not an FDSN error document: %.300s", tc.query, body)
		}
	}

	broken := newServer(t, &archive{fail: codes.Unavailable}, DefaultLimits)
	resp, body := get(t, broken, "sta=HL01&start="+iso(0)+"&end="+iso(time.Minute))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "archive unavailable") {
		t.Errorf("archive down: %d %q %.200s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// TestBusy: with every slot taken, a request waits a moment and is then
// refused with 503 and Retry-After.
func TestBusy(t *testing.T) {
	t.Parallel()
	srv := newServer(t, &archive{}, Limits{MaxSpan: time.Hour, MaxWindows: 10, Concurrent: 0, WriteStall: time.Second})
	resp, body := get(t, srv, "sta=HL01&start="+iso(0)+"&end="+iso(time.Minute))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("busy: %d %q %.200s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

func TestVersionAndWADL(t *testing.T) {
	t.Parallel()
	srv := newServer(t, &archive{}, DefaultLimits)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+Base+"version", nil)
	if resp, body := do(t, req); resp.StatusCode != http.StatusOK || string(body) != Version {
		t.Errorf("version: %d %q", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+Base+"application.wadl", nil)
	resp, body := do(t, req)
	var app struct {
		Resources struct {
			Base   string `xml:"base,attr"`
			Params []struct {
				Name string `xml:"name,attr"`
			} `xml:"resource>method>request>param"`
			Media []struct {
				Type string `xml:"mediaType,attr"`
			} `xml:"resource>method>response>representation"`
		} `xml:"resources"`
	}
	if err := xml.Unmarshal(body, &app); resp.StatusCode != http.StatusOK || err != nil || app.Resources.Base != srv.URL+Base {
		t.Fatalf("wadl: %d %v %+v", resp.StatusCode, err, app)
	}
	var names []string
	for _, p := range app.Resources.Params {
		names = append(names, p.Name)
	}
	for _, p := range spec.Params {
		if !slices.Contains(names, p.Name) {
			t.Errorf("wadl lacks %s", p.Name)
		}
	}
	if !slices.ContainsFunc(app.Resources.Media, func(m struct {
		Type string `xml:"mediaType,attr"`
	}) bool {
		return m.Type == MediaType
	}) {
		t.Errorf("wadl does not name %s", MediaType)
	}
}

// FuzzQuery: whatever the query, an answer with a status and never a
// crash; a 200 is miniSEED.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"sta=HL01&start=2026-12-01T03:00:00&end=2026-12-01T03:00:10",
		"net=S?&cha=BN*,MX?&start=2026-12-01&end=2026-12-01T03:01:00&minimumlength=3.5&longestonly=true",
		"start=2026-12-01T03:00:00Z&nodata=404&quality=Q",
		"start=1900-01-01&end=2599-12-31",
		"sta=" + strings.Repeat("*?", 40) + "&start=2026-12-01",
		"minimumlength=NaN&start=x",
	} {
		f.Add(s)
	}
	srv := newServer(f, &archive{}, Limits{MaxSpan: 2 * time.Hour, MaxWindows: 10, Concurrent: 4, WriteStall: time.Second})
	f.Fuzz(func(t *testing.T, query string) {
		u := srv.URL + Base + "query?" + query
		if _, err := url.Parse(u); err != nil {
			return
		}
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return
		}
		resp, body := do(t, req)
		checkAnswer(t, query, resp, body)
	})
}

// TestSpansStayInTheArchive: a span of a day file is read inside the SDS
// root only, from a record's start, and no further than the file. A span
// that leaves the root, does not start on a record or names no file is not
// read at all: the answer comes over the stream as if no span had been
// offered (the path not told), and answers for a minute after do not ask
// for spans. One longer than its file cuts the answer; a good one is sent
// as it lies there.
func TestSpansStayInTheArchive(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sds := filepath.Join(root, "sds")
	if err := os.MkdirAll(filepath.Join(sds, "2026"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 1024)
	n, err := mseed.PackInts(rec, mseed.Header{Network: "SH", Station: "HL01", Location: "00", Channel: "BNZ",
		Start: t0, SampleRate: 50, Encoding: mseed.Steim2}, []int32{1, 2, 3, 4, 5})
	if err != nil || n != 5 {
		t.Fatal(n, err)
	}
	day := append(slices.Clone(rec), rec...)
	if err := os.WriteFile(filepath.Join(sds, "2026", "day"), day, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("not miniSEED"), 0o644); err != nil {
		t.Fatal(err)
	}
	q := "/fdsnws/dataselect/1/query?net=SH&sta=HL01&cha=BNZ&start=2026-12-01T03:00:00&end=2026-12-01T03:00:01"
	get := func(t *testing.T, url string) (*http.Response, []byte, error) {
		resp, err := http.Get(url)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	_, streamed, err := get(t, newServer(t, &archive{}, DefaultLimits).URL+q)
	if err != nil || len(streamed) == 0 {
		t.Fatalf("the stream's answer: %d bytes, %v", len(streamed), err)
	}
	for _, c := range []struct {
		name string
		sds  string
		span *waveformv1.FileSpan
		last bool   // the span comes after the records
		body []byte // nil: the answer is cut
	}{
		{"outside the root", sds, &waveformv1.FileSpan{Path: "../secret", Length: 1024}, false, streamed},
		{"absolute", sds, &waveformv1.FileSpan{Path: filepath.Join(root, "secret"), Length: 1024}, false, streamed},
		{"not at a record", sds, &waveformv1.FileSpan{Path: "2026/day", Offset: 100, Length: 1024}, false, streamed},
		{"not whole records", sds, &waveformv1.FileSpan{Path: "2026/day", Length: 1000}, false, streamed},
		{"no such file", sds, &waveformv1.FileSpan{Path: "2026/other", Length: 1024}, false, streamed},
		{"not the archive's root", filepath.Join(root, "missing"), &waveformv1.FileSpan{Path: "2026/day", Length: 1024}, false, streamed},
		// The records sent before the span are not sent again.
		{"no such file, after records", sds, &waveformv1.FileSpan{Path: "2026/other", Length: 1024}, true, streamed},
		{"past the file", sds, &waveformv1.FileSpan{Path: "2026/day", Length: 3 * 1024}, false, nil}, // or no status at all
		{"whole", sds, &waveformv1.FileSpan{Path: "2026/day", Length: 2 * 1024}, false, append(slices.Clone(day), streamed...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &archive{sds: c.sds, span: c.span, spanLast: c.last}
			srv := newServer(t, a, DefaultLimits)
			resp, body, err := get(t, srv.URL+q)
			switch {
			case c.body == nil && err == nil && resp.StatusCode == 200:
				t.Fatalf("answer read whole (%d bytes), want it cut", len(body))
			case c.body == nil:
				return
			case err != nil:
				t.Fatal(err)
			case resp.StatusCode != 200 || !bytes.Equal(body, c.body):
				t.Fatalf("status %d, %d bytes; want 200 and %d bytes", resp.StatusCode, len(body), len(c.body))
			}
			if !bytes.Equal(c.body, streamed) {
				return
			}
			// Fallen back: the next answer does not ask for spans.
			asked := a.spanAsks.Load()
			if _, again, err := get(t, srv.URL+q); err != nil || !bytes.Equal(again, streamed) || a.spanAsks.Load() != asked {
				t.Errorf("the next answer: %d bytes, %v; spans asked %d times, %d before", len(again), err, a.spanAsks.Load(), asked)
			}
		})
	}
}

// FuzzQueryPost: the POST form of a query — parameter lines, then
// selection lines — answers miniSEED, no data, or a client error, whatever
// the body.
func FuzzQueryPost(f *testing.F) {
	for _, s := range []string{
		"quality=B\nminimumlength=0.0\nlongestonly=false\nSH HL01 -- BN? 2026-12-01T03:00:00 2026-12-01T03:00:10\n",
		"SH HL01 * * 2026-12-01T03:00:00 2026-12-01T03:00:10\nSH HL0? -- MX* 2026-12-01T03:00:00 2026-12-01T03:01:00\n",
		"nodata=404\n* * * * 2026-12-01 2026-12-01T00:00:01",
		"\n\n=\nSH\n",
		"SH HL01 -- BNZ 2026-12-01T03:00:10 2026-12-01T03:00:00\n",
		strings.Repeat("SH HL01 -- BNZ 2026-12-01T03:00:00 2026-12-01T03:00:01\n", 20),
	} {
		f.Add(s)
	}
	srv := newServer(f, &archive{}, Limits{MaxSpan: 2 * time.Hour, MaxWindows: 10, Concurrent: 4, WriteStall: time.Second})
	f.Fuzz(func(t *testing.T, body string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+Base+"query", strings.NewReader(body))
		if err != nil {
			return
		}
		resp, got := do(t, req)
		checkAnswer(t, body, resp, got)
	})
}

// checkAnswer fails unless an answer to asked is miniSEED, no data, or a
// client error.
func checkAnswer(t *testing.T, asked string, resp *http.Response, body []byte) {
	t.Helper()
	switch resp.StatusCode {
	case http.StatusOK:
		if _, err := mseed.ReadAll(bytes.NewReader(body)); err != nil {
			t.Fatalf("%q: 200 but not miniSEED: %v", asked, err)
		}
	case http.StatusNoContent, http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
	default:
		t.Fatalf("%q: %d %.200s", asked, resp.StatusCode, body)
	}
}

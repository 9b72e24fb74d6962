package fdsnavailability

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
)

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// index stands in for svc-waveform's Availability (TestFDSNAvailability in
// svc-dataapi asks the real one): every station it is asked for holds
// each channel asked for over [t0, t0+60 s) and [t0+90 s, t0+120 s), cut
// to the window.
type index struct {
	waveformv1.WaveformServiceClient
}

func (index) Availability(_ context.Context, req *waveformv1.AvailabilityRequest, _ ...grpc.CallOption) (*waveformv1.AvailabilityResponse, error) {
	resp := &waveformv1.AvailabilityResponse{}
	from := t0.UnixMilli()
	for _, id := range req.GetStationIds() {
		for _, cha := range req.GetChannels() {
			ca := &waveformv1.ChannelAvailability{StationId: id, NetworkCode: "SH", StationCode: strings.ToUpper(strings.ReplaceAll(id, "-", "")),
				LocationCode: "00", ChannelCode: cha, SampleRateHz: 50}
			for _, s := range [][2]int64{{from, from + 60_000}, {from + 90_000, from + 120_000}} {
				lo, hi := max(s[0], req.GetStartMs()), min(s[1], req.GetEndMs())
				if lo < hi {
					ca.Spans = append(ca.Spans, &waveformv1.TimeSpan{StartMs: lo, EndMs: hi})
				}
			}
			if len(ca.Spans) > 0 {
				resp.Channels = append(resp.Channels, ca)
			}
		}
	}
	return resp, nil
}

// FuzzQuery: no query to either method crashes the service or gets an
// answer other than the specification's; a 200 in JSON parses as its
// datasources, a text one has as many fields on each line as its header.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"query?", "extent?format=json", "query?net=SH&cha=BN?&mergegaps=30&show=latestupdate",
		"query?merge=quality,samplerate&format=geocsv", "extent?orderby=latestupdate_desc&limit=1", "query?format=request&start=2026-12-01T03:00:30",
		"query?quality=R", "query?merge=overlap,bogus", "extent?mergegaps=1", "query?start=2026-12-01T04:00:00&end=2026-12-01T03:00:00",
		"query?sta=" + strings.Repeat("*?", 40), "query?limit=0", "query?nodata=404&net=XX"} {
		f.Add(s)
	}
	key := hex.EncodeToString(make([]byte, 32))
	set, err := registry.NewSet([]*registry.Station{
		{ID: "hl-01", Lat: 23.97, Lon: 121.6, KeyID: 1, KeyHex: key, SEED: seedcode.Codes{Network: "SH", Station: "HL01", Location: "00"}},
		{ID: "tp-02", Lat: 25.03, Lon: 121.56, KeyID: 1, KeyHex: key, SEED: seedcode.Codes{Network: "SH", Station: "TP02", Location: "00"}},
	})
	if err != nil {
		f.Fatal(err)
	}
	h := New(func() *registry.Set { return set }, index{}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.now = func() time.Time { return t0.Add(time.Hour) }
	mux := http.NewServeMux()
	h.Register(mux)
	f.Fuzz(func(t *testing.T, path string) {
		method, raw, ok := strings.Cut(path, "?")
		if !ok || (method != "query" && method != "extent") {
			return
		}
		if _, err := url.ParseQuery(raw); err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodGet, Base+method, nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusNoContent, http.StatusNotFound, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return
		default:
			t.Fatalf("%q: status %d %s", path, rec.Code, rec.Body)
		}
		body := rec.Body.Bytes()
		switch ct := rec.Header().Get("Content-Type"); {
		case ct == "application/json":
			var v struct {
				Version     float64           `json:"version"`
				Datasources []json.RawMessage `json:"datasources"`
			}
			if err := json.Unmarshal(body, &v); err != nil || v.Version != 1 || len(v.Datasources) == 0 {
				t.Fatalf("%q: JSON %s: %v", path, body, err)
			}
		case strings.HasPrefix(ct, "text/plain") && !bytes.HasPrefix(body, []byte("#")): // request
			for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
				if len(strings.Fields(l)) != 6 {
					t.Fatalf("%q: request line %q", path, l)
				}
			}
		default:
			lines := strings.Split(strings.TrimSpace(string(body)), "\n")
			sep := " "
			if strings.HasPrefix(ct, "text/csv") {
				sep, lines = "|", lines[4:]
			}
			n := len(strings.Split(strings.TrimPrefix(lines[0], "#"), sep))
			for _, l := range lines[1:] {
				if len(strings.Split(l, sep)) != n || bytes.Contains([]byte(l), []byte("\x00")) {
					t.Fatalf("%q: line %q, header %q", path, l, lines[0])
				}
			}
		}
	})
}

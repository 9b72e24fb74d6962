package fdsnevent

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"shindo.dev/lib/metadb"
)

// pages is a store of reports served a page at a time, as the metadata
// database does (the filters are the database's to apply, and their SQL
// is tested with it; here every report comes back whatever is asked).
type pages []metadb.Report

func (p pages) ListReports(_ context.Context, f metadb.ReportFilter) ([]metadb.Report, error) {
	if f.Offset >= len(p) {
		return nil, nil
	}
	return p[f.Offset:min(f.Offset+f.Limit, len(p))], nil
}

func (p pages) GetReport(_ context.Context, id string) (*metadb.Report, error) {
	for i := range p {
		if p[i].ID == id {
			return &p[i], nil
		}
	}
	return nil, metadb.ErrNotFound
}

// ReportStations gives the first report two stations' peaks, one of a
// station no longer registered (no codes).
func (p pages) ReportStations(_ context.Context, ids []string) (map[string][]metadb.StationPeak, error) {
	out := map[string][]metadb.StationPeak{}
	for _, id := range ids {
		if len(p) > 0 && id == p[0].ID {
			out[id] = []metadb.StationPeak{
				{StationID: "HUA-01", PGAGal: 412.5, PGVCms: 38.25, Intensity: 5.71, Network: "SH", Station: "HUA01", Location: "00"},
				{StationID: "gone", PGAGal: 1, PGVCms: 0.1, Intensity: 0.6},
			}
		}
	}
	return out, nil
}

// fuzzReports are reports with what a QuakeML or text writer must escape:
// markup and separators in the place name, a report posted by hand and
// one of the trigger, at the antimeridian and the poles.
func fuzzReports() pages {
	at := time.Date(2024, 4, 2, 23, 58, 9, 0, time.UTC)
	return pages{
		{ID: "113000-2024-0403-075809-18", TimeMs: at.UnixMilli(), Lat: 23.77, Lon: 121.67, DepthKm: 15.5, Magnitude: 7.2,
			Location: "花蓮縣政府南南東方 25.1 公里 (位於花蓮縣近海)", MaxLevel: 7, SourceDetectionID: "1712102289000-18", UpdatedAt: at},
		{ID: "posted-1", TimeMs: at.Add(time.Hour).UnixMilli(), Lat: -90, Lon: 180, DepthKm: 0, Magnitude: 3.1,
			Location: `<a href="x">&amp;</a> | "quoted" 'single'` + "\x00\ttab", MaxLevel: 1, UpdatedAt: at.Add(time.Hour)},
		{ID: "posted-2", TimeMs: at.Add(-time.Hour).UnixMilli(), Lat: 90, Lon: -180, DepthKm: 700, Magnitude: -1,
			Location: "", MaxLevel: 0, UpdatedAt: at},
	}
}

// FuzzQuery: no query crashes the service or gets an answer other than
// the specification's; what it answers 200 is well-formed XML, or text of
// a header line and one line per event of as many fields.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "format=text", "minmag=4&orderby=magnitude", "eventid=posted-1",
		"lat=23.7&lon=121.6&maxradius=1", "minlon=170&maxlon=-170", "starttime=2024-04-01&endtime=2024-04-03T00:00:00",
		"limit=1&offset=2", "updatedafter=2024-04-02T23:59:00", "magtype=Mi&format=text", "nodata=404&minmag=11",
		"catalog=other", "orderby=bogus", "limit=0", "starttime=%00", "mindepth=-10&maxdepth=1000", "includearrivals=true",
		"eventid=113000-2024-0403-075809-18&includearrivals=1"} {
		f.Add(s)
	}
	h := New(fuzzReports(), time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.now = func() time.Time { return time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) }
	mux := http.NewServeMux()
	h.Register(mux)
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.ParseQuery(raw); err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodGet, Base+"query", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusNoContent, http.StatusNotFound, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return
		default:
			t.Fatalf("%q: status %d", raw, rec.Code)
		}
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[0], "#EventID|") {
				t.Fatalf("%q: text answer %q", raw, body)
			}
			fields := strings.Count(lines[0], "|")
			for _, l := range lines[1:] {
				if n := strings.Count(l, "|"); n != fields {
					t.Fatalf("%q: a line of %d separators, the header has %d: %q", raw, n, fields, l)
				}
			}
			return
		}
		d := xml.NewDecoder(bytes.NewReader(body))
		events := 0
		for {
			tok, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%q: not well-formed XML: %v\n%s", raw, err, body)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "event" {
				events++
			}
		}
		if events == 0 {
			t.Fatalf("%q: 200 with no event", raw)
		}
	})
}

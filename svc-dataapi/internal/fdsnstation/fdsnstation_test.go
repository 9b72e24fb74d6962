package fdsnstation

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
)

var (
	created = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	retired = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
)

// testSet: three stations of network SH in Taiwan (one retired, one with
// its own count size and elevation), one of network XY in Japan.
func testSet(t testing.TB) *registry.Set {
	t.Helper()
	key := hex.EncodeToString(make([]byte, 32))
	no := false
	list := []*registry.Station{
		{ID: "tw-hl-01", Name: "Hualien | City", Lat: 23.97, Lon: 121.6, KeyID: 1, KeyHex: key, Created: created,
			SEED: seedcode.Codes{Network: "SH", Station: "HL01", Location: "00"}, Elevation: 16, ScaleGal: 0.002},
		{ID: "TP001", Name: "Taipei", Lat: 25.03, Lon: 121.56, KeyID: 1, KeyHex: key, Created: created.Add(24 * time.Hour),
			SEED: seedcode.Codes{Network: "SH", Station: "TP001", Location: "00"}},
		{ID: "old", Lat: 22.6, Lon: 120.3, KeyID: 1, KeyHex: key, Created: created, Retired: retired, Active: &no,
			SEED: seedcode.Codes{Network: "SH", Station: "OLD", Location: "00"}},
		{ID: "jp1", Lat: 35.68, Lon: 139.69, KeyID: 1, KeyHex: key, Created: created,
			SEED: seedcode.Codes{Network: "XY", Station: "TKY", Location: ""}},
	}
	set, err := registry.NewSet(list)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newServer(t testing.TB) *httptest.Server {
	set := testSet(t)
	h := New(func() *registry.Set { return set }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t testing.TB, srv *httptest.Server, path string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// parsed is what a reader of the document sees.
type parsed struct {
	Networks []struct {
		Code     string `xml:"code,attr"`
		Selected int    `xml:"SelectedNumberStations"`
		Total    int    `xml:"TotalNumberStations"`
		Stations []struct {
			Code      string  `xml:"code,attr"`
			Alternate string  `xml:"alternateCode,attr"`
			Start     string  `xml:"startDate,attr"`
			End       string  `xml:"endDate,attr"`
			Elevation float64 `xml:"Elevation"`
			Channels  []struct {
				Code        string  `xml:"code,attr"`
				Location    string  `xml:"locationCode,attr"`
				Rate        float64 `xml:"SampleRate"`
				Dip         float64 `xml:"Dip"`
				Sensitivity *struct {
					Value float64 `xml:"Value"`
					Input string  `xml:"InputUnits>Name"`
				} `xml:"Response>InstrumentSensitivity"`
				Stages []struct {
					Number     int      `xml:"number,attr"`
					Input      string   `xml:"PolesZeros>InputUnits>Name"`
					Output     string   `xml:"PolesZeros>OutputUnits>Name"`
					Poles      []string `xml:"PolesZeros>Pole"`
					Zeros      []string `xml:"PolesZeros>Zero"`
					Decimation *float64 `xml:"Decimation>InputSampleRate"`
					Gain       float64  `xml:"StageGain>Value"`
				} `xml:"Response>Stage"`
			} `xml:"Channel"`
		} `xml:"Station"`
	} `xml:"Network"`
}

func query(t testing.TB, srv *httptest.Server, params string) (int, parsed, []byte) {
	t.Helper()
	code, _, body := get(t, srv, Base+"query?"+params)
	var doc parsed
	if code == http.StatusOK && !strings.Contains(params, "format=text") {
		if err := xml.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v\n%s", params, err, body)
		}
	}
	return code, doc, body
}

// codes lists NET.STA (and .LOC.CHA at channel level) of a document.
func codes(doc parsed) []string {
	var out []string
	for _, n := range doc.Networks {
		for _, s := range n.Stations {
			if len(s.Channels) == 0 {
				out = append(out, n.Code+"."+s.Code)
			}
			for _, c := range s.Channels {
				out = append(out, n.Code+"."+s.Code+"."+c.Location+"."+c.Code)
			}
		}
	}
	return out
}

func TestSelection(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		params string
		want   string // codes, comma-separated; "" for no data
	}{
		{"", "SH.HL01,SH.OLD,SH.TP001,XY.TKY"},
		{"net=SH&sta=HL*,T?001", "SH.HL01,SH.TP001"},
		{"network=xy", "XY.TKY"},
		{"sta=HL01&cha=BN?&level=channel", "SH.HL01.00.BNZ,SH.HL01.00.BNN,SH.HL01.00.BNE"},
		{"sta=TKY&loc=--&cha=MXI&level=channel", "XY.TKY..MXI"},
		{"sta=TKY&loc=00", ""},
		{"cha=XXX", ""},
		{"minlat=23&maxlat=26&minlon=121&maxlon=122", "SH.HL01,SH.TP001"},
		{"lat=25&lon=121.5&maxradius=0.5", "SH.TP001"},
		{"latitude=25&longitude=121.5&minradius=5", "XY.TKY"},
		{"starttime=2026-07-01", "SH.HL01,SH.TP001,XY.TKY"},
		{"endtime=2026-03-01T12:00:00", "SH.HL01,SH.OLD,XY.TKY"},
		{"startafter=2026-03-01T08:00:00", "SH.TP001"},
		{"startbefore=2026-03-01T08:00:01&endbefore=2026-07-01", "SH.OLD"},
		{"endafter=2026-07-01&net=SH", "SH.HL01,SH.TP001"},
	} {
		code, doc, body := query(t, srv, tc.params)
		if tc.want == "" {
			if code != http.StatusNoContent || len(body) != 0 {
				t.Errorf("%q: %d %q, want 204 and no body", tc.params, code, body)
			}
			continue
		}
		if code != http.StatusOK {
			t.Errorf("%q: %d %s", tc.params, code, body)
			continue
		}
		if got := strings.Join(codes(doc), ","); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.params, got, tc.want)
		}
	}
	if code, _, _ := query(t, srv, "cha=XXX&nodata=404"); code != http.StatusNotFound {
		t.Errorf("nodata=404: %d", code)
	}
}

// TestStationXMLContent: what the registry says is what the document
// says — codes, dates, elevation, counts per m/s² from the count size.
func TestStationXMLContent(t *testing.T) {
	srv := newServer(t)
	_, doc, _ := query(t, srv, "net=SH&level=response")
	if len(doc.Networks) != 1 || doc.Networks[0].Total != 3 || doc.Networks[0].Selected != 3 {
		t.Fatalf("networks %+v", doc.Networks)
	}
	for _, s := range doc.Networks[0].Stations {
		if len(s.Channels) != len(seedcode.Channels) {
			t.Fatalf("%s: %d channels", s.Code, len(s.Channels))
		}
		switch s.Code {
		case "HL01":
			if s.Alternate != "tw-hl-01" || s.Start != "2026-03-01T08:00:00.000000Z" || s.End != "" || s.Elevation != 16 {
				t.Errorf("HL01: %+v", s)
			}
			bnz := s.Channels[0]
			if bnz.Code != "BNZ" || bnz.Rate != 50 || bnz.Dip != -90 || bnz.Sensitivity == nil ||
				bnz.Sensitivity.Value != 50000 || bnz.Sensitivity.Input != "m/s**2" {
				t.Errorf("HL01.BNZ: %+v %+v", bnz, bnz.Sensitivity)
			}
			// One flat stage whose gain is the sensitivity, so that
			// readers which work from the stages (ObsPy) find it; a
			// digital output's decimation at the channel's rate.
			for _, c := range s.Channels {
				if c.Sensitivity == nil {
					t.Errorf("HL01.%s: no sensitivity", c.Code)
					continue
				}
				want := 0.0 // no decimation
				if c.Sensitivity.Input == "m/s**2" {
					want = c.Rate
				}
				switch {
				case len(c.Stages) != 1:
					t.Errorf("HL01.%s: %d stages, want 1", c.Code, len(c.Stages))
				case c.Stages[0].Number != 1 || c.Stages[0].Gain != c.Sensitivity.Value || c.Stages[0].Input != c.Sensitivity.Input ||
					len(c.Stages[0].Poles)+len(c.Stages[0].Zeros) != 0 || (c.Stages[0].Decimation == nil) != (want == 0) ||
					(want != 0 && *c.Stages[0].Decimation != want):
					t.Errorf("HL01.%s: stage %+v, sensitivity %+v", c.Code, c.Stages[0], c.Sensitivity)
				}
				if c.Sensitivity.Input == "m/s**2" && c.Stages[0].Output != "count" {
					t.Errorf("HL01.%s: stage output %q, want count", c.Code, c.Stages[0].Output)
				}
			}
		case "TP001":
			if s.Alternate != "" || s.Channels[1].Sensitivity.Value != 100000 {
				t.Errorf("TP001 (default scale 0.001 gal): %+v", s)
			}
		case "OLD":
			if s.End != "2026-06-01T00:00:00.000000Z" {
				t.Errorf("OLD: end %q", s.End)
			}
		}
	}
	_, doc, _ = query(t, srv, "net=SH&level=channel")
	if c := doc.Networks[0].Stations[0].Channels[0]; c.Sensitivity != nil {
		t.Errorf("level=channel carries a response: %+v", c.Sensitivity)
	}
	_, doc, _ = query(t, srv, "level=network")
	if len(doc.Networks) != 2 || len(doc.Networks[0].Stations) != 0 {
		t.Errorf("level=network: %+v", doc.Networks)
	}
}

// TestStationXMLValidates: every level's document is valid against the
// FDSN StationXML 1.2 schema (testdata/fdsn-station.xsd), by xmllint.
func TestStationXMLValidates(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatal("xmllint not found: deploy/dev/system-packages installs it (Debian's libxml2-utils)")
	}
	srv := newServer(t)
	for _, level := range []string{"network", "station", "channel", "response"} {
		code, _, body := query(t, srv, "level="+level)
		if code != http.StatusOK {
			t.Fatalf("level=%s: %d", level, code)
		}
		cmd := exec.Command(xmllint, "--noout", "--schema", "testdata/fdsn-station.xsd", "-")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("level=%s does not validate: %v\n%s", level, err, out)
		}
	}
}

func TestText(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		params, header string
		lines          int
		line           string
	}{
		{"level=network&format=text", "#Network|Description|StartTime|EndTime|TotalStations", 2,
			"SH|" + DefaultDescription + "|2026-03-01T08:00:00.000000||3"},
		{"sta=HL01&format=text", "#Network|Station|Latitude|Longitude|Elevation|SiteName|StartTime|EndTime", 1,
			"SH|HL01|23.97|121.6|16|Hualien   City|2026-03-01T08:00:00.000000|"},
		{"sta=HL01&cha=BNE&level=channel&format=text",
			"#Network|Station|Location|Channel|Latitude|Longitude|Elevation|Depth|Azimuth|Dip|SensorDescription|Scale|ScaleFreq|ScaleUnits|SampleRate|StartTime|EndTime", 1,
			"SH|HL01|00|BNE|23.97|121.6|16|0|90|0|MEMS accelerometer|50000|1|m/s**2|50|2026-03-01T08:00:00.000000|"},
	} {
		code, _, body := query(t, srv, tc.params)
		lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		if code != http.StatusOK || lines[0] != tc.header || len(lines) != 1+tc.lines || lines[1] != tc.line {
			t.Errorf("%q: %d\n%s\nwant header %q and %d lines, the first %q", tc.params, code, body, tc.header, tc.lines, tc.line)
		}
	}
}

// TestErrors: what a client gets wrong is a 400 FDSN error document that
// says what; POST selections work like a query's.
func TestErrors(t *testing.T) {
	srv := newServer(t)
	for params, want := range map[string]string{
		"level=response&format=text": "no response level",
		"stations=HL01":              `unknown parameter "stations"`,
		"minlat=91":                  "outside",
		"starttime=yesterday":        "not a time",
		"sta=HL01&sta=TP001":         "more than once",
		"includeavailability=true":   "not supported",
		"updatedafter=2026-01-01":    "not supported",
		"cha=BNZZ":                   "longer than 3",
	} {
		code, h, body := get(t, srv, Base+"query?"+params)
		if code != http.StatusBadRequest || !strings.HasPrefix(string(body), "Error 400: Bad Request") ||
			!strings.Contains(string(body), want) || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
			t.Errorf("%q: %d %s, want 400 saying %q", params, code, body, want)
		}
	}
	post := func(body string) (int, []byte) {
		resp, err := http.Post(srv.URL+Base+"query", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := post("level=channel\nSH HL01 00 BNZ 2026-01-01T00:00:00 *\nXY TKY -- MXA * *\n")
	var doc parsed
	if err := xml.Unmarshal(body, &doc); code != http.StatusOK || err != nil || strings.Join(codes(doc), ",") != "SH.HL01.00.BNZ,XY.TKY..MXA" {
		t.Errorf("POST: %d %v %v", code, err, codes(doc))
	}
	if code, body := post("not a selection\n"); code != http.StatusBadRequest {
		t.Errorf("junk POST: %d %s", code, body)
	}
}

func TestVersionAndWADL(t *testing.T) {
	srv := newServer(t)
	if code, _, body := get(t, srv, Base+"version"); code != http.StatusOK || string(body) != Version {
		t.Errorf("version: %d %q", code, body)
	}
	code, _, body := get(t, srv, Base+"application.wadl")
	var app struct {
		XMLName   xml.Name
		Resources struct {
			Base     string `xml:"base,attr"`
			Resource []struct {
				Path   string `xml:"path,attr"`
				Params []struct {
					Name string `xml:"name,attr"`
					Type string `xml:"type,attr"`
				} `xml:"method>request>param"`
			} `xml:"resource"`
		} `xml:"resources"`
	}
	if err := xml.Unmarshal(body, &app); code != http.StatusOK || err != nil {
		t.Fatalf("wadl: %d %v", code, err)
	}
	if app.XMLName.Space != "http://wadl.dev.java.net/2009/02" || app.Resources.Base != srv.URL+Base || app.Resources.Resource[0].Path != "query" {
		t.Fatalf("wadl: %+v", app)
	}
	types := map[string]string{}
	for _, p := range app.Resources.Resource[0].Params {
		types[p.Name] = p.Type
	}
	for _, p := range spec.Params {
		if _, ok := types[p.Name]; ok == p.Unlisted {
			t.Errorf("wadl lists %s: %v, want %v", p.Name, ok, !p.Unlisted)
		}
	}
	// ObsPy's FDSN client reads the WADL before its first query and warns
	// of any of its default parameters the service lacks
	// (obspy/clients/fdsn/header.py DEFAULT_STATION_PARAMETERS,
	// wadl_parser.py, which takes the params of the GET method whose id is
	// "query" under a base that names the service), and refuses to send
	// an optional one (OPTIONAL_STATION_PARAMETERS) it does not list.
	for _, name := range strings.Fields(`starttime endtime network station location channel minlatitude maxlatitude
		minlongitude maxlongitude level startbefore startafter endbefore endafter latitude longitude minradius maxradius
		includerestricted format`) {
		if _, ok := types[name]; !ok {
			t.Errorf("wadl lacks %s, which ObsPy looks for", name)
		}
	}
	// Those taken at their defaults only are not listed: ObsPy's
	// MassDownloader asks for matchtimeseries=true where it is
	// (mass_downloader/download_helpers.py), which would be refused.
	for _, name := range []string{"includeavailability", "matchtimeseries", "updatedafter"} {
		if _, ok := types[name]; ok {
			t.Errorf("wadl lists %s, which the service takes at its default only", name)
		}
	}
	if !strings.Contains(app.Resources.Base, "station") || !strings.Contains(string(body), `<method name="GET" id="query">`) {
		t.Errorf("wadl not as ObsPy finds the query's parameters:\n%s", body)
	}
	if types["starttime"] != "xs:dateTime" || types["minlatitude"] != "xs:double" {
		t.Errorf("wadl types %v", types)
	}
}

// FuzzQuery: whatever the query string, the service answers 200, 204 or
// 400 — never a panic or another status.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "net=SH&sta=*&level=response", "lat=25&lon=121&maxradius=1", "format=text&level=channel",
		"minlon=170&maxlon=-170", "starttime=2026-01-01&endtime=2025-01-01", "cha=B?%2A&loc=--,00", "level=%00"} {
		f.Add(s)
	}
	mux := fuzzMux(f)
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.ParseQuery(raw); err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodGet, Base+"query", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusNoContent, http.StatusBadRequest:
		default:
			t.Fatalf("%q: status %d", raw, rec.Code)
		}
	})
}

// BenchmarkQuery1000 answers a query for every channel of 1,000 stations
// at level=response (StationXML) and level=channel (text); the baseline,
// in the same run, is the registry's own stations as JSON, what the REST
// route /v1/stations costs before its gateway.
func BenchmarkQuery1000(b *testing.B) {
	key := hex.EncodeToString(make([]byte, 32))
	list := make([]*registry.Station, 1000)
	for i := range list {
		list[i] = &registry.Station{ID: fmt.Sprintf("SIM%05d", i), Name: fmt.Sprintf("station %d", i), KeyID: 1, KeyHex: key,
			Lat: 22 + float64(i%300)/100, Lon: 120 + float64(i/300)/2, Elevation: float64(i % 900), Created: created}
	}
	set, err := registry.NewSet(list)
	if err != nil {
		b.Fatal(err)
	}
	h := New(func() *registry.Set { return set }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	h.Register(mux)
	for _, bc := range []struct{ name, query string }{
		{"response-xml", "level=response"}, {"channel-text", "level=channel&format=text"}, {"station-xml", "level=station"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Base+"query?"+bc.query, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
				n = rec.Body.Len()
			}
			b.SetBytes(int64(n))
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/query")
		})
	}
	b.Run("baseline-registry-json", func(b *testing.B) {
		var n int
		for b.Loop() {
			out, err := json.Marshal(set.All())
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.SetBytes(int64(n))
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/query")
	})
}

// FuzzQueryPost: the POST form of a query — parameter lines, then
// selection lines — answers a document, no data, or a client error,
// whatever the body.
func FuzzQueryPost(f *testing.F) {
	for _, s := range []string{
		"level=channel\nformat=text\nSH * -- BN? 2026-01-01T00:00:00 *\n",
		"level=response\nSH HL0? * * * *\n",
		"* * * * 2026-01-01 2025-01-01\n",
		"minlat=91\n* * * * * *\n",
		"\n=\n\nSH\n",
	} {
		f.Add(s)
	}
	mux := fuzzMux(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, Base+"query", strings.NewReader(body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusNoContent, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%q: status %d", body, rec.Code)
		}
	})
}

// fuzzMux serves the handler over testSet's stations.
func fuzzMux(f *testing.F) *http.ServeMux {
	set := testSet(f)
	h := New(func() *registry.Set { return set }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	h.Register(mux)
	return mux
}

package e2e

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prepareSeisplotjs installs seisplotjs — seismology's browser toolkit, the
// FDSN client e2e tests the services with — and what it needs under node
// (testdata/seisplotjs: the versions its lock pins) in a scratch
// directory, and returns it.
func prepareSeisplotjs() (string, error) {
	dir, err := os.MkdirTemp("", "shindo-seisplotjs-")
	if err != nil {
		return "", err
	}
	for _, f := range []string{"package.json", "package-lock.json", "station.mjs", "dataselect.mjs", "event.mjs", "seedlink.mjs", "availability.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "seisplotjs", f))
		if err != nil {
			return dir, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return dir, err
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	return dir, nil
}

// seisplotjsStations is what testdata/seisplotjs/station.mjs prints: the
// metadata seisplotjs parsed.
type seisplotjsStations struct {
	Version  string
	Networks []struct {
		Code     string
		Start    string
		Stations []struct {
			Code                           string
			Start                          string
			End                            *string
			Latitude, Longitude, Elevation float64
			Channels                       []struct {
				Location, Code, SourceID, Start string
				SampleRate, Azimuth, Dip        float64
				Sensitivity                     float64
				InputUnits, OutputUnits         string
				Stages                          []seisplotjsStage
			}
		}
	}
}

// seisplotjsStage is a response stage as seisplotjs parsed it.
type seisplotjsStage struct {
	Type                    string
	InputUnits, OutputUnits string
	Poles, Zeros            int
	DecimationRate          *float64
	Gain                    float64
}

// archivedChannels are the channels each station's data is archived under
// (seismo/seedcode.Channels), with the unit of their sensitivity's input.
var archivedChannels = []struct{ code, units string }{
	{"BNZ", "m/s**2"}, {"BNN", "m/s**2"}, {"BNE", "m/s**2"}, {"MXI", "1"}, {"MXA", "cm/s**2"}, {"MXV", "cm/s"},
}

// checkSeisplotjsStations reads the network's station metadata through an
// edge with seisplotjs's fdsnws-station client and StationXML parser, run
// by node, and checks it parsed what the data API's registry holds: every
// station under its SEED codes, its place and elevation, each archived
// channel with its rate and orientation, and the sensitivity its count
// size gives (counts per m/s² = 100 / gal per count).
func checkSeisplotjsStations(t *testing.T, d *dev, dir, edge string) {
	t.Helper()
	base := d.endpoints.get(t, edge, "edge", "http")
	var want struct {
		Stations []struct {
			Net        string  `json:"network_code"`
			Sta        string  `json:"station_code"`
			Loc        string  `json:"location_code"`
			Lat        float64 `json:"lat"`
			Lon        float64 `json:"lon"`
			Elevation  float64 `json:"elevation_m"`
			ScaleGal   float64 `json:"scale_gal"`
			Active     bool    `json:"active"`
			Identifier string  `json:"id"`
		} `json:"stations"`
	}
	code, body := httpGet(t, base+"/v1/stations")
	if code != 200 || json.Unmarshal([]byte(body), &want) != nil || len(want.Stations) == 0 {
		t.Fatalf("/v1/stations: %d %s", code, body)
	}
	// seisplotjs refuses to ask for everything: the networks, then.
	var nets []string
	for _, st := range want.Stations {
		if !slices.Contains(nets, st.Net) {
			nets = append(nets, st.Net)
		}
	}
	out := runNode(t, dir, "seisplotjs through "+edge, "station.mjs", base, strings.Join(nets, ","), "*")
	var got seisplotjsStations
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("seisplotjs printed %.300q…: %v", out, err)
	}
	if got.Version != "1.1.0" {
		t.Errorf("seisplotjs read version %q", got.Version)
	}
	type parsed = struct {
		lat, lon, elev float64
		start          string
		channels       []string
		sens           float64
	}
	read := map[string]parsed{}
	for _, n := range got.Networks {
		for _, s := range n.Stations {
			p := parsed{lat: s.Latitude, lon: s.Longitude, elev: s.Elevation, start: s.Start}
			for i, c := range s.Channels {
				p.channels = append(p.channels, c.Location+"."+c.Code)
				if i >= len(archivedChannels) || c.InputUnits != archivedChannels[i].units || c.Start != s.Start ||
					c.SourceID != fmt.Sprintf("FDSN:%s_%s_%s_%c_%c_%c", n.Code, s.Code, c.Location, c.Code[0], c.Code[1], c.Code[2]) {
					t.Errorf("%s.%s: channel %d read as %+v", n.Code, s.Code, i, c)
					continue
				}
				// One flat stage carrying the sensitivity (fdsnstation's
				// flatStage): what ObsPy's response removal needs.
				var rate *float64
				if c.OutputUnits == "count" {
					rate = &c.SampleRate
				}
				if len(c.Stages) != 1 || c.Stages[0] != (seisplotjsStage{"PolesZeros", c.InputUnits, c.OutputUnits, 0, 0, c.Stages[0].DecimationRate, c.Sensitivity}) ||
					(rate == nil) != (c.Stages[0].DecimationRate == nil) || (rate != nil && *rate != *c.Stages[0].DecimationRate) {
					t.Errorf("%s.%s.%s: stages read as %+v", n.Code, s.Code, c.Code, c.Stages)
				}
				switch c.Code {
				case "BNZ":
					p.sens = c.Sensitivity
					if c.SampleRate != 50 || c.Dip != -90 || c.OutputUnits != "count" {
						t.Errorf("%s.%s.BNZ read as %+v", n.Code, s.Code, c)
					}
				case "BNE":
					if c.Azimuth != 90 || c.Dip != 0 {
						t.Errorf("%s.%s.BNE read as %+v", n.Code, s.Code, c)
					}
				case "MXI":
					if c.SampleRate != 2 {
						t.Errorf("%s.%s.MXI read as %+v", n.Code, s.Code, c)
					}
				}
			}
			read[n.Code+"."+s.Code] = p
		}
	}
	for _, st := range want.Stations {
		key := st.Net + "." + st.Sta
		p, ok := read[key]
		if !ok {
			t.Errorf("seisplotjs did not read station %s (%s)", key, st.Identifier)
			continue
		}
		var chans []string
		for _, c := range archivedChannels {
			chans = append(chans, st.Loc+"."+c.code)
		}
		if p.lat != st.Lat || p.lon != st.Lon || p.elev != st.Elevation || p.start == "" || !slices.Equal(p.channels, chans) ||
			math.Abs(p.sens-100/st.ScaleGal) > 1e-6*p.sens {
			t.Errorf("%s read as %+v; the registry says %+v (channels %v, %g counts per m/s²)", key, p, st, chans, 100/st.ScaleGal)
		}
		delete(read, key)
	}
	if len(read) != 0 {
		t.Errorf("seisplotjs read stations the registry does not list: %v", strings.Join(slices.Sorted(maps.Keys(read)), " "))
	}
}

// seisplotjsWaveforms is what testdata/seisplotjs/dataselect.mjs prints:
// the seismograms seisplotjs decoded, by GET and by POST.
type seisplotjsWaveforms struct {
	Version   string
	Get, Post []struct {
		Channel, SourceID string
		Segments          []struct {
			Start int64
			Rate  float64
			Y     []float64
		}
	}
}

// seedCodes are a station's ID and SEED codes as the data API lists them.
type seedCodes struct {
	ID  string `json:"id"`
	Net string `json:"network_code"`
	Sta string `json:"station_code"`
	Loc string `json:"location_code"`
}

// stationCodes lists the stations' codes through an entrance of the data
// API; there is at least one.
func stationCodes(t testing.TB, base string) []seedCodes {
	t.Helper()
	var stations struct {
		Stations []seedCodes `json:"stations"`
	}
	if code, body := httpGet(t, base+"/v1/stations"); code != 200 || json.Unmarshal([]byte(body), &stations) != nil || len(stations.Stations) == 0 {
		t.Fatalf("/v1/stations: %d %s", code, body)
	}
	return stations.Stations
}

// checkSeisplotjsDataselect reads 20 s of a station's waveforms through an
// edge with seisplotjs's fdsnws-dataselect client and miniSEED parser, run
// by node — BNZ, BNN and BNE by GET, MXI by POST — and checks that every
// sample it decoded is the one the REST Query of the same window returns
// at the same time, and that it decoded every one of those.
func checkSeisplotjsDataselect(t *testing.T, d *dev, dir, edge string) {
	t.Helper()
	base := d.endpoints.get(t, edge, "edge", "http")
	st := stationCodes(t, base)[0]
	// A window that ended 10 s ago: every packet of it is in.
	end := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	start := end.Add(-20 * time.Second)

	// The REST Query: samples by time, per channel.
	code, body := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d&with_intensity=true", base, st.ID, start.UnixMilli(), end.UnixMilli()))
	if code != 200 {
		t.Fatalf("REST Query: %d %s", code, body)
	}
	var raw struct {
		Chunks    []map[string]json.RawMessage `json:"chunks"`
		Intensity []map[string]json.RawMessage `json:"intensity"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int64]float64{"BNZ": {}, "BNN": {}, "BNE": {}, "MXI": {}}
	for _, c := range raw.Chunks {
		var first string
		json.Unmarshal(c["first_sample_ms"], &first)
		t0, _ := strconv.ParseInt(first, 10, 64)
		for ch, field := range map[string]string{"BNZ": "ud", "BNN": "ns", "BNE": "ew"} {
			var xs []int32
			json.Unmarshal(c[field], &xs)
			for k, x := range xs {
				want[ch][t0+int64(k)*20] = float64(x)
			}
		}
	}
	for _, in := range raw.Intensity {
		var at string
		var v float64
		json.Unmarshal(in["window_end_ms"], &at)
		json.Unmarshal(in["intensity"], &v)
		ms, _ := strconv.ParseInt(at, 10, 64)
		want["MXI"][ms] = float64(float32(v))
	}
	if len(want["BNZ"]) < 900 || len(want["MXI"]) < 36 {
		t.Fatalf("the REST Query of %s holds %d BNZ samples and %d intensities of 20 s: the archive lacks data", st.ID, len(want["BNZ"]), len(want["MXI"]))
	}

	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000") }
	out := runNode(t, dir, "seisplotjs dataselect through "+edge, "dataselect.mjs", base, st.Net, st.Sta, st.Loc, iso(start), iso(end))
	var got seisplotjsWaveforms
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("seisplotjs printed %.300q…: %v", out, err)
	}
	if got.Version != "1.1.0" {
		t.Errorf("seisplotjs read dataselect version %q", got.Version)
	}
	decoded := map[string]map[int64]float64{}
	for _, s := range append(got.Get, got.Post...) {
		if want := fmt.Sprintf("FDSN:%s_%s_%s_%c_%c_%c", st.Net, st.Sta, st.Loc, s.Channel[0], s.Channel[1], s.Channel[2]); s.SourceID != want {
			t.Errorf("seisplotjs read a seismogram of %s, want %s", s.SourceID, want)
		}
		m := decoded[s.Channel]
		if m == nil {
			m = map[int64]float64{}
			decoded[s.Channel] = m
		}
		for _, g := range s.Segments {
			for k, y := range g.Y {
				at := g.Start + int64(math.Round(float64(k)*1000/g.Rate))
				if _, dup := m[at]; dup {
					t.Errorf("%s: sample at %d decoded twice", s.Channel, at)
				}
				m[at] = y
			}
		}
	}
	for _, ch := range []string{"BNZ", "BNN", "BNE", "MXI"} {
		w, g := want[ch], decoded[ch]
		bad := 0
		for at, v := range w {
			if gv, ok := g[at]; !ok || gv != v {
				bad++
				if bad <= 3 {
					t.Errorf("%s %s at %s: seisplotjs decoded %v (present %v), the REST Query says %v", st.ID, ch, time.UnixMilli(at).UTC().Format(time.TimeOnly+".000"), gv, ok, v)
				}
			}
		}
		for at := range g {
			if _, ok := w[at]; !ok {
				bad++
				if bad <= 3 {
					t.Errorf("%s %s: seisplotjs decoded a sample at %s the REST Query does not have", st.ID, ch, time.UnixMilli(at).UTC().Format(time.TimeOnly+".000"))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s %s: %d samples differ of %d", st.ID, ch, bad, len(w))
		}
	}
	t.Logf("seisplotjs through %s decoded %s %d BNZ, %d BNN, %d BNE samples (GET) and %d MXI (POST), each the REST Query's",
		edge, st.ID, len(decoded["BNZ"]), len(decoded["BNN"]), len(decoded["BNE"]), len(decoded["MXI"]))
}

// checkSeisplotjsEvents posts a report, then reads the last hour's events
// through an edge with seisplotjs's fdsnws-event client and QuakeML
// parser, run by node, and checks it parsed every report the data API
// lists for that hour — ID, origin, depth, magnitude with its type, place
// — and nothing else; no amplitudes for a posted report, and, where the
// scenario's earthquake already has its report (it may take two minutes
// more, which the run does not wait for: TestAppsDuringAnEarthquake
// checks a report's amplitudes every time), its stations' amplitudes.
func checkSeisplotjsEvents(t *testing.T, d *dev, dir, edge, adminToken string) {
	t.Helper()
	base := d.endpoints.get(t, edge, "edge", "http")
	now := time.Now()
	posted := fmt.Sprintf("fdsn-%d", now.UnixNano())
	code, body := postJSON(t, base+"/v1/reports", adminToken,
		fmt.Sprintf(`{"id":%q,"time_ms":"%d","lat":23.85,"lon":121.62,"depth_km":12.5,"magnitude":5.8,"location":"花蓮縣近海","max_level":5}`,
			posted, now.Add(-time.Minute).UnixMilli()))
	if code != 200 {
		t.Fatalf("post a report: %d %s", code, body)
	}
	start, end := now.Add(-time.Hour), now.Add(time.Minute)
	type listed struct {
		ID        string  `json:"id"`
		Time      string  `json:"time_ms"`
		Lat       float64 `json:"lat"`
		Lon       float64 `json:"lon"`
		Depth     float64 `json:"depth_km"`
		Magnitude float64 `json:"magnitude"`
		Location  string  `json:"location"`
		Detection string  `json:"source_detection_id"`
	}
	var want struct {
		Reports []listed `json:"reports"`
	}
	code, body = httpGet(t, fmt.Sprintf("%s/v1/reports?start_time_ms=%d&end_time_ms=%d&page_size=500", base, start.UnixMilli(), end.UnixMilli()))
	if code != 200 || json.Unmarshal([]byte(body), &want) != nil || len(want.Reports) == 0 {
		t.Fatalf("/v1/reports: %d %s", code, body)
	}
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000") }
	out := runNode(t, dir, "seisplotjs events through "+edge, "event.mjs", base, iso(start), iso(end))
	var got struct {
		Version string
		Quakes  []struct {
			EventID                      string
			Time                         int64
			Latitude, Longitude, DepthKm float64
			Magnitude                    float64
			MagnitudeType, Description   string
			Amplitudes                   []struct {
				Type, Unit, Codes string
				Value             float64
			}
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("seisplotjs printed %.300q…: %v", out, err)
	}
	if got.Version != "1.1.0" {
		t.Errorf("seisplotjs read event version %q", got.Version)
	}
	read := map[string]int{}
	for i, q := range got.Quakes {
		read[strings.TrimPrefix(q.EventID, "smi:shindo/event/")] = i
	}
	for _, r := range want.Reports {
		i, ok := read[strings.ReplaceAll(r.ID, ":", "~")]
		if !ok {
			t.Errorf("seisplotjs did not read report %s", r.ID)
			continue
		}
		q := got.Quakes[i]
		magType := "M"
		if r.Detection != "" {
			magType = "Mi"
		}
		if strconv.FormatInt(q.Time, 10) != r.Time || q.Latitude != r.Lat || q.Longitude != r.Lon || math.Abs(q.DepthKm-r.Depth) > 1e-9 ||
			q.Magnitude != r.Magnitude || q.MagnitudeType != magType || q.Description != r.Location {
			t.Errorf("report %s read as %+v; the data API lists %+v", r.ID, q, r)
		}
		stations := map[string]int{}
		for _, a := range q.Amplitudes {
			if a.Codes == "" || !(a.Value >= 0) || a.Unit == "" {
				t.Errorf("report %s: seisplotjs read amplitude %+v", r.ID, a)
			}
			stations[a.Codes]++
		}
		switch {
		case r.Detection == "" && len(q.Amplitudes) > 0:
			t.Errorf("posted report %s has %d amplitudes", r.ID, len(q.Amplitudes))
		case r.Detection != "" && len(stations) < 3:
			t.Errorf("report %s of detection %s: seisplotjs read amplitudes of %d stations", r.ID, r.Detection, len(stations))
		case r.Detection != "":
			t.Logf("report %s: seisplotjs read %d amplitudes of %d stations", r.ID, len(q.Amplitudes), len(stations))
		}
		delete(read, strings.ReplaceAll(r.ID, ":", "~"))
	}
	if !slices.ContainsFunc(want.Reports, func(r listed) bool { return r.Detection != "" }) {
		t.Logf("no report of the scenario's detection yet: seisplotjs read no station amplitudes")
	}
	if len(read) != 0 {
		t.Errorf("seisplotjs read events the data API does not list: %v", slices.Sorted(maps.Keys(read)))
	}
	if len(got.Quakes) != len(want.Reports) || !slices.ContainsFunc(want.Reports, func(r listed) bool { return r.ID == posted }) {
		t.Errorf("seisplotjs read %d events, the data API lists %d reports (the one posted, %s, among them?)", len(got.Quakes), len(want.Reports), posted)
	}
	t.Logf("seisplotjs through %s read %d events of the last hour, each the data API's report", edge, len(got.Quakes))
}

// checkSeisplotjsAvailability asks fdsnws-availability through an edge,
// with seisplotjs's AvailabilityQuery (JSON; its POST is broken, see
// testdata/seisplotjs/availability.mjs), what the
// archive holds of a station over the last two minutes: the stretches
// and extents it parses are those the service's own text answer gives,
// and the station's BNZ is there up to the last seconds.
func checkSeisplotjsAvailability(t *testing.T, d *dev, dir, edge string) {
	t.Helper()
	base := d.endpoints.get(t, edge, "edge", "http")
	st := stationCodes(t, base)[0]
	end := time.Now().Add(-5 * time.Second).Truncate(time.Second)
	start := end.Add(-2 * time.Minute)
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000") }
	out := runNode(t, dir, "seisplotjs availability through "+edge, "availability.mjs", base, st.Net, st.Sta, st.Loc, iso(start), iso(end))
	type window struct {
		Codes      string
		Start, End int64
	}
	var got struct {
		Version             string
		Query, Extent, Post []window
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("seisplotjs printed %.300q…: %v", out, err)
	}
	if got.Version != "1.0.0" {
		t.Errorf("seisplotjs read availability version %q", got.Version)
	}
	// The service's text answer of each request, as windows.
	text := func(method, cha string) []window {
		t.Helper()
		code, body := httpGet(t, fmt.Sprintf("%s/fdsnws/availability/1/%s?net=%s&sta=%s&cha=%s&start=%s&end=%s",
			base, method, st.Net, st.Sta, cha, iso(start), iso(end)))
		if code != 200 {
			t.Fatalf("%s %s: %d %s", method, cha, code, body)
		}
		var ws []window
		for _, l := range strings.Split(strings.TrimSpace(body), "\n")[1:] {
			f := strings.Fields(l)
			from, _ := time.Parse(time.RFC3339Nano, f[6])
			to, _ := time.Parse(time.RFC3339Nano, f[7])
			loc := f[2]
			if loc == "--" {
				loc = ""
			}
			ws = append(ws, window{strings.Join([]string{f[0], f[1], loc, f[3]}, "."), from.UnixMilli(), to.UnixMilli()})
		}
		return ws
	}
	for _, c := range []struct {
		what      string
		got, want []window
	}{
		{"query BN?", got.Query, text("query", "BN?")},
		{"extent MX?", got.Extent, text("extent", "MX?")},
	} {
		if len(c.got) == 0 || !slices.Equal(c.got, c.want) {
			t.Errorf("%s: seisplotjs parsed %v, the text answer says %v", c.what, c.got, c.want)
		}
	}
	bnz := st.Net + "." + st.Sta + "." + st.Loc + ".BNZ"
	var latest int64
	for _, w := range got.Query {
		if w.Codes == bnz {
			latest = max(latest, w.End)
		}
	}
	if latest < end.Add(-3*time.Second).UnixMilli() {
		t.Errorf("%s: no stretch reaching the last seconds before %s: %v", bnz, iso(end), got.Query)
	}
	t.Logf("seisplotjs availability through %s: %d stretches of BN?, %d extents of MX?", edge, len(got.Query), len(got.Extent))
}

// checkReportAmplitudes reads a report made of the scenario's detection
// from fdsnws-event through an edge with includearrivals=true: valid
// QuakeML, with the PGA, PGV and JMA intensity of every station that felt
// it, each named by a registered station's SEED codes.
func checkReportAmplitudes(t *testing.T, base, id string) {
	t.Helper()
	code, body := httpGet(t, base+"/fdsnws/event/1/query?includearrivals=true&eventid="+url.QueryEscape(id))
	if code != 200 {
		t.Fatalf("fdsnws-event: %d %.300s", code, body)
	}
	cmd := exec.Command("xmllint", "--noout", "--schema", "../svc-dataapi/internal/fdsnevent/testdata/QuakeML-1.2.xsd", "-")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the document does not validate: %v\n%s", err, out)
	}
	var doc struct {
		Amplitudes []struct {
			Value    float64 `xml:"genericAmplitude>value"`
			Type     string  `xml:"type"`
			Unit     string  `xml:"unit"`
			Waveform struct {
				Net string `xml:"networkCode,attr"`
				Sta string `xml:"stationCode,attr"`
				Loc string `xml:"locationCode,attr"`
			} `xml:"waveformID"`
		} `xml:"eventParameters>event>amplitude"`
	}
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	registered := map[string]bool{}
	for _, c := range stationCodes(t, base) {
		registered[c.Net+"."+c.Sta+"."+c.Loc] = true
	}
	units := map[string]string{"PGA": "m/(s*s)", "PGV": "m/s", "JMA intensity": "dimensionless"}
	kinds := map[string]map[string]float64{}
	for _, a := range doc.Amplitudes {
		codes := a.Waveform.Net + "." + a.Waveform.Sta + "." + a.Waveform.Loc
		if !registered[codes] || units[a.Type] != a.Unit || !(a.Value >= 0) {
			t.Errorf("amplitude %s %s %v %s", codes, a.Type, a.Value, a.Unit)
		}
		if kinds[codes] == nil {
			kinds[codes] = map[string]float64{}
		}
		kinds[codes][a.Type] = a.Value
	}
	for codes, k := range kinds {
		if len(k) != 3 || k["JMA intensity"] < 0.5 || k["PGA"] <= 0 {
			t.Errorf("station %s: %v (felt: intensity 0.5 or more, and a PGA)", codes, k)
		}
	}
	if len(kinds) < 3 {
		t.Fatalf("amplitudes of %d stations; the detection had at least 3: %.500s", len(kinds), body)
	}
	t.Logf("report %s: amplitudes of %d stations", id, len(kinds))
}

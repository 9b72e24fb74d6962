package dataapi

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/lib/metadb"
)

// quakeML is what a reader of an fdsnws-event document sees.
type quakeML struct {
	XMLName xml.Name
	Events  []struct {
		PublicID    string `xml:"publicID,attr"`
		Preferred   string `xml:"preferredOriginID"`
		Description string `xml:"description>text"`
		Origin      struct {
			PublicID string  `xml:"publicID,attr"`
			Time     string  `xml:"time>value"`
			Lat      float64 `xml:"latitude>value"`
			Lon      float64 `xml:"longitude>value"`
			Depth    float64 `xml:"depth>value"`
			Mode     string  `xml:"evaluationMode"`
		} `xml:"origin"`
		Magnitude struct {
			Mag  float64 `xml:"mag>value"`
			Type string  `xml:"type"`
		} `xml:"magnitude"`
		Amplitudes []struct {
			Value    float64 `xml:"genericAmplitude>value"`
			Type     string  `xml:"type"`
			Unit     string  `xml:"unit"`
			Waveform struct {
				Network  string `xml:"networkCode,attr"`
				Station  string `xml:"stationCode,attr"`
				Location string `xml:"locationCode,attr"`
			} `xml:"waveformID"`
		} `xml:"amplitude"`
	} `xml:"eventParameters>event"`
}

// TestFDSNEvent: the reports in the database, posted and made of a
// detection, read as seismology's tools read events — QuakeML 1.2 valid
// against its schema, the text format — with each filter, order, limit
// and offset, event ID and no-data rule of fdsnws-event.
func TestFDSNEvent(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	base := start(t, testConfig(t, "-database-url", dsn, "-admin-tokens", adminToken))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// Hualien, M7.2, posted; Pingtung, M3.0, posted under an ID with a
	// colon and a location with a bar; Hualien, M5.4, of a detection.
	big := report("113000-2024-0403-075809", 1712102289000, 7.2, 7)
	small := map[string]any{"id": "cwa:113001", "time_ms": "1711900800000", "lat": 22, "lon": 120.5,
		"depth_km": 0, "magnitude": 3, "location": "屏東縣 | 外海", "max_level": 1}
	for _, r := range []map[string]any{big, small} {
		if a := do(t, "POST", base+"/v1/reports", adminToken, r); a.code != 200 {
			t.Fatalf("report: %d %s", a.code, a.body)
		}
	}
	// The detection's report carries its stations' peaks, as each core's
	// data API merges them: one registered station (its SEED codes name
	// the amplitudes), one that is not.
	store := metadb.NewStore(pool)
	if _, err := store.CreateStation(ctx, metadb.NewStation{ID: "HUA-01", Name: "Hualien", Net: "MS-Net", Lat: 23.99, Lon: 121.61, Code: 970}); err != nil {
		t.Fatal(err)
	}
	detected := metadb.Report{
		ID: "113000-2024-0405-120000-18", TimeMs: 1712289598000, Lat: 24.12, Lon: 121.55, DepthKm: 10, Magnitude: 5.4,
		Location: "花蓮縣秀林鄉", MaxLevel: 5, Areas: []metadb.AreaLevel{{Code: 972, Level: 5}},
		SourceDetectionID: "1712289600000-18", TremMs: 1712289600000,
		Stations: []metadb.StationPeak{{StationID: "HUA-01", PGAGal: 80, PGVCms: 4, Intensity: 4.2}, {StationID: "unregistered", PGAGal: 3, PGVCms: 0.2, Intensity: 1.1}},
	}
	if _, _, err := store.MergeDetectionReport(ctx, detected); err != nil {
		t.Fatal(err)
	}
	// The other core saw a higher PGA and intensity, a lower PGV.
	other := detected
	other.Stations = []metadb.StationPeak{{StationID: "HUA-01", PGAGal: 96.5, PGVCms: 3.5, Intensity: 4.3}}
	if _, changed, err := store.MergeDetectionReport(ctx, other); err != nil || changed {
		t.Fatalf("the other core's merge: changed %t, %v (station peaks are not the report's content)", changed, err)
	}
	const (
		idBig    = "113000-2024-0403-075809"
		idSmall  = "cwa:113001"
		idDetect = "113000-2024-0405-120000-18"
	)
	q := func(params string) answer {
		t.Helper()
		return do(t, "GET", base+"/fdsnws/event/1/query?"+params, "", nil)
	}
	ids := func(a answer) []string {
		t.Helper()
		if a.code != http.StatusOK {
			t.Fatalf("%d %s", a.code, a.body)
		}
		var doc quakeML
		if err := xml.Unmarshal(a.body, &doc); err != nil {
			t.Fatalf("not XML: %v", err)
		}
		var out []string
		for _, e := range doc.Events {
			out = append(out, strings.TrimPrefix(e.PublicID, "smi:shindo/event/"))
		}
		return out
	}

	// Everything, newest first; valid QuakeML with the values stored.
	all := q("")
	if got := ids(all); !slices.Equal(got, []string{"113000-2024-0405-120000-18", idBig, "cwa~113001"}) {
		t.Fatalf("all: %v", got)
	}
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatal("xmllint not found: deploy/dev/system-packages installs it (Debian's libxml2-utils)")
	}
	cmd := exec.Command(xmllint, "--noout", "--schema", "internal/fdsnevent/testdata/QuakeML-1.2.xsd", "-")
	cmd.Stdin = bytes.NewReader(all.body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the document does not validate: %v\n%s\n%s", err, out, all.body)
	}
	var doc quakeML
	_ = xml.Unmarshal(all.body, &doc)
	if doc.XMLName.Space != "http://quakeml.org/xmlns/quakeml/1.2" || doc.XMLName.Local != "quakeml" {
		t.Errorf("root %v", doc.XMLName)
	}
	d, b := doc.Events[0], doc.Events[1]
	if d.Magnitude.Type != "Mi" || d.Origin.Mode != "automatic" || d.Origin.Depth != 10_000 || d.Description != "花蓮縣秀林鄉" {
		t.Errorf("the detection's event: %+v", d)
	}
	if b.Magnitude.Type != "M" || b.Magnitude.Mag != 7.2 || b.Origin.Mode != "manual" || b.Origin.Depth != 15_500 ||
		b.Origin.Lat != 23.77 || b.Origin.Lon != 121.67 || b.Origin.Time != "2024-04-02T23:58:09.000000Z" || b.Preferred != b.Origin.PublicID {
		t.Errorf("the posted event: %+v", b)
	}

	// With includearrivals=true, the stations' peaks as amplitudes: each
	// at the higher of the two cores' values, in SI units, named by the
	// registered station's SEED codes; still valid QuakeML.
	withAmps := q("eventid=" + idDetect + "&includearrivals=true")
	cmd = exec.Command(xmllint, "--noout", "--schema", "internal/fdsnevent/testdata/QuakeML-1.2.xsd", "-")
	cmd.Stdin = bytes.NewReader(withAmps.body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the document with amplitudes does not validate: %v\n%s\n%s", err, out, withAmps.body)
	}
	var amps quakeML
	if err := xml.Unmarshal(withAmps.body, &amps); err != nil || len(amps.Events) != 1 {
		t.Fatalf("includearrivals: %v %s", err, withAmps.body)
	}
	got := map[string]float64{}
	for _, a := range amps.Events[0].Amplitudes {
		w := a.Waveform
		got[w.Network+"."+w.Station+"."+w.Location+" "+a.Type+" "+a.Unit] = a.Value
	}
	seed := "SH." + seedStation(t, store, "HUA-01") + ".00 "
	want := map[string]float64{seed + "PGA m/(s*s)": 0.965, seed + "PGV m/s": 0.04, seed + "JMA intensity dimensionless": 4.3}
	if !maps.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }) {
		t.Errorf("amplitudes %v, want %v", got, want)
	}
	if len(doc.Events[0].Amplitudes) != 0 {
		t.Errorf("amplitudes without includearrivals: %+v", doc.Events[0].Amplitudes)
	}

	// The text format.
	text := q("format=text&orderby=time-asc")
	lines := strings.Split(strings.TrimSpace(string(text.body)), "\n")
	if text.code != 200 || len(lines) != 4 || !strings.HasPrefix(lines[0], "#EventID|Time|Latitude|Longitude|Depth/km|") {
		t.Fatalf("text: %d %q", text.code, lines)
	}
	if want := "cwa:113001|2024-03-31T16:00:00.000000|22|120.5|0|shindo|shindo|shindo|cwa:113001|M|3|shindo|屏東縣 / 外海|earthquake"; lines[1] != want {
		t.Errorf("text line\n got  %s\n want %s", lines[1], want)
	}
	if f := strings.Split(lines[3], "|"); len(f) != 14 || f[9] != "Mi" || f[10] != "5.4" {
		t.Errorf("text line of the detection: %q", lines[3])
	}

	for _, tc := range []struct {
		params string
		want   []string
	}{
		{"minmag=5", []string{idDetect, idBig}},
		{"minmagnitude=5&maxmag=6", []string{idDetect}},
		{"orderby=magnitude-asc", []string{"cwa~113001", idDetect, idBig}},
		{"orderby=magnitude&limit=1&offset=2", []string{idDetect}},
		{"limit=2", []string{idDetect, idBig}},
		{"start=2024-04-01T00:00:00&end=2024-04-04", []string{idBig}},
		{"mindepth=12", []string{idBig}},
		{"minlat=23&maxlat=25&minlon=121.6", []string{idBig}},
		{"lat=22&lon=120.5&maxradius=1", []string{"cwa~113001"}},
		{"latitude=22&longitude=120.5&minradius=1", []string{idDetect, idBig}},
		{"magnitudetype=mi", []string{idDetect}},
		{"eventid=" + idBig + "&minmag=9", []string{idBig}},
		{"eventid=" + idSmall, []string{"cwa~113001"}},
		{"catalog=shindo&contributor=SHINDO&updatedafter=2000-01-01", []string{idDetect, idBig, "cwa~113001"}},
		{"includeallorigins=true&includeallmagnitudes=true&includearrivals=false", []string{idDetect, idBig, "cwa~113001"}},
	} {
		if got := ids(q(tc.params)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.params, got, tc.want)
		}
	}

	// Nothing: 204, or 404 when asked.
	future := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05")
	for _, params := range []string{"minmag=8", "eventid=nope", "catalog=ISC", "updatedafter=" + future, "minlon=170&maxlon=-170"} {
		if a := q(params); a.code != http.StatusNoContent {
			t.Errorf("%s: %d %s, want 204", params, a.code, a.body)
		}
	}
	if a := q("minmag=8&nodata=404"); a.code != http.StatusNotFound {
		t.Errorf("nodata=404: %d", a.code)
	}
	// Bad requests get the FDSN error document.
	for params, want := range map[string]string{
		"minmag=abc":         `"minmag"`,
		"orderby=depth":      `"depth" is not one of`,
		"network=SH":         `unknown parameter "network"`,
		"offset=0":           "outside",
		"limit=1&limit=2":    "more than once",
		"format=json":        "format",
		"starttime=tomorrow": "not a time",
	} {
		a := q(params)
		if a.code != http.StatusBadRequest || !strings.HasPrefix(string(a.body), "Error 400: ") || !strings.Contains(string(a.body), want) {
			t.Errorf("%s: %d %s; want 400 saying %s", params, a.code, a.body, want)
		}
	}

	for path, want := range map[string]string{
		"version":      "1.1.0",
		"catalogs":     "<Catalog>shindo</Catalog>",
		"contributors": "<Contributor>shindo</Contributor>",
		"":             "fdsnws-event 1.1.0",
	} {
		if a := do(t, "GET", base+"/fdsnws/event/1/"+path, "", nil); a.code != 200 || !strings.Contains(string(a.body), want) {
			t.Errorf("/%s: %d %s", path, a.code, a.body)
		}
	}
	a := do(t, "GET", base+"/fdsnws/event/1/application.wadl", "", nil)
	for _, p := range []string{"minmagnitude", "magnitudetype", "eventid", "updatedafter", "orderby"} {
		if !strings.Contains(string(a.body), fmt.Sprintf(`name="%s"`, p)) {
			t.Errorf("wadl lacks %s", p)
		}
	}
}

// seedStation is the SEED station code the registry gave station id.
func seedStation(t *testing.T, store *metadb.Store, id string) string {
	t.Helper()
	st, err := store.GetStation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.SEED.Station
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// obspyPython is a Python that imports ObsPy: SHINDO_OBSPY_PYTHON, or
// python3 when it does; "" for none. ObsPy is neither in Debian's archive
// nor on a registry this machine reaches; docs/ARCHITECTURE.md ("ObsPy")
// shows how to build it from its source into a virtualenv.
func obspyPython() string {
	for _, p := range []string{os.Getenv("SHINDO_OBSPY_PYTHON"), "python3"} {
		if p == "" {
			continue
		}
		if exec.Command(p, "-c", "import obspy.clients.fdsn, obspy.clients.seedlink.easyseedlink").Run() == nil {
			return p
		}
	}
	return ""
}

// obspyFindings is what testdata/obspy/check.py prints.
type obspyFindings struct {
	Services []string
	Channels []struct {
		Code                      string
		Stages                    int
		Sensitivity, Recalculated float64
		InputUnits                string `json:"input_units"`
	}
	Traces                  []string
	SensitivityRemovedError float64 `json:"sensitivity_removed_error"`
	VelocityFinite          bool    `json:"velocity_finite"`
	MassDownloader          struct {
		MatchTimeSeriesListed bool     `json:"matchtimeseries_listed"`
		MiniSEED              []string `json:"mseed"`
		StationXML            []string `json:"stationxml"`
	} `json:"mass_downloader"`
	Events               []struct{ ID, Type string }
	SeedLinkCapabilities []string  `json:"seedlink_capabilities"`
	SeedLinkSteps        []float64 `json:"seedlink_steps"`
}

// checkObsPy reads the network through an edge with ObsPy's FDSN and
// SeedLink clients (testdata/obspy/check.py) and checks what ObsPy made
// of it: the three services discovered; every channel's response with a
// stage from which ObsPy recalculates the sensitivity given (in SI units
// where the channel's are centimetres, as ObsPy states them,
// obspy/core/inventory/response.py); the BN? waveforms with their
// responses attached, the sensitivity removed exactly and the response to
// velocity; the same BN? through ObsPy's MassDownloader, one file per
// channel and the station's StationXML; the report posted among the
// events; and over SeedLink the capabilities ObsPy's EasySeedLinkClient
// requires, and a stream of MXI that goes on across a dropped connection
// with no record missing or repeated (one each 500 ms).
func checkObsPy(t *testing.T, d *dev, python, edge, adminToken string) {
	t.Helper()
	base := d.endpoints.get(t, edge, "edge", "http")
	seedlink := d.endpoints.get(t, edge, "edge", "seedlink")
	posted := fmt.Sprintf("obspy-%d", time.Now().UnixNano())
	code, body := postJSON(t, base+"/v1/reports", adminToken,
		fmt.Sprintf(`{"id":%q,"time_ms":"%d","lat":23.85,"lon":121.62,"depth_km":12.5,"magnitude":5.8,"location":"花蓮縣近海","max_level":5}`,
			posted, time.Now().Add(-time.Minute).UnixMilli()))
	if code != 200 {
		t.Fatalf("post a report: %d %s", code, body)
	}
	codes := stationCodes(t, base)
	st := codes[len(codes)-1]
	// 20 s of waveforms that ended 5 s ago, once the archive has them all.
	var start, end time.Time
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000") }
	if !poll.Within(time.Minute, func() bool {
		end = time.Now().Add(-5 * time.Second)
		start = end.Add(-20 * time.Second)
		code, _ := httpGet(t, fmt.Sprintf("%s/fdsnws/dataselect/1/query?net=%s&sta=%s&cha=BNZ&start=%s&end=%s",
			base, st.Net, st.Sta, iso(start), iso(start.Add(time.Second))))
		return code == 200
	}) {
		t.Fatalf("no waveforms of %s.%s 25 s old in a minute", st.Net, st.Sta)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "obspy", "check.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, "-W", "ignore", script, base, seedlink, st.Net, st.Sta, iso(start), iso(end))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("ObsPy through %s: %v\n%s", edge, err, stderr)
	}
	var got obspyFindings
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("ObsPy printed %.300q…: %v", out, err)
	}
	if !slices.Equal(got.Services, []string{"dataselect", "event", "station"}) {
		t.Errorf("ObsPy discovered the services %v", got.Services)
	}
	if len(got.Channels) != len(archivedChannels) {
		t.Errorf("ObsPy read %d channels of %s.%s, want %d", len(got.Channels), st.Net, st.Sta, len(archivedChannels))
	}
	for _, c := range got.Channels {
		want := c.Sensitivity
		if strings.HasPrefix(c.InputUnits, "cm/") {
			want *= 100
		}
		if c.Stages != 1 || c.Sensitivity <= 0 || c.Recalculated != want {
			t.Errorf("%s: %d stages, sensitivity %g, recalculated by ObsPy %g (want %g)", c.Code, c.Stages, c.Sensitivity, c.Recalculated, want)
		}
	}
	if len(got.Traces) != 3 || got.SensitivityRemovedError != 0 || !got.VelocityFinite {
		t.Errorf("waveforms with responses: traces %v, sensitivity removed off by %g, velocity finite %v",
			got.Traces, got.SensitivityRemovedError, got.VelocityFinite)
	}
	if m := got.MassDownloader; m.MatchTimeSeriesListed || len(m.MiniSEED) != 3 || len(m.StationXML) != 1 {
		t.Errorf("ObsPy's MassDownloader: matchtimeseries listed %v, miniSEED files %v, StationXML files %v (want BN? and the station's)",
			m.MatchTimeSeriesListed, m.MiniSEED, m.StationXML)
	}
	if !slices.ContainsFunc(got.Events, func(e struct{ ID, Type string }) bool { return strings.HasSuffix(e.ID, "/"+posted) && e.Type == "M" }) {
		t.Errorf("ObsPy's events lack the report posted (%s, magnitude type M): %+v", posted, got.Events)
	}
	if !slices.Contains(got.SeedLinkCapabilities, "multistation") {
		t.Errorf("SeedLink capabilities %v: ObsPy selects streams only with multistation", got.SeedLinkCapabilities)
	}
	if len(got.SeedLinkSteps) != 7 || slices.ContainsFunc(got.SeedLinkSteps, func(s float64) bool { return s != 0.5 }) {
		t.Errorf("ObsPy's SeedLink records, steps between them across a dropped connection: %v (want seven of 0.5 s)", got.SeedLinkSteps)
	}
}

// checkPublicOrigin: what the data API writes of where it is served from —
// the FDSN services' WADL base and StationXML ModuleURI, the base map's
// TileJSON — names the edge a client asked, never the core behind it,
// which the public does not reach (clients such as ObsPy and MapLibre
// follow those addresses).
func checkPublicOrigin(t *testing.T, d *dev) {
	t.Helper()
	for _, edge := range []string{"TPE-1", "KHH-1"} {
		base := d.endpoints.get(t, edge, "edge", "http")
		for _, svc := range []string{"station", "dataselect", "event", "availability"} {
			code, body := httpGet(t, base+"/fdsnws/"+svc+"/1/application.wadl")
			if want := `base="` + base + "/fdsnws/" + svc + `/1/"`; code != 200 || !strings.Contains(body, want) {
				t.Errorf("%s %s WADL: %d, want %s in %.300s", edge, svc, code, want, body)
			}
		}
		code, body := httpGet(t, base+"/fdsnws/station/1/query?level=network")
		if want := "<ModuleURI>" + base + "/fdsnws/station/1/query"; code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s StationXML: %d, want %s in %.400s", edge, code, want, body)
		}
		code, body = httpGet(t, base+"/api/v1/map/tiles/tiles.json")
		if want := `"` + base + "/api/v1/map/tiles/{z}/{x}/{y}.pbf"; code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s TileJSON: %d, want %s in %.300s", edge, code, want, body)
		}
	}
}

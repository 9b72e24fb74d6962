package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	for _, f := range []string{"package.json", "package-lock.json", "station.mjs"} {
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
			}
		}
	}
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

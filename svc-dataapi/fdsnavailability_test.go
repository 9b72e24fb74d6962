package dataapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/poll"
)

// TestFDSNAvailability: fdsnws-availability over a real svc-waveform: a
// station with a 30 s gap has two stretches per channel in query, one row
// with two spans in extent, one stretch with mergegaps over the gap, in
// each format; a station with no data is nodata; bad parameters are 400s.
func TestFDSNAvailability(t *testing.T) {
	// Not parallel: see TestProvisioning.
	archiveAddr := freeaddr.TCP(t)
	reg := filepath.Join(t.TempDir(), "stations.json")
	doc := `[{"id":"HUA-01","name":"Hualien","net":"SIM","lat":23.99,"lon":121.61,"code":970,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"},
{"id":"TPE-02","name":"Taipei","net":"SIM","lat":25.03,"lon":121.56,"code":100,"key_id":2,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`
	if err := os.WriteFile(reg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	archive := startArchive(t, archiveAddr)
	from := time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	archive.ingest(t, "HUA-01", from, from+60_000)
	archive.ingest(t, "HUA-01", from+90_000, from+120_000)
	base := start(t, testConfig(t, "-registry", reg, "-waveform", archiveAddr))
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000Z") }
	get := func(path string) answer {
		t.Helper()
		return do(t, "GET", base+"/fdsnws/availability/1/"+path, "", nil)
	}

	// The station's SEED codes, as the archive and the registry name it.
	var codes string
	poll.Until(t, 10*time.Second, "the archive answers", func() bool {
		a := get("query?cha=BNZ&format=request")
		codes = strings.Join(strings.Fields(string(a.body))[:min(4, len(strings.Fields(string(a.body))))], " ")
		return a.code == 200
	})
	net, sta := strings.Fields(codes)[0], strings.Fields(codes)[1]
	sel := "net=" + net + "&sta=" + sta

	a := get("query?" + sel + "&cha=BNZ")
	want := fmt.Sprintf("#Network Station Location Channel Quality SampleRate Earliest Latest\n"+
		"%[1]s D 50.0 %[2]s %[3]s\n%[1]s D 50.0 %[4]s %[5]s\n", codes, at(from), at(from+60_000), at(from+90_000), at(from+120_000))
	if a.code != 200 || string(a.body) != want || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("query text: %d %q\nwant %q", a.code, a.body, want)
	}
	a = get("query?" + sel + "&cha=BNZ&mergegaps=30&merge=quality,samplerate&show=latestupdate")
	want = fmt.Sprintf("#Network Station Location Channel Earliest Latest Updated\n%s %s %s %s\n", codes, at(from), at(from+120_000), at(from+120_000))
	if a.code != 200 || string(a.body) != want {
		t.Fatalf("mergegaps over the gap: %d %q\nwant %q", a.code, a.body, want)
	}
	if a = get("query?" + sel + "&cha=BNZ&mergegaps=29.9"); strings.Count(string(a.body), "\n") != 3 {
		t.Fatalf("mergegaps short of the gap: %q", a.body)
	}
	a = get("extent?" + sel + "&cha=BN?,MXI&format=json")
	var ext struct {
		Version     float64 `json:"version"`
		Datasources []struct {
			Network, Station, Location, Channel, Quality string
			Samplerate                                   float64
			Earliest, Latest, Restriction                string
			TimespanCount                                int `json:"timespanCount"`
		} `json:"datasources"`
	}
	if err := json.Unmarshal(a.body, &ext); err != nil || a.code != 200 || ext.Version != 1 || len(ext.Datasources) != 4 {
		t.Fatalf("extent json: %d %s %v", a.code, a.body, err)
	}
	for _, d := range ext.Datasources {
		rate, first, last := 50.0, at(from), at(from+120_000)
		if d.Channel == "MXI" {
			// A frame is stamped with its window's end, and its sample
			// lasts half a second from there.
			rate, first, last = 2, at(from+500), at(from+120_500)
		}
		if d.Network != net || d.Station != sta || d.Quality != "D" || d.Samplerate != rate || d.Earliest != first ||
			d.Latest != last || d.TimespanCount != 2 || d.Restriction != "OPEN" {
			t.Errorf("extent of %s: %+v", d.Channel, d)
		}
	}
	a = get("query?" + sel + "&cha=BNZ&format=geocsv")
	if lines := strings.Split(string(a.body), "\n"); a.code != 200 || lines[0] != "#dataset: GeoCSV 2.0" ||
		lines[4] != "Network|Station|Location|Channel|Quality|SampleRate|Earliest|Latest" || !strings.HasPrefix(lines[5], net+"|"+sta+"|") {
		t.Fatalf("geocsv: %q", a.body)
	}
	a = get("query?" + sel + "&cha=BNZ&format=json")
	var q struct {
		Datasources []struct {
			Channel   string
			Timespans [][2]string
		}
	}
	if err := json.Unmarshal(a.body, &q); err != nil || len(q.Datasources) != 1 || len(q.Datasources[0].Timespans) != 2 ||
		q.Datasources[0].Timespans[1] != [2]string{at(from + 90_000), at(from + 120_000)} {
		t.Fatalf("query json: %s %v", a.body, err)
	}
	if a = get("query?" + sel + "&limit=1"); strings.Count(string(a.body), "\n") != 2 {
		t.Fatalf("limit=1: %q", a.body)
	}
	// POST: one selection line per channel time window.
	body := fmt.Sprintf("format=request\n%s %s * BNE %s %s\n", net, sta, at(from + 30_000)[:19], at(from + 100_000)[:19])
	a = do(t, "POST", base+"/fdsnws/availability/1/query", "", body)
	if lines := strings.Split(strings.TrimSpace(string(a.body)), "\n"); a.code != 200 || len(lines) != 2 ||
		!strings.HasSuffix(lines[0], "BNE "+at(from+30_000)+" "+at(from+60_000)) || !strings.HasSuffix(lines[1], "BNE "+at(from+90_000)+" "+at(from+100_000)) {
		t.Fatalf("POST: %d %q", a.code, a.body)
	}

	// As seisplotjs's AvailabilityQuery.postQuery writes it (createPostBody
	// in src/fdsnavailability.ts): parameters, then times without a Z.
	body = fmt.Sprintf("format=json\n%s %s %s BNE %s %s\n", net, sta, strings.Fields(codes)[2], at(from)[:23], at(from + 30_000)[:23])
	if a = do(t, "POST", base+"/fdsnws/availability/1/query", "", body); a.code != 200 || !strings.Contains(string(a.body), `"timespans":[[`) {
		t.Fatalf("POST as seisplotjs: %d %s (body %q)", a.code, a.body, body)
	}
	if a = get("query?sta=TPE*&nodata=404"); a.code != http.StatusNotFound {
		t.Errorf("a station without data: %d %s", a.code, a.body)
	}
	if a = get("extent?" + sel + "&quality=R"); a.code != http.StatusNoContent {
		t.Errorf("quality R: %d %s", a.code, a.body)
	}
	for _, q := range []string{"merge=everything", "mergegaps=-1", "format=xml", "orderby=size", "extent_only=1"} {
		if a = get("query?" + q); a.code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, a.code, a.body)
		}
	}
	if a = get("extent?mergegaps=1"); a.code != http.StatusBadRequest {
		t.Errorf("extent with mergegaps: %d", a.code)
	}
	for _, p := range []string{"version", "application.wadl", ""} {
		if a = get(p); a.code != 200 || len(a.body) == 0 {
			t.Errorf("%s: %d", p, a.code)
		}
	}
}

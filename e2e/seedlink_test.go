package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// seisplotjsSeedLink is what testdata/seisplotjs/seedlink.mjs prints: the
// records seisplotjs's SeedLink client decoded from the first core, then
// from the second after resuming.
type seisplotjsSeedLink struct {
	First, Second []struct {
		Seq     string
		Channel string
		Station string
		Start   int64
		Rate    float64
		Y       []float64
	}
}

// checkSeisplotjsSeedLink reads a station's live BNZ records with
// seisplotjs's SeedLink client of protocol proto (3 or 4) over WebSocket
// from TNN-1's SeedLink, then resumes from TYO-1's after the last sequence
// number it got, as a client does when its core goes away. The records'
// samples, from both cores together, are the REST Query's for the same
// span, each once and with no gap: both cores number the same data alike.
func checkSeisplotjsSeedLink(t *testing.T, d *dev, dir string, proto int) {
	t.Helper()
	base := d.endpoints.get(t, "TPE-1", "edge", "http")
	all := stationCodes(t, base)
	st := all[len(all)-1]
	wsURL := func(site string) string {
		return "ws://" + d.endpoints.get(t, site, "waveform", "seedlink") + "/seedlink"
	}
	const fromA, fromB = 12, 12
	out := runNode(t, dir, fmt.Sprintf("seisplotjs SeedLink %d", proto), "--experimental-websocket", "seedlink.mjs",
		strconv.Itoa(proto), wsURL("TNN-1"), wsURL("TYO-1"), st.Net, st.Sta, strconv.Itoa(fromA), strconv.Itoa(fromB))
	var got seisplotjsSeedLink
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("seisplotjs printed %.300q…: %v", out, err)
	}
	if len(got.First) != fromA || len(got.Second) != fromB {
		t.Fatalf("seisplotjs read %d and %d records, want %d and %d", len(got.First), len(got.Second), fromA, fromB)
	}

	// Samples by time, from both cores; none twice.
	samples := map[int64]float64{}
	var lo, hi int64 = 1 << 62, 0
	for i, r := range append(slices.Clone(got.First), got.Second...) {
		if r.Channel != "BNZ" || r.Station != st.Net+"_"+st.Sta || r.Rate != 50 {
			t.Fatalf("record %d: %s %s at %v Hz, want BNZ of %s_%s at 50 Hz", i, r.Station, r.Channel, r.Rate, st.Net, st.Sta)
		}
		for k, y := range r.Y {
			at := r.Start + int64(k)*20
			if _, dup := samples[at]; dup {
				t.Errorf("record %d (seq %s): the sample at %s came twice", i, r.Seq, time.UnixMilli(at).UTC().Format(time.TimeOnly+".000"))
			}
			samples[at] = y
			lo, hi = min(lo, at), max(hi, at)
		}
	}
	// The resumed stream starts after the last record of the first.
	lastA, _ := strconv.ParseUint(got.First[fromA-1].Seq, 10, 64)
	firstB, _ := strconv.ParseUint(got.Second[0].Seq, 10, 64)
	if proto == 3 {
		if firstB != (lastA+32)&0xFFFFFF {
			t.Errorf("TYO-1 resumed at %06X after TNN-1's %06X: want the next packet's, %06X", firstB, lastA, (lastA+32)&0xFFFFFF)
		}
	} else if firstB != lastA+32 {
		t.Errorf("TYO-1 resumed at %d after TNN-1's %d: want the next packet's, %d", firstB, lastA, lastA+32)
	}

	// Wait until the archive's REST Query has the whole span, then compare.
	end := hi + 20
	var want map[int64]float64
	poll.Until(t, 10*time.Second, "the REST Query holds the span SeedLink sent", func() bool {
		code, body := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", base, st.ID, lo, end))
		if code != 200 {
			t.Fatalf("REST Query: %d %s", code, body)
		}
		want = restSamples(t, body, "ud")
		return int64(len(want)) >= (end-lo)/20
	})
	if n := (end - lo) / 20; int64(len(samples)) != n {
		t.Errorf("seisplotjs decoded %d samples from %s to %s, want %d: a gap", len(samples),
			time.UnixMilli(lo).UTC().Format(time.TimeOnly+".000"), time.UnixMilli(end).UTC().Format(time.TimeOnly+".000"), n)
	}
	bad := 0
	for at, v := range samples {
		if w, ok := want[at]; !ok || w != v {
			bad++
			if bad <= 3 {
				t.Errorf("%s BNZ at %s: SeedLink %v, REST Query %v (present %v)", st.ID, time.UnixMilli(at).UTC().Format(time.TimeOnly+".000"), v, w, ok)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d samples differ from the REST Query's", bad, len(samples))
	}
	t.Logf("seisplotjs SeedLink %d: %d records from TNN-1, %d from TYO-1 resumed at %s; %d samples of %s, each the REST Query's",
		proto, fromA, fromB, got.Second[0].Seq, len(samples), st.ID)
}

// restSamples reads one axis of the REST Query's chunks by time.
func restSamples(t *testing.T, body, axis string) map[int64]float64 {
	t.Helper()
	var raw struct {
		Chunks []map[string]json.RawMessage `json:"chunks"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	out := map[int64]float64{}
	for _, c := range raw.Chunks {
		var first string
		_ = json.Unmarshal(c["first_sample_ms"], &first)
		t0, _ := strconv.ParseInt(first, 10, 64)
		var xs []int32
		_ = json.Unmarshal(c[axis], &xs)
		for k, x := range xs {
			out[t0+int64(k)*20] = float64(x)
		}
	}
	return out
}

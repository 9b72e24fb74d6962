package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/seismo/mseed"
)

// seisplotjsSeedLink is what testdata/seisplotjs/seedlink.mjs prints: the
// records seisplotjs's SeedLink client decoded from the first core, then
// from the second after resuming.
type seisplotjsSeedLink struct {
	First, Second []struct {
		Seq     string
		Format  string // the payload: miniSEED "2" or "3"
		CrcOK   bool   // miniSEED 3: seisplotjs computes the record's CRC alike
		Channel string
		Station string
		Start   int64
		Rate    float64
		Y       []float64
	}
}

// checkSeisplotjsSeedLink reads a station's live BNZ records with
// seisplotjs's SeedLink client of protocol proto (3 or 4) over WebSocket
// through TPE-1's SeedLink entrance, which carries it to a core; that
// core's svc-waveform is killed from outside while the client reads, and
// the client reconnects through the same entrance resuming after the last
// sequence number it got, as an application does. The records' samples,
// from both cores together, are the REST Query's for the same span, each
// once and with no gap: both cores number the same data alike. The
// SeedLink 4 client resumes asking for miniSEED 3, which seisplotjs must
// read, CRC and all, and which must be numbered as miniSEED 2 is.
func checkSeisplotjsSeedLink(t *testing.T, d *dev, dir string, proto int) {
	t.Helper()
	var control string
	if err := json.Unmarshal(d.endpoints["dev"]["control"], &control); err != nil {
		t.Fatal(err)
	}
	base := d.endpoints.get(t, "TPE-1", "edge", "http")
	admin := d.endpoints.get(t, "TPE-1", "edge", "admin")
	all := stationCodes(t, base)
	st := all[len(all)-1]
	url := "ws://" + d.endpoints.get(t, "TPE-1", "edge", "seedlink") + "/seedlink"
	routedBefore := routedSeedLink(t, admin)
	const fromB = 12
	cmd := exec.Command("node", "--experimental-websocket", "seedlink.mjs", strconv.Itoa(proto), url, url, st.Net, st.Sta, "12", strconv.Itoa(fromB))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("seisplotjs SeedLink %d ended before %s:\n%s", proto, what, stderr.String())
			}
			return l
		case <-time.After(90 * time.Second):
			t.Fatalf("seisplotjs SeedLink %d: no %s in 90 s:\n%s", proto, what, stderr.String())
		}
		return ""
	}
	next("12 records")

	// The core the entrance carried the client to loses its svc-waveform.
	var site string
	for s, n := range routedSeedLink(t, admin) {
		if n > routedBefore[s] {
			site = s
		}
	}
	for _, core := range []string{"TNN-1", "TYO-1"} {
		if d.endpoints.get(t, core, "waveform", "seedlink") == site {
			site = core
		}
	}
	if site != "TNN-1" && site != "TYO-1" {
		t.Fatalf("TPE-1's SeedLink routing counts no new connection to a core's SeedLink: %v", routedSeedLink(t, admin))
	}
	target := site + "-waveform"
	old := processes(t, control)[target].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (%d): %v", target, old, err)
	}
	t.Logf("killed %s, which served the client through TPE-1", target)
	var got seisplotjsSeedLink
	if out := next("the records"); json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("seisplotjs printed %.300q…", out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("seisplotjs SeedLink %d: %v\n%s", proto, err, stderr.String())
	}
	// The next check may need the core whole again.
	defer poll.Until(t, 45*time.Second, target+" back", func() bool {
		p := processes(t, control)[target]
		return p.State == "running" && p.PID != old && p.PID != 0 && reachable(d.endpoints.get(t, site, "waveform", "seedlink"))
	})
	if len(got.First) < 12 || len(got.Second) != fromB {
		t.Fatalf("seisplotjs read %d records before the kill and %d after, want 12 or more and %d", len(got.First), len(got.Second), fromB)
	}
	fromA := len(got.First)

	// Samples by time, from both cores; none twice.
	samples := map[int64]float64{}
	var lo, hi int64 = 1 << 62, 0
	for i, r := range append(slices.Clone(got.First), got.Second...) {
		if want := map[bool]string{true: "3", false: "2"}[proto == 4 && i >= fromA]; r.Format != want || r.Format == "3" && !r.CrcOK {
			t.Fatalf("record %d (seq %s): miniSEED %s (CRC as seisplotjs computes it: %v), want miniSEED %s", i, r.Seq, r.Format, r.CrcOK, want)
		}
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
	// The resumed stream starts after the last record of the first (the
	// samples' continuity below shows it is the very next).
	lastA, _ := strconv.ParseUint(got.First[fromA-1].Seq, 10, 64)
	firstB, _ := strconv.ParseUint(got.Second[0].Seq, 10, 64)
	if step := firstB - lastA; proto == 3 && (step&0xFFFFFF == 0 || step&0xFFFFFF >= 1<<23) || proto == 4 && (firstB <= lastA) {
		t.Errorf("resumed at %d after %d: not after it", firstB, lastA)
	}

	// Wait until the archive's REST Query has the whole span, then compare.
	end := hi + 20
	var want map[int64]float64
	poll.Until(t, 30*time.Second, "the REST Query holds the span SeedLink sent", func() bool {
		code, body := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", base, st.ID, lo, end))
		if code != 200 {
			return false // the killed archive's core may answer 503 until it is back
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
	t.Logf("seisplotjs SeedLink %d through TPE-1: %d records from %s until its kill, %d after it, resumed at %s; %d samples of %s, each the REST Query's",
		proto, fromA, site, fromB, got.Second[0].Seq, len(samples), st.ID)
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

// routedSeedLink reads an edge's count of SeedLink connections carried to
// each core's address.
func routedSeedLink(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, admin+"/metrics")
	if code != 200 {
		t.Fatalf("edge metrics: %d", code)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "shindo_edge_tcp_routed_total{") {
			continue
		}
		i, j := strings.Index(l, `core="`), strings.LastIndexByte(l, ' ')
		if i < 0 || j < 0 {
			continue
		}
		core := l[i+6:]
		core = core[:strings.IndexByte(core, '"')]
		n, _ := strconv.ParseFloat(l[j+1:], 64)
		out[core] = n
	}
	return out
}

// reachable reports whether a TCP address accepts a connection.
func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// seedLinkFollower reads one channel of a station over SeedLink 3 (TCP) and
// notes when each single-value FLOAT32 record (the MX? channels) arrived,
// by its value.
type seedLinkFollower struct {
	mu      sync.Mutex
	arrived map[float32]time.Time
}

func followSeedLink(ctx context.Context, t testing.TB, addr, net_, sta, channel string) *seedLinkFollower {
	t.Helper()
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("seedlink %s: %v", addr, err)
	}
	go func() { <-ctx.Done(); c.Close() }()
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "STATION %s %s\r\nSELECT %s\r\nDATA\r\nEND\r\n", sta, net_, channel)
	for range 3 {
		if l, err := r.ReadString('\n'); err != nil || strings.TrimSpace(l) != "OK" {
			t.Fatalf("seedlink %s: %q %v", addr, l, err)
		}
	}
	f := &seedLinkFollower{arrived: map[float32]time.Time{}}
	go func() {
		buf := make([]byte, 8+512)
		for {
			if _, err := io.ReadFull(r, buf); err != nil {
				return
			}
			at := time.Now()
			rec := buf[8:]
			// FLOAT32 (blockette 1000's encoding 4), big-endian, one
			// sample at the data offset the fixed header gives.
			off := int(binary.BigEndian.Uint16(rec[44:46]))
			if rec[52] != 4 || binary.BigEndian.Uint16(rec[30:32]) != 1 || off+4 > len(rec) {
				continue
			}
			v := math.Float32frombits(binary.BigEndian.Uint32(rec[off:]))
			f.mu.Lock()
			if _, seen := f.arrived[v]; !seen {
				f.arrived[v] = at
			}
			f.mu.Unlock()
		}
	}()
	return f
}

// latencies are the times from each value's send to its record's arrival,
// ms, sorted.
func (f *seedLinkFollower) latencies(sent map[float32]time.Time) []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []float64
	for v, at := range sent {
		if got, ok := f.arrived[v]; ok {
			out = append(out, float64(got.Sub(at).Microseconds())/1000)
		}
	}
	slices.Sort(out)
	return out
}

// slinktoolPath is EarthScope's slinktool (libslink's client, as SeisComP's
// and slarchive's) from $SHINDO_SLINKTOOL or PATH, or "" when absent:
// Debian does not package it, so CI cannot have it; built from
// github.com/EarthScope/slinktool it runs these checks here.
func slinktoolPath() string {
	if p := os.Getenv("SHINDO_SLINKTOOL"); p != "" {
		return p
	}
	p, _ := exec.LookPath("slinktool")
	return p
}

// checkSlinktool reads a station's BNZ over raw TCP through an edge with
// slinktool — protocol 3, protocol 4, and protocol 4 asking for miniSEED 3
// — for a time window that ended a few seconds ago: slinktool exits when
// the window ends (END), and the records it wrote hold every sample of
// the window once, each the REST Query's. It also asks INFO ID.
func checkSlinktool(t *testing.T, d *dev, slinktool string) {
	t.Helper()
	base := d.endpoints.get(t, "TPE-1", "edge", "http")
	addr := d.endpoints.get(t, "TPE-1", "edge", "seedlink")
	st := stationCodes(t, base)[len(stationCodes(t, base))-1]
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, slinktool, append(args, addr)...).CombinedOutput()
		if err != nil {
			t.Fatalf("slinktool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if out := run("-I"); !bytes.Contains(out, []byte("shindo")) {
		t.Errorf("slinktool -I: %s", out)
	}
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
	// A 20 s window that ended 8 s ago and that the archive holds whole
	// (the topology may have started less than 28 s ago).
	var start, end time.Time
	var want map[int64]float64
	poll.Until(t, 60*time.Second, "the REST Query holds a whole window", func() bool {
		end = time.Now().Add(-8 * time.Second).Truncate(time.Second)
		start = end.Add(-20 * time.Second)
		code, body := httpGet(t, fmt.Sprintf("%s/v1/waveforms/%s?start_ms=%d&end_ms=%d", base, st.ID, start.UnixMilli(), end.UnixMilli()))
		if code != 200 {
			return false
		}
		want = restSamples(t, body, "ud")
		return int64(len(want)) >= end.Sub(start).Milliseconds()/20
	})
	for _, c := range []struct {
		name   string
		args   []string
		mseed3 bool
	}{
		{"SeedLink 3", []string{"-3", "-S", st.Net + "_" + st.Sta + ":" + st.Loc + "BNZ"}, false},
		{"SeedLink 4", []string{"-4", "-S", st.Net + "_" + st.Sta + ":" + st.Loc + "_B_N_Z"}, false},
		{"SeedLink 4, miniSEED 3", []string{"-4", "-S", st.Net + "_" + st.Sta + ":" + st.Loc + "_B_N_Z:3"}, true},
	} {
		file := filepath.Join(t.TempDir(), "data")
		run(append(c.args, "-ts", iso(start), "-te", iso(end), "-o", file)...)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := map[int64]float64{}
		add := func(h mseed.Header, xs []int32) {
			for k, x := range xs {
				at := h.Start.UnixMilli() + int64(k)*20
				if _, dup := got[at]; dup {
					t.Errorf("%s: the sample at %s came twice", c.name, time.UnixMilli(at).UTC().Format(time.TimeOnly+".000"))
				}
				got[at] = float64(x)
			}
		}
		records := 0
		for len(b) > 0 {
			var rec *mseed.Record
			if c.mseed3 {
				rec, err = mseed.Parse3(b)
			} else {
				rec, err = mseed.Parse(b)
			}
			if err != nil {
				t.Fatalf("%s: record %d: %v", c.name, records+1, err)
			}
			if rec.Channel != "BNZ" || rec.Network != st.Net || rec.Station != st.Sta {
				t.Fatalf("%s: a record of %s", c.name, rec.SourceName())
			}
			add(rec.Header, rec.Ints)
			b = b[rec.RecordLen:]
			records++
		}
		missing, bad := 0, 0
		for at := start.UnixMilli(); at < end.UnixMilli(); at += 20 {
			v, ok := got[at]
			switch {
			case !ok:
				missing++
			case v != want[at]:
				bad++
			}
		}
		if missing > 0 || bad > 0 {
			t.Errorf("%s: of the window's %d samples %d missing, %d differ from the REST Query", c.name, end.Sub(start).Milliseconds()/20, missing, bad)
		}
		t.Logf("slinktool %s through TPE-1: %d records, every sample of %s–%s", c.name, records, iso(start), iso(end))
	}
}

package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

// probe is a station driven by the test: it sends hand-made intensity
// frames over UDP on each of its uplinks, as a station does, and reads the
// acks.
type probe struct {
	t     testing.TB
	st    devStation
	key   []byte
	conns []*net.UDPConn
	seq   uint64
}

func newProbe(t testing.TB, st devStation, ingestUDPs ...string) *probe {
	t.Helper()
	key, err := hex.DecodeString(st.KeyHex)
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{t: t, st: st, key: key, seq: uint64(time.Now().UnixMilli())}
	for _, a := range ingestUDPs {
		addr, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialUDP("udp", nil, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		p.conns = append(p.conns, conn)
	}
	return p
}

// send transmits an intensity frame for the interval ending at windowEnd
// and returns when it was sent.
func (p *probe) send(windowEnd int64, intensity, pga float32) time.Time {
	p.t.Helper()
	p.seq++
	now := time.Now()
	b, err := stationwire.Seal(p.key, p.st.KeyID, &stationv1.Packet{
		StationId: p.st.ID, Seq: p.seq, SentAtMs: now.UnixMilli(),
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
			WindowEndMs: windowEnd, Intensity: intensity, PgaGal: pga, PgvCms: 0.1,
		}},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	for _, c := range p.conns {
		if _, err := c.Write(b); err != nil {
			p.t.Fatal(err)
		}
	}
	return now
}

// ackedWithin sends a fresh frame on the first uplink and reports whether
// its signed ack came back within d.
func (p *probe) ackedWithin(d time.Duration) bool {
	p.send(time.Now().UnixMilli()/500*500, 1, 1)
	buf := make([]byte, 2048)
	p.conns[0].SetReadDeadline(time.Now().Add(d))
	for {
		n, err := p.conns[0].Read(buf)
		if err != nil {
			return false
		}
		if a, err := stationwire.OpenAck(p.key, buf[:n]); err == nil && a.GetSeq() == p.seq {
			return true
		}
	}
}

// ack waits for the ack of the last packet sent on uplink i.
func (p *probe) ack(i int) *stationv1.Ack {
	p.t.Helper()
	buf := make([]byte, 2048)
	p.conns[i].SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, err := p.conns[i].Read(buf)
		if err != nil {
			p.t.Fatalf("no ack: %v", err)
		}
		a, err := stationwire.OpenAck(p.key, buf[:n])
		if err != nil {
			p.t.Fatalf("ack does not verify: %v", err)
		}
		if a.GetSeq() == p.seq {
			return a
		}
	}
}

type rtsDoc struct {
	Station map[string]struct {
		PGA   float64 `json:"pga"`
		PGV   float64 `json:"pgv"`
		I     float64 `json:"i"`
		Disp  float64 `json:"I"`
		Alert int     `json:"alert"` // 1 when triggered, as the apps read it
	} `json:"station"`
	Box  map[string]int `json:"box"`
	Int  []struct{ Code, I int }
	Time int64 `json:"time"`
}

// nextBoundary waits until just after the next 500 ms boundary and returns
// it (Unix ms).
func nextBoundary() int64 { return boundaryPlus(5 * time.Millisecond) }

// boundaryPlus waits until lag after the next 500 ms boundary and returns
// the boundary (Unix ms).
func boundaryPlus(lag time.Duration) int64 {
	now := time.Now().UnixMilli()
	t := (now/500 + 1) * 500
	// The wall clock is what is waited for: a tick boundary, not a state.
	time.Sleep(time.Until(time.UnixMilli(t)) + lag) //nolint:forbidigo // aligns to the 500 ms boundary
	return t
}

// TestSliceStationToSSE is the first end-to-end slice: a station's signed
// packet goes over UDP to ingest (acked, signed), through RTS, and out of
// the edge's SSE stream within two ticks; SIGTERM then stops every process.
func TestSliceStationToSSE(t *testing.T) {
	d := startDev(t, "-stations", "3", "-simulate=false")
	edge := d.endpoints.get(t, "TPE-1", "edge", "http")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events := openSSE(ctx, t, edge+"/api/v2/trem/rts?sse=1")

	// The stream opens with the retry hint and the edge's name.
	first := <-events
	if first.name != "retry" || first.data != "3000" {
		t.Fatalf("first event %+v, want retry: 3000", first)
	}
	info := <-events
	if info.name != "info" || info.data != `{"location":"TPE-1"}` {
		t.Fatalf("second event %+v, want event: info with the location", info)
	}

	p := newProbe(t, d.stations[0], d.endpoints.get(t, "TNN-1", "ingest", "udp"), d.endpoints.get(t, "TYO-1", "ingest", "udp"))
	windowEnd := nextBoundary()
	p.send(windowEnd, 3.21, 12.5)
	for i, site := range []string{"TNN-1", "TYO-1"} {
		if ack := p.ack(i); ack.GetSite() != site || ack.GetStationId() != d.stations[0].ID {
			t.Fatalf("ack %v from uplink %d, want site %s", ack, i, site)
		}
	}

	// The value must be in the snapshot of its own tick or the next one.
	for {
		var ev sseEvent
		select {
		case ev = <-events:
		case <-ctx.Done():
			t.Fatal("value never appeared in the SSE stream")
		}
		if ev.comment || ev.name != "" {
			continue
		}
		var doc rtsDoc
		if err := json.Unmarshal([]byte(ev.data), &doc); err != nil {
			t.Fatalf("tick is not JSON: %v\n%s", err, ev.data)
		}
		if doc.Time%500 != 0 {
			t.Fatalf("tick time %d not on the 500 ms grid", doc.Time)
		}
		st, ok := doc.Station[d.stations[0].ID]
		if !ok {
			if doc.Time > windowEnd+500 {
				t.Fatalf("tick %d (frame ended %d) still lacks the station: more than two ticks", doc.Time, windowEnd)
			}
			continue
		}
		if st.I != 3.21 || st.PGA != 12.5 || st.Alert != 1 {
			t.Fatalf("station values %+v, want i=3.21 pga=12.5 alert", st)
		}
		if len(doc.Box) == 0 || len(doc.Int) == 0 {
			t.Fatalf("triggered station without box or int: %s", ev.data)
		}
		break
	}

	pids := d.endpoints.pids()
	if len(pids) < 5 {
		t.Fatalf("endpoints.json lists %d processes", len(pids))
	}
	took := d.stop(t)
	if took > 10*time.Second {
		t.Errorf("SIGTERM took %s to stop everything, want ≤ 10s", took)
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("shindo dev exit status %d after SIGTERM:\n%s", code, d.stderr.String())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d still running after shindo dev stopped", pid)
		}
	}
}

// TestSimulatedFleetValuesChange checks the default run: the simulated
// stations appear in the stream and their values change from tick to tick.
func TestSimulatedFleetValuesChange(t *testing.T) {
	d := startDev(t, "-stations", "20")
	edge := d.endpoints.get(t, "TPE-1", "edge", "http")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := openSSE(ctx, t, edge+"/api/v2/trem/rts?sse=1")
	var docs []rtsDoc
	for len(docs) < 4 {
		var ev sseEvent
		select {
		case ev = <-events:
		case <-ctx.Done():
			t.Fatalf("only %d ticks in 30s", len(docs))
		}
		if ev.name != "" || ev.comment {
			continue
		}
		var doc rtsDoc
		if err := json.Unmarshal([]byte(ev.data), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Station) == 20 {
			docs = append(docs, doc)
		}
	}
	for i := 1; i < len(docs); i++ {
		if docs[i].Time != docs[i-1].Time+500 {
			t.Errorf("ticks %d then %d: not consecutive", docs[i-1].Time, docs[i].Time)
		}
		changed := 0
		for id, v := range docs[i].Station {
			if v != docs[i-1].Station[id] {
				changed++
			}
		}
		if changed < 10 {
			t.Errorf("tick %d: only %d of 20 stations changed", docs[i].Time, changed)
		}
	}
	// The same snapshot over plain GET.
	code, body := httpGet(t, edge+"/api/v2/trem/rts")
	if code != 200 || !strings.Contains(body, `"station":{"SIM00001"`) {
		t.Fatalf("GET /api/v2/trem/rts: %d %s", code, body)
	}
}

// TestStationCommand runs `shindo station` as an operator would against the
// slice and reads its status endpoint.
func TestStationCommand(t *testing.T) {
	d := startDev(t, "-stations", "2", "-simulate=false")
	st := d.stations[1]
	status := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(filepath.Join(binDir(t), "shindo"), "station",
		"-id", st.ID, "-key-hex", st.KeyHex, "-key-id", fmt.Sprint(st.KeyID),
		"-primary", d.endpoints.get(t, "TNN-1", "ingest", "udp"), "-backup", d.endpoints.get(t, "TYO-1", "ingest", "udp"),
		"-status-addr", status)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	var doc struct {
		Stations int `json:"stations"`
		Uplinks  []struct {
			Name      string  `json:"name"`
			Transport string  `json:"transport"`
			SRTT      float64 `json:"srtt_ms"`
			Sent      uint64  `json:"sent"`
			Acked     uint64  `json:"acked"`
		} `json:"uplinks"`
	}
	if !poll.Within(20*time.Second, func() bool {
		resp, err := http.Get("http://" + status + "/status")
		if err != nil {
			return false
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		return len(doc.Uplinks) == 2 && doc.Uplinks[0].Acked >= 4 && doc.Uplinks[1].Acked >= 4
	}) {
		t.Fatalf("station not acked: %+v\n%s", doc, stderr.String())
	}
	u := doc.Uplinks[0]
	if doc.Stations != 1 || u.Name != "primary" || u.Transport != "udp" || u.SRTT <= 0 {
		t.Fatalf("status %+v", doc)
	}
	code, body := httpGet(t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/api/v2/trem/rts")
	if code != 200 || !strings.Contains(body, `"`+st.ID+`"`) {
		t.Fatalf("station missing from RTS: %d %s", code, body)
	}
	// Each core's data API reports the quality of both of the station's
	// links: the one to itself and the one to the other core.
	for _, site := range []string{"TNN-1", "TYO-1"} {
		code, body := httpGet(t, d.endpoints.get(t, site, "dataapi", "http")+"/v1/links?station_id="+st.ID)
		var links struct {
			Links []struct {
				StationID      string  `json:"station_id"`
				Site           string  `json:"site"`
				Transport      string  `json:"transport"`
				SRTT           float64 `json:"srtt_ms"`
				RecentAccepted string  `json:"recent_accepted"`
				LastSeen       string  `json:"last_seen_ms"`
			} `json:"links"`
		}
		if err := json.Unmarshal([]byte(body), &links); code != 200 || err != nil || len(links.Links) != 2 {
			t.Fatalf("%s /v1/links: %d %s %v", site, code, body, err)
		}
		for i, core := range []string{"TNN-1", "TYO-1"} {
			l := links.Links[i]
			if l.StationID != st.ID || l.Site != core || l.Transport != "TRANSPORT_UDP" || l.SRTT <= 0 || l.RecentAccepted == "0" {
				t.Fatalf("%s: link %d %+v, want the station's link to %s", site, i, l, core)
			}
		}
	}

	// A station with a wrong key is never acked and never shown.
	bad := exec.Command(filepath.Join(binDir(t), "shindo"), "station", "-id", d.stations[0].ID,
		"-key-hex", strings.Repeat("ab", 32), "-primary", d.endpoints.get(t, "TNN-1", "ingest", "udp"))
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { bad.Process.Kill(); bad.Wait() }()
	// Wait until ingest has counted several of its packets as bad MACs.
	poll.Until(t, 20*time.Second, "bad MACs counted", func() bool {
		code, body := httpGet(t, d.endpoints.get(t, "TNN-1", "ingest", "admin")+"/metrics")
		return code == 200 && metricValue(body, `shindo_ingest_packets_total{result="bad_mac",site="TNN-1",transport="udp"}`) >= 4
	})
	_, body = httpGet(t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/api/v2/trem/rts")
	if strings.Contains(body, `"`+d.stations[0].ID+`"`) {
		t.Fatal("forged station shown")
	}
}

func TestStationCommandBadFlags(t *testing.T) {
	shindo := filepath.Join(binDir(t), "shindo")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"station"}, "id is required"},
		{[]string{"station", "-id", "S", "-key-hex", "xyz", "-primary", "127.0.0.1:1"}, "key-hex must be"},
		{[]string{"station", "-id", "S", "-key-hex", strings.Repeat("00", 16), "-primary", "nowhere"}, `primary "nowhere"`},
		{[]string{"sim", "-primary", "127.0.0.1:1"}, "stations-file is required"},
		{[]string{"sim", "-primary", "127.0.0.1:1", "-stations-file", "/nonexistent.json"}, "stations file"},
		{[]string{"sim", "-primary", "127.0.0.1:1", "-stations-file", "/dev/null", "-scenario", "atlantis"}, "atlantis"},
	} {
		code, _, stderr := runCmd(t, nil, shindo, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// metricValue returns the value of the Prometheus series named exactly
// series in a /metrics page, or -1.
func metricValue(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

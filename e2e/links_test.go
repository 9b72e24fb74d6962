package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/stationwire"
	"shindo.dev/sdk/uplink"
)

// fleetUplink is an uplink of the fleet's GET /status.
type fleetUplink struct {
	Name          string `json:"name"`
	Transport     string `json:"transport"`
	Acked         uint64 `json:"acked"`
	Lost          uint64 `json:"lost"`
	Retransmitted uint64 `json:"retransmitted"`
}

// fleetUplinks reads the fleet's uplinks from its GET /status (zero
// values when it does not answer).
func fleetUplinks(statusURL string) (primary, backup fleetUplink) {
	var s struct{ Uplinks []fleetUplink }
	if resp, err := http.Get(statusURL); err == nil {
		json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
	}
	for _, u := range s.Uplinks {
		switch u.Name {
		case "primary":
			primary = u
		case "backup":
			backup = u
		}
	}
	return primary, backup
}

// waitFleetUplinks polls the fleet's uplinks until ok holds of them, or
// fails the test after timeout.
func waitFleetUplinks(t *testing.T, statusURL, what string, timeout time.Duration, ok func(p, b fleetUplink) bool) (fleetUplink, fleetUplink) {
	t.Helper()
	var p, b fleetUplink
	if !poll.Within(timeout, func() bool { p, b = fleetUplinks(statusURL); return ok(p, b) }) {
		t.Fatalf("timed out waiting for %s: primary %+v, backup %+v", what, p, b)
	}
	return p, b
}

// devLink is a link of shindo dev as endpoints.json and GET /v1/links
// show it.
type devLink struct {
	Name      string `json:"name"`
	Profile   string `json:"profile"`
	UDP       string `json:"udp"`
	WS        string `json:"ws"`
	TargetUDP string `json:"target_udp"`
	Stats     *struct {
		Forward struct {
			Datagrams uint64 `json:"datagrams"`
			Dropped   uint64 `json:"dropped"`
		} `json:"forward"`
	} `json:"stats"`
}

// TestLinks puts the simulated fleet's uplinks under shindo fault's link
// commands, as SPEC §8's "uplink degraded or cut" says they must be ridden
// out:
//   - cut uplink-TNN-1 (UDP and WebSocket blackholed both ways): the
//     primary uplink stops being acked and gives packets up, the backup
//     is acked throughout, and the SSE stream at an edge keeps every
//     station, tick after tick;
//   - heal: the primary is acked again and ends on UDP;
//   - degrade uplink-TYO-1 lossy: a station of the test's own, sending
//     through the link's address in endpoints.json, retransmits, and every
//     frame TYO-1 acked reaches its waveform service.
func TestLinks(t *testing.T) {
	d := startDev(t, "-stations", "5")
	var links map[string]devLink
	if err := json.Unmarshal(mustReadFile(t, filepath.Join(d.dir, "endpoints.json")), &struct {
		Links *map[string]devLink `json:"links"`
	}{&links}); err != nil {
		t.Fatal(err)
	}
	tnn, tyo := links["uplink-TNN-1"], links["uplink-TYO-1"]
	if tnn.Profile != "clear" || tnn.TargetUDP != d.endpoints.get(t, "TNN-1", "ingest", "udp") || tnn.UDP == tnn.TargetUDP ||
		!strings.HasPrefix(tyo.WS, "ws://") || links["intersite"].Profile != "clear" {
		t.Fatalf("links in endpoints.json: %+v", links)
	}
	var control string
	json.Unmarshal(d.endpoints["dev"]["control"], &control)
	liveLink := func(name string) devLink {
		t.Helper()
		_, body := httpGet(t, control+"/v1/links")
		var doc struct{ Links []devLink }
		json.Unmarshal([]byte(body), &doc)
		for _, l := range doc.Links {
			if l.Name == name && l.Stats != nil {
				return l
			}
		}
		t.Fatalf("GET /v1/links has no %s: %s", name, body)
		return devLink{}
	}

	statusURL := d.endpoints.fleetStatus(t)
	fleet := func() (primary, backup fleetUplink) { return fleetUplinks(statusURL) }
	waitFleet := func(what string, timeout time.Duration, ok func(p, b fleetUplink) bool) (fleetUplink, fleetUplink) {
		t.Helper()
		return waitFleetUplinks(t, statusURL, what, timeout, ok)
	}
	waitFleet("both uplinks acked", 20*time.Second, func(p, b fleetUplink) bool { return p.Acked >= 20 && b.Acked >= 20 })
	if l := liveLink("uplink-TNN-1"); l.Stats.Forward.Datagrams == 0 {
		t.Fatalf("the fleet's primary does not go through uplink-TNN-1: %+v", l)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rts := collect(openSSE(ctx, t, d.endpoints.get(t, "TPE-1", "edge", "http")+"/api/v2/trem/rts?sse=1"))
	rts.waitLast(t, 2)

	// Cut the primary uplink.
	fault(t, d, "cut", "uplink-TNN-1")
	cutAt := time.Now()
	p0, _ := fleet()
	p1, b1 := waitFleet("the primary giving packets up", 10*time.Second, func(p, _ fleetUplink) bool { return p.Lost >= p0.Lost+10 })
	// 5 stations, 4 packets a second each: 40 in two seconds.
	p2, _ := waitFleet("the backup acked on", 10*time.Second, func(_, b fleetUplink) bool { return b.Acked >= b1.Acked+40 })
	if p2.Acked != p1.Acked {
		t.Fatalf("primary acked through a cut link: %d, then %d", p1.Acked, p2.Acked)
	}
	if l := liveLink("uplink-TNN-1"); l.Profile != "cut" || l.Stats.Forward.Dropped == 0 {
		t.Fatalf("cut link: %+v", l)
	}
	// The edge's stream went on with every station through the cut.
	var during []sseEvent
	for _, ev := range rts.snapshot() {
		if ev.at.After(cutAt) {
			during = append(during, ev)
		}
	}
	cutFor := time.Since(cutAt)
	if len(during) < int(cutFor/(500*time.Millisecond))-2 {
		t.Fatalf("%d ticks in the %s of the cut", len(during), cutFor)
	}
	for _, ev := range during[len(during)/2:] {
		var snap struct {
			Station map[string]json.RawMessage `json:"station"`
		}
		if err := json.Unmarshal([]byte(ev.data), &snap); err != nil || len(snap.Station) != 5 {
			t.Fatalf("tick %s during the cut has %d stations (%v): %.200s", ev.id, len(snap.Station), err, ev.data)
		}
	}

	// Heal: the primary is acked again.
	fault(t, d, "heal", "uplink-TNN-1")
	waitFleet("the primary acked again", 15*time.Second, func(p, _ fleetUplink) bool { return p.Acked >= p2.Acked+20 })

	// A link that cannot be impaired, or does not exist, is refused by name.
	code, _, stderr := runCmd(t, nil, filepath.Join(binDir(t), "shindo"), "fault", "-dir", d.dir, "cut", "edge-TPE-1-TNN-1")
	if code != 1 || !strings.Contains(stderr, "not impairable on loopback yet") || !strings.Contains(stderr, "uplink-TNN-1, uplink-TYO-1, intersite") {
		t.Fatalf("cut an edge link: exit %d, %s", code, stderr)
	}

	// Degrade the backup uplink while a station of the test's own sends
	// through it.
	fault(t, d, "degrade", "uplink-TYO-1", "lossy")
	_, bLossy := fleet()
	var now map[string]devLink
	json.Unmarshal(mustReadFile(t, filepath.Join(d.dir, "endpoints.json")), &struct {
		Links *map[string]devLink `json:"links"`
	}{&now})
	if now["uplink-TYO-1"].Profile != "lossy" {
		t.Fatalf("endpoints.json after degrade: %+v", now["uplink-TYO-1"])
	}
	keyID, key := provisionStation(t, d, "LNK01")
	sent, missingOf := sendFrames(t, "LNK01", keyID, key, tyo.UDP,
		d.endpoints.get(t, "TYO-1", "waveform", "grpc"), d.endpoints.get(t, "TYO-1", "waveform", "admin"), 100)
	t.Logf("own station through lossy uplink-TYO-1: %+v", sent)
	if sent.Retransmitted == 0 || sent.Acked < sent.Sent*8/10 {
		t.Fatalf("the link was not lossy as configured, or far worse: %+v", sent)
	}
	if l := liveLink("uplink-TYO-1"); l.Profile != "lossy" || l.Stats.Forward.Dropped == 0 {
		t.Fatalf("lossy link: %+v", l)
	}
	_, b := fleet()
	if b.Retransmitted == bLossy.Retransmitted {
		t.Errorf("the fleet's backup retransmitted nothing through the lossy link: %+v", b)
	}
	missing := missingOf()
	if len(missing) > 0 {
		t.Fatalf("%d frames TYO-1 acked never reached its waveform service, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}

	// The primary, healed, ends on UDP (it may have gone to WebSocket as
	// the cut lifted).
	waitFleet("the primary on UDP", 25*time.Second, func(p, _ fleetUplink) bool { return p.Transport == "udp" && p.Acked > p2.Acked+40 })
	fault(t, d, "heal", "uplink-TYO-1")
}

// provisionStation creates station id through TNN-1's data API and waits
// until TYO-1 acks a packet signed with its key; it returns the key.
func provisionStation(t *testing.T, d *dev, id string) (uint32, []byte) {
	t.Helper()
	var tokenFile string
	json.Unmarshal(d.endpoints["dev"]["admin_token_file"], &tokenFile)
	token := strings.TrimSpace(string(mustReadFile(t, tokenFile)))
	b, _ := json.Marshal(map[string]any{"id": id, "name": "test station " + id, "lat": 23.0, "lon": 120.2, "code": 700})
	req, _ := http.NewRequest("POST", d.endpoints.get(t, "TNN-1", "dataapi", "http")+"/v1/stations", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Key struct {
			KeyHex string `json:"key_hex"`
			KeyID  uint32 `json:"key_id"`
		} `json:"key"`
	}
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	key, _ := hex.DecodeString(created.Key.KeyHex)
	if resp.StatusCode != http.StatusOK || len(key) == 0 {
		t.Fatalf("provision %s: %s", id, resp.Status)
	}
	addr, _ := net.ResolveUDPAddr("udp", d.endpoints.get(t, "TYO-1", "ingest", "udp"))
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	seq := uint64(time.Now().UnixMilli())
	buf := make([]byte, 2048)
	poll.Until(t, 15*time.Second, "TYO-1 acks the new station "+id, func() bool {
		seq++
		dg, _ := stationwire.Seal(key, created.Key.KeyID, &stationv1.Packet{StationId: id, Seq: seq, SentAtMs: time.Now().UnixMilli(),
			Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}})
		conn.Write(dg)
		conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := conn.Read(buf)
		if err != nil {
			return false
		}
		_, err = stationwire.OpenAck(key, buf[:n])
		return err == nil
	})
	return created.Key.KeyID, key
}

// sendFrames sends n sensor frames of station id to a core's ingest at udp
// (straight or through a link) with the station's own uplink code, while
// following the station's live waveform at that core's waveform service
// (gRPC address, admin URL). It returns the uplink's counters once every
// packet is settled, and a function that waits up to 10 s for every frame
// the core acked to reach the waveform service and returns the first
// sample times (Unix ms) of those that did not. Frames are 500 ms apart
// and sent every 70 ms, each within the 30 s of its send time that ingest
// allows, up to 14 a second.
func sendFrames(t *testing.T, id string, keyID uint32, key []byte, udp, waveformGRPC, waveformAdmin string, n int) (uplink.Stats, func() []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	gc, err := grpc.NewClient(waveformGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gc.Close() })
	live, err := waveformv1.NewWaveformServiceClient(gc).Live(ctx, &waveformv1.LiveRequest{StationIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	arrived := map[int64]bool{}
	go func() {
		for {
			r, err := live.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			arrived[r.GetChunk().GetFirstSampleMs()] = true
			mu.Unlock()
		}
	}()
	poll.Until(t, 10*time.Second, "the live subscription registered", func() bool {
		_, page := httpGet(t, waveformAdmin+"/metrics")
		return metricValue(page, "shindo_waveform_live_subscribers") >= 1
	})

	acked := map[uint64]bool{}
	up, err := uplink.Dial(uplink.Config{Name: "test", UDP: udp, OnAck: func(_ string, seq uint64) {
		mu.Lock()
		acked[seq] = true
		mu.Unlock()
	}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	go up.Run(ctx)
	t.Cleanup(up.Close)
	seq := uint64(time.Now().UnixMilli())
	link := up.Link(id, key, keyID, func() uint64 { seq++; return seq })
	base := time.Now().UnixMilli()/500*500 - int64(n)*500*2/5
	firstOf := map[uint64]int64{}
	for i := range int64(n) {
		seq++
		first := base + i*500
		mu.Lock()
		firstOf[seq] = first
		mu.Unlock()
		dg, err := link.Seal(&stationv1.Packet{StationId: id, Seq: seq, SentAtMs: time.Now().UnixMilli(),
			Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{FirstSampleMs: first, RateHz: 50, ScaleGal: 0.001,
				Ns: make([]int32, 25), Ew: make([]int32, 25), Ud: make([]int32, 25)}}})
		if err != nil {
			t.Fatal(err)
		}
		link.Transmit(seq, dg)
		time.Sleep(70 * time.Millisecond) //nolint:forbidigo // paces the frames, as documented above
	}
	if !poll.Within(10*time.Second, func() bool { s := link.Stats(); return s.Acked+s.Lost >= uint64(n) }) {
		t.Fatalf("packets unsettled: %+v", link.Stats())
	}
	return link.Stats(), func() []int64 {
		var missing []int64
		poll.Within(10*time.Second, func() bool {
			missing = nil
			mu.Lock()
			for sq := range acked {
				if !arrived[firstOf[sq]] {
					missing = append(missing, firstOf[sq])
				}
			}
			mu.Unlock()
			return len(missing) == 0
		})
		return missing
	}
}

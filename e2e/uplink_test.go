package e2e

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/faultproxy"
	"shindo.dev/devkit/poll"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

// stationStatus mirrors GET /status of shindo station.
type stationStatus struct {
	Uplinks []struct {
		Name                string  `json:"name"`
		Transport           string  `json:"transport"`
		SRTT                float64 `json:"srtt_ms"`
		ConsecutiveTimeouts int     `json:"consecutive_timeouts"`
		Sent                uint64  `json:"sent"`
		Acked               uint64  `json:"acked"`
		Retransmitted       uint64  `json:"retransmitted"`
		ProbesOK            int     `json:"probes_ok"`
		ToWS                uint64  `json:"switches_to_ws"`
		ToUDP               uint64  `json:"switches_to_udp"`
	} `json:"uplinks"`
}

func readStatus(t *testing.T, url string) stationStatus {
	t.Helper()
	var s stationStatus
	resp, err := http.Get(url)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&s)
	return s
}

func waitStatus(t *testing.T, url, what string, timeout time.Duration, ok func(stationStatus) bool) stationStatus {
	t.Helper()
	var s stationStatus
	if !poll.Within(timeout, func() bool { s = readStatus(t, url); return len(s.Uplinks) == 2 && ok(s) }) {
		t.Fatalf("timed out waiting for %s; status %+v", what, s)
	}
	return s
}

// hostOf strips a scheme and path from a URL, leaving host:port.
func hostOf(u string) string {
	u = u[strings.Index(u, "://")+3:]
	h, _, _ := strings.Cut(u, "/")
	return h
}

// testUplinkFailover runs `shindo station`, the first station of d, with
// its primary uplink through a fault-injecting proxy to TNN-1 and its
// backup straight to TYO-1: blackholing the primary's UDP moves that
// uplink (only) to the WebSocket, and healing it brings it back after
// three acked probes. trust are the station's flags to trust the cores'
// certificates: TestTLS runs it over wss://, the way a station of a
// production network falls back (plain ws:// fallbacks happen under
// TestChaos's uplink faults).
func testUplinkFailover(t *testing.T, d *dev, trust ...string) {
	t.Helper()
	udpProxy, err := faultproxy.ListenUDP("127.0.0.1:0", d.endpoints.get(t, "TNN-1", "ingest", "udp"), faultproxy.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer udpProxy.Close()
	// TCP passed through as it is, TLS or not: the station's wss:// URL
	// names the proxy at the address the core's certificate is for.
	ingestWS := d.endpoints.get(t, "TNN-1", "ingest", "ws")
	wsProxy, err := faultproxy.ListenTCP("127.0.0.1:0", hostOf(ingestWS), faultproxy.Options{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer wsProxy.Close()
	scheme, _, _ := strings.Cut(ingestWS, "://")

	st := d.stations[0]
	status := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(filepath.Join(binDir(t), "shindo"), "station",
		"-id", st.ID, "-key-hex", st.KeyHex, "-key-id", fmt.Sprint(st.KeyID),
		"-primary", udpProxy.Addr().String(), "-primary-ws", scheme+"://"+wsProxy.Addr().String()+"/v1/station/ws",
		"-backup", d.endpoints.get(t, "TYO-1", "ingest", "udp"), "-backup-ws", d.endpoints.get(t, "TYO-1", "ingest", "ws"),
		"-probe-interval", "1s", "-status-addr", status)
	cmd.Args = append(cmd.Args, trust...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	url := "http://" + status + "/status"

	s := waitStatus(t, url, "both uplinks acked on UDP", 20*time.Second, func(s stationStatus) bool {
		return s.Uplinks[0].Acked >= 4 && s.Uplinks[1].Acked >= 4
	})
	if s.Uplinks[0].Transport != "udp" || s.Uplinks[1].Transport != "udp" {
		t.Fatalf("start: %+v", s)
	}

	// Cut the primary's UDP path both ways.
	udpProxy.SetBoth(faultproxy.Impairment{Blackhole: true})
	s = waitStatus(t, url, "primary on WebSocket", 20*time.Second, func(s stationStatus) bool {
		return s.Uplinks[0].Transport == "ws"
	})
	if s.Uplinks[0].ToWS != 1 {
		t.Fatalf("switches to WebSocket: %+v", s.Uplinks[0])
	}
	acked := s.Uplinks[0].Acked
	s = waitStatus(t, url, "acks over the WebSocket", 10*time.Second, func(s stationStatus) bool {
		return s.Uplinks[0].Acked >= acked+4 && s.Uplinks[0].Transport == "ws"
	})
	if p := udpProxy.Stats().Upstream; p.DroppedBlackhole == 0 {
		t.Fatalf("no UDP probes tried the blackholed path: %+v", p)
	}
	if s.Uplinks[0].ProbesOK != 0 {
		t.Fatalf("probes acked through a blackhole: %+v", s.Uplinks[0])
	}

	// Heal: three acked probes, one a second here, bring it back.
	healed := time.Now()
	udpProxy.SetBoth(faultproxy.Impairment{})
	s = waitStatus(t, url, "primary back on UDP", 20*time.Second, func(s stationStatus) bool {
		return s.Uplinks[0].Transport == "udp"
	})
	if took := time.Since(healed); took < 2*time.Second {
		t.Errorf("back on UDP %s after healing: fewer than three probe intervals", took)
	}
	if u := s.Uplinks[0]; u.ToUDP != 1 || u.ProbesOK != 3 {
		t.Fatalf("primary at return: %+v", u)
	}
	if b := s.Uplinks[1]; b.ToWS != 0 || b.Transport != "udp" {
		t.Fatalf("backup disturbed: %+v", b)
	}
}

// TestNoAckedPacketLost sends sensor frames through a path losing 10 % of
// the datagrams each way with 100 ms of jitter, using the station's own
// uplink code, and checks that every frame whose ack the station saw reached
// the core's waveform service.
func TestNoAckedPacketLost(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	proxy, err := faultproxy.ListenUDP("127.0.0.1:0", d.endpoints.get(t, "TNN-1", "ingest", "udp"), faultproxy.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetBoth(faultproxy.Impairment{Drop: 0.10, Jitter: 100 * time.Millisecond})

	// A station's pace, compressed (sendFrames), through the lossy path,
	// with the core's live waveform of it followed.
	const n = 130
	st := d.stations[0]
	key, _ := hex.DecodeString(st.KeyHex)
	s, missingOf := sendFrames(t, st.ID, st.KeyID, key, proxy.Addr().String(),
		d.endpoints.get(t, "TNN-1", "waveform", "grpc"), d.endpoints.get(t, "TNN-1", "waveform", "admin"), n)
	t.Logf("station: %d sent, %d acked, %d retransmitted, %d unacked; proxy %+v", s.Sent, s.Acked, s.Retransmitted, s.Lost, proxy.Stats())
	if s.Retransmitted == 0 || s.Acked < n*8/10 {
		t.Fatalf("the path was not lossy as configured, or far worse: %+v", s)
	}
	if missing := missingOf(); len(missing) > 0 {
		t.Fatalf("%d acked frames never reached the core, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
}

// counters reads shindo_ingest_packets_total of one site and transport by
// result.
func counters(t *testing.T, admin, site string) map[string]float64 {
	t.Helper()
	_, page := httpGet(t, admin+"/metrics")
	out := map[string]float64{}
	for _, r := range []string{"accepted", "duplicate", "bad_mac", "replayed", "stale", "malformed", "oversize", "unknown_station"} {
		out[r] = metricValue(page, fmt.Sprintf(`shindo_ingest_packets_total{result=%q,site=%q,transport="udp"}`, r, site))
	}
	return out
}

func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if dv := v - before[k]; dv != 0 {
			out[k] = dv
		}
	}
	return out
}

// TestReplayProtection: a retransmission is acked again but processed once;
// a datagram replayed after the window or with a stale timestamp, and one
// with a bad MAC, get no ack and are counted by reason.
func TestReplayProtection(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	admin := d.endpoints.get(t, "TNN-1", "ingest", "admin")
	st := d.stations[0]
	key, _ := hex.DecodeString(st.KeyHex)
	addr, _ := net.ResolveUDPAddr("udp", d.endpoints.get(t, "TNN-1", "ingest", "udp"))
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	seal := func(k []byte, seq uint64, sentAt time.Time) []byte {
		b, err := stationwire.Seal(k, st.KeyID, &stationv1.Packet{StationId: st.ID, Seq: seq, SentAtMs: sentAt.UnixMilli(),
			Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: sentAt.UnixMilli() / 500 * 500}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	acked := func(b []byte) bool {
		conn.Write(b)
		buf := make([]byte, 2048)
		conn.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		n, err := conn.Read(buf)
		if err != nil {
			return false
		}
		_, err = stationwire.OpenAck(key, buf[:n])
		return err == nil
	}

	before := counters(t, admin, "TNN-1")
	seq := uint64(time.Now().UnixMilli())
	first := seal(key, seq, time.Now())
	if !acked(first) {
		t.Fatal("first transmission not acked")
	}
	if !acked(first) {
		t.Fatal("retransmission not acked again")
	}
	if !acked(seal(key, seq+5000, time.Now())) { // moves the window past seq
		t.Fatal("a new packet beyond the window not acked")
	}
	if acked(first) {
		t.Fatal("replay from before the window acked")
	}
	if acked(seal(key, seq+5001, time.Now().Add(-31*time.Second))) {
		t.Fatal("stale packet acked")
	}
	if acked(seal(bytes.Repeat([]byte{1}, 32), seq+5002, time.Now())) {
		t.Fatal("forged packet acked")
	}
	got := delta(counters(t, admin, "TNN-1"), before)
	want := map[string]float64{"accepted": 2, "duplicate": 1, "replayed": 1, "stale": 1, "bad_mac": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counters moved by %v, want %v", got, want)
	}
}

// TestFloodCountedByReason throws 100,000 bad datagrams of every kind at
// TNN-1 while simulated stations keep sending: each bad one is counted
// under its reason, and the stations keep being acked.
func TestFloodCountedByReason(t *testing.T) {
	d := startDev(t, "-stations", "10")
	admin := d.endpoints.get(t, "TNN-1", "ingest", "admin")
	waitFleet(t, d, func(f fleetStatus) bool { return len(f.Uplinks) == 2 && f.Uplinks[0].Acked > 100 })

	known := d.stations[0]
	good, _ := hex.DecodeString(known.KeyHex)
	stranger := make([]byte, 32)
	crand.Read(stranger)
	r := mrand(1)
	packet := func(id string, seq uint64) *stationv1.Packet {
		return &stationv1.Packet{StationId: id, Seq: seq, SentAtMs: time.Now().UnixMilli(),
			Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: 1}}}
	}
	valid, _ := stationwire.Seal(good, known.KeyID, packet(known.ID, 1))
	const total = 100_000
	kinds := map[string]int{}
	var datagrams [][]byte
	for i := range total {
		var b []byte
		switch i % 10 {
		case 0, 1, 2, 3: // random bytes
			b = make([]byte, 1+r.IntN(600))
			for j := range b {
				b[j] = byte(r.UintN(256))
			}
			kinds["random"]++
		case 4, 5: // a valid datagram cut short
			b = valid[:1+r.IntN(len(valid)-40)]
			kinds["truncated"]++
		case 6: // oversize
			b = bytes.Repeat([]byte{0x0a}, 1201+r.IntN(200))
			kinds["oversize"]++
		case 7, 8: // an unknown station, properly signed
			b, _ = stationwire.Seal(stranger, 1, packet(fmt.Sprintf("NOBODY%d", i), uint64(i)))
			kinds["unknown"]++
		case 9: // a known station, wrong key
			b, _ = stationwire.Seal(stranger, known.KeyID, packet(known.ID, uint64(i)))
			kinds["bad_mac"]++
		}
		datagrams = append(datagrams, b)
	}
	before := counters(t, admin, "TNN-1")
	ackedBefore := readFleet(t, d).Uplinks[0].Acked
	addr, _ := net.ResolveUDPAddr("udp", d.endpoints.get(t, "TNN-1", "ingest", "udp"))
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Paced at about 40,000 a second, within what the socket buffer holds
	// while the machine is not busy with more; what the kernel still drops
	// (a full receive buffer, the server behind on a loaded machine) it
	// counts at the socket, and the server's counts must make up the rest
	// exactly.
	dropsBefore, dropsKnown := udpDrops(t, addr.Port)
	unsent := 0
	for i, b := range datagrams {
		if _, err := conn.Write(b); err != nil {
			unsent++
		}
		if i%1000 == 999 {
			time.Sleep(25 * time.Millisecond) //nolint:forbidigo // paces the flood, as said above
		}
	}
	var got map[string]float64
	var kernel int64
	junk := func(m map[string]float64) float64 {
		return m["malformed"] + m["oversize"] + m["unknown_station"] + m["bad_mac"]
	}
	poll.Within(20*time.Second, func() bool {
		got = delta(counters(t, admin, "TNN-1"), before)
		if after, ok := udpDrops(t, addr.Port); ok && dropsKnown {
			kernel = after - dropsBefore
		}
		return junk(got)+float64(kernel+int64(unsent)) >= total
	})
	// Lost before the server: the kernel's drops may be of the real
	// stations' packets as well as of the flood's.
	lost := float64(kernel + int64(unsent))
	t.Logf("counted %v for %v; %d dropped by the kernel, %d not sent", got, kinds, kernel, unsent)
	if junk(got) > total || junk(got)+lost < total {
		t.Fatalf("%v bad datagrams counted, %d dropped by the kernel, %d not sent: want %d in all", junk(got), kernel, unsent, total)
	}
	// The kernel's drops may cover the real stations' packets too; more
	// than a few percent is no longer a test of the server's counting.
	if lost > total/50 {
		t.Fatalf("%v of %d datagrams dropped by the kernel or not sent: the flood is not paced for this machine", lost, total)
	}
	if got["oversize"] > float64(kinds["oversize"]) || got["oversize"] < float64(kinds["oversize"])-lost ||
		got["bad_mac"] < float64(kinds["bad_mac"])-lost || got["unknown_station"] < float64(kinds["unknown"])-lost ||
		got["malformed"] < float64(kinds["random"])*0.9-lost {
		t.Fatalf("reasons %v do not match what was sent %v", got, kinds)
	}
	// The real stations were acked all along.
	f := readFleet(t, d)
	if f.Uplinks[0].Acked <= ackedBefore || f.Uplinks[0].Lost > f.Uplinks[0].Sent/100 {
		t.Fatalf("stations suffered: %+v (acked before the flood %d)", f.Uplinks[0], ackedBefore)
	}
}

func mrand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

type fleetStatus struct {
	Uplinks []struct {
		Name  string `json:"name"`
		Sent  uint64 `json:"sent"`
		Acked uint64 `json:"acked"`
		Lost  uint64 `json:"lost"`
		// Retransmitted and Probes are datagrams on top of Sent.
		Retransmitted uint64 `json:"retransmitted"`
		Probes        uint64 `json:"probes"`
	} `json:"uplinks"`
}

func readFleet(t *testing.T, d *dev) fleetStatus {
	t.Helper()
	var s fleetStatus
	_, body := httpGet(t, d.endpoints.fleetStatus(t))
	json.Unmarshal([]byte(body), &s)
	return s
}

func waitFleet(t *testing.T, d *dev, ok func(fleetStatus) bool) fleetStatus {
	t.Helper()
	var f fleetStatus
	if !poll.Within(20*time.Second, func() bool { f = readFleet(t, d); return ok(f) }) {
		t.Fatalf("fleet status never as expected: %+v", f)
	}
	return f
}

// TestProvisioningAndKeyRotation: stations created, rotated and retired
// through the data API take effect at both cores' ingest without a
// restart; during a rotation both keys are accepted, after the overlap only
// the new one.
func TestProvisioningAndKeyRotation(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	var tokenFile string
	json.Unmarshal(d.endpoints["dev"]["admin_token_file"], &tokenFile)
	token := strings.TrimSpace(string(mustReadFile(t, tokenFile)))
	api := d.endpoints.get(t, "TNN-1", "dataapi", "http")
	cores := []string{d.endpoints.get(t, "TNN-1", "ingest", "udp"), d.endpoints.get(t, "TYO-1", "ingest", "udp")}

	post := func(path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", api+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %s %v", path, resp.Status, out)
		}
		return out
	}
	keyOf := func(m map[string]any) (uint32, []byte) {
		k := m["key"].(map[string]any)
		b, _ := hex.DecodeString(k["key_hex"].(string))
		return uint32(k["key_id"].(float64)), b
	}
	// acks reports whether both cores ack a fresh packet signed with key.
	seq := uint64(time.Now().UnixMilli())
	acks := func(id string, keyID uint32, key []byte) bool {
		seq++
		b, _ := stationwire.Seal(key, keyID, &stationv1.Packet{StationId: id, Seq: seq, SentAtMs: time.Now().UnixMilli(),
			Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}})
		for _, core := range cores {
			addr, _ := net.ResolveUDPAddr("udp", core)
			c, err := net.DialUDP("udp", nil, addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(b)
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			buf := make([]byte, 2048)
			n, err := c.Read(buf)
			c.Close()
			if err != nil {
				return false
			}
			if _, err := stationwire.OpenAck(key, buf[:n]); err != nil {
				return false
			}
		}
		return true
	}
	eventually := func(what string, cond func() bool) { t.Helper(); poll.Until(t, 15*time.Second, what, cond) }

	// A new station is picked up by both cores.
	created := post("/v1/stations", map[string]any{"id": "NEW01", "name": "new", "lat": 23.5, "lon": 121.0, "code": 981})
	id1, key1 := keyOf(created)
	eventually("both cores ack the new station", func() bool { return acks("NEW01", id1, key1) })

	// Rotation with a 3 s overlap: the new key works as soon as the cores
	// reload, the old one until the overlap ends.
	id2, key2 := keyOf(post("/v1/stations/NEW01:rotateKey", map[string]any{"overlap_seconds": 3}))
	rotated := time.Now()
	if id2 == id1 {
		t.Fatalf("rotation kept key ID %d", id1)
	}
	eventually("both cores ack the new key", func() bool { return acks("NEW01", id2, key2) })
	if time.Since(rotated) < 2*time.Second && !acks("NEW01", id1, key1) {
		t.Fatal("old key refused inside its overlap")
	}
	eventually("old key refused after the overlap", func() bool { return !acks("NEW01", id1, key1) })
	if time.Since(rotated) < 3*time.Second {
		t.Fatalf("old key refused after %s, before the 3 s overlap", time.Since(rotated))
	}
	if !acks("NEW01", id2, key2) {
		t.Fatal("new key refused")
	}

	// Retired: refused everywhere.
	req, _ := http.NewRequest("DELETE", api+"/v1/stations/NEW01", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("retire: %v %v", resp, err)
	}
	resp.Body.Close()
	eventually("retired station refused", func() bool { return !acks("NEW01", id2, key2) })
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProvisionCommand: `shindo provision` creates stations through a core's
// data API and writes keys both cores accept.
func TestProvisionCommand(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	var tokenFile string
	json.Unmarshal(d.endpoints["dev"]["admin_token_file"], &tokenFile)
	out := filepath.Join(t.TempDir(), "fleet.json")
	shindo := filepath.Join(binDir(t), "shindo")
	api := d.endpoints.get(t, "TYO-1", "dataapi", "http")
	if code, _, stderr := runCmd(t, nil, shindo, "provision", "-data-api", api, "-admin-token", "wrong-token-wrong-token", "-out", out); code != 1 || !strings.Contains(stderr, "401") {
		t.Fatalf("wrong token: exit %d, %s", code, stderr)
	}
	token := "SHINDO_PROVISION_ADMIN_TOKEN=" + strings.TrimSpace(string(mustReadFile(t, tokenFile)))
	// The dev fleet already holds SIM00001; ask for a second set elsewhere.
	code, stdout, stderr := runCmd(t, []string{token}, shindo, "provision", "-data-api", api, "-stations", "1", "-out", out)
	if code != 1 || !strings.Contains(stderr, "409") {
		t.Fatalf("existing IDs: exit %d, %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, []string{token}, shindo, "provision", "-data-api", api, "-stations", "3", "-id-prefix", "EXT", "-out", out)
	if code != 0 || !strings.Contains(stdout, "provisioned 3 stations") {
		t.Fatalf("provision: exit %d, %s %s", code, stdout, stderr)
	}
	var stations []devStation
	json.Unmarshal(mustReadFile(t, out), &stations)
	if len(stations) != 3 || stations[2].ID != "EXT00003" || stations[2].KeyHex == "" {
		t.Fatalf("provisioned %+v", stations)
	}
	// Both cores accept the issued keys, once their registries caught up.
	for i, core := range []string{"TNN-1", "TYO-1"} {
		p := newProbe(t, stations[2], d.endpoints.get(t, core, "ingest", "udp"))
		poll.Until(t, 15*time.Second, fmt.Sprintf("core %d acks the provisioned station", i), func() bool { return p.ackedWithin(300 * time.Millisecond) })
	}
}

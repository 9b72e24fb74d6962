package witness

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/stationwire"
)

// archive is an in-memory waveform archive that answers Query as
// svc-waveform does: one value per sample time, contiguous chunks of at
// most 60 s, a gap starting a new chunk.
type archive struct {
	mu        sync.Mutex
	samples   map[string]map[int64][3]int32 // station → sample time → ns, ew, ud
	intensity map[string]map[int64][3]float32
	scale     float32
}

func newArchive() *archive {
	return &archive{samples: map[string]map[int64][3]int32{}, intensity: map[string]map[int64][3]float32{}, scale: scaleGal}
}

func (a *archive) putSensor(station string, firstMs int64, ns, ew, ud []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.samples[station]
	if m == nil {
		m = map[int64][3]int32{}
		a.samples[station] = m
	}
	for i := range ns {
		t := firstMs + int64(i)*samplePeriod
		if _, ok := m[t]; !ok {
			m[t] = [3]int32{ns[i], ew[i], ud[i]}
		}
	}
}

func (a *archive) putIntensity(station string, endMs int64, in, pga, pgv float32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.intensity[station]
	if m == nil {
		m = map[int64][3]float32{}
		a.intensity[station] = m
	}
	if _, ok := m[endMs]; !ok {
		m[endMs] = [3]float32{in, pga, pgv}
	}
}

// putFrame stores the witness's frame as sent.
func (a *archive) putFrame(station string, k kind, ms int64) {
	if k == intensity {
		in, pga, pgv := intensityValues(station, ms)
		a.putIntensity(station, ms, in, pga, pgv)
		return
	}
	ns, ew, ud := sensorSamples(station, ms)
	a.putSensor(station, ms, ns, ew, ud)
}

func (a *archive) query(station string, start, end int64) *waveformv1.QueryResponse {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := &waveformv1.QueryResponse{}
	var times []int64
	for t := range a.samples[station] {
		if t >= start && t < end {
			times = append(times, t)
		}
	}
	slices.Sort(times)
	var c *waveformv1.Chunk
	for _, t := range times {
		if c == nil || t != c.FirstSampleMs+int64(len(c.Ns))*samplePeriod || len(c.Ns) == 3000 {
			c = &waveformv1.Chunk{StationId: station, FirstSampleMs: t, RateHz: rateHz, ScaleGal: a.scale}
			resp.Chunks = append(resp.Chunks, c)
		}
		v := a.samples[station][t]
		c.Ns, c.Ew, c.Ud = append(c.Ns, v[0]), append(c.Ew, v[1]), append(c.Ud, v[2])
	}
	var ends []int64
	for t := range a.intensity[station] {
		if t >= start && t < end {
			ends = append(ends, t)
		}
	}
	slices.Sort(ends)
	for _, t := range ends {
		v := a.intensity[station][t]
		resp.Intensity = append(resp.Intensity, &waveformv1.IntensitySample{WindowEndMs: t, Intensity: v[0], PgaGal: v[1], PgvCms: v[2]})
	}
	return resp
}

// waveformServer serves an archive's Query over gRPC.
type waveformServer struct {
	waveformv1.UnimplementedWaveformServiceServer
	a *archive
}

func (s waveformServer) Query(_ context.Context, req *waveformv1.QueryRequest) (*waveformv1.QueryResponse, error) {
	if req.GetEndMs()-req.GetStartMs() > 3_600_000 || req.GetEndMs() <= req.GetStartMs() {
		return nil, fmt.Errorf("window [%d, %d) refused", req.GetStartMs(), req.GetEndMs())
	}
	return s.a.query(req.GetStationId(), req.GetStartMs(), req.GetEndMs()), nil
}

func serveWaveform(t *testing.T, a *archive) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	waveformv1.RegisterWaveformServiceServer(srv, waveformServer{a: a})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// dataAPI is a data API that provisions stations: it issues keys, and
// for a station it already has answers 409 until the key is rotated.
type dataAPI struct {
	mu    sync.Mutex
	keys  map[string][]byte
	calls []string
}

func (d *dataAPI) key(id string) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.keys[id]
}

func serveDataAPI(t *testing.T, d *dataAPI, token string) string {
	t.Helper()
	issue := func(w http.ResponseWriter, id string, n byte) {
		key := make([]byte, 32)
		for i := range key {
			key[i] = byte(len(id)) + n + byte(i)
		}
		d.keys[id] = key
		json.NewEncoder(w).Encode(map[string]any{"key": map[string]any{"key_id": n, "key_hex": hex.EncodeToString(key)}})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, r.Method+" "+r.URL.Path)
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/v1/stations":
			var body struct{ ID string }
			json.NewDecoder(r.Body).Decode(&body)
			if _, ok := d.keys[body.ID]; ok {
				http.Error(w, "exists", http.StatusConflict)
				return
			}
			issue(w, body.ID, 1)
		case strings.HasSuffix(r.URL.Path, ":resetSeq"):
			w.Write([]byte("{}"))
		case strings.HasSuffix(r.URL.Path, ":rotateKey"):
			issue(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/stations/"), ":rotateKey"), 2)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// core is an ingest that verifies packets with the data API's keys, stores
// them in its archive and acks them; drop, if set, picks packets it acks
// without storing (an acked packet lost).
type core struct {
	conn *net.UDPConn
	a    *archive
	keys func(string) []byte
	drop func(*stationv1.Packet) bool
}

func serveCore(t *testing.T, a *archive, keys func(string) []byte, drop func(*stationv1.Packet) bool) string {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &core{conn: conn, a: a, keys: keys, drop: drop}
	go c.run()
	return conn.LocalAddr().String()
}

func (c *core) run() {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		d, err := stationwire.Open(buf[:n])
		if err != nil {
			continue
		}
		p, err := stationwire.Packet(d)
		if err != nil {
			continue
		}
		key := c.keys(p.GetStationId())
		if key == nil || !stationwire.Verify(key, d) {
			continue
		}
		if c.drop == nil || !c.drop(p) {
			if s := p.GetSensor(); s != nil {
				c.a.putSensor(p.GetStationId(), s.GetFirstSampleMs(), s.GetNs(), s.GetEw(), s.GetUd())
			}
			if f := p.GetIntensity(); f != nil {
				c.a.putIntensity(p.GetStationId(), f.GetWindowEndMs(), f.GetIntensity(), f.GetPgaGal(), f.GetPgvCms())
			}
		}
		ack, _ := stationwire.Seal(key, d.GetKeyId(), &stationv1.Ack{StationId: p.GetStationId(), Seq: p.GetSeq()})
		c.conn.WriteToUDP(ack, from)
	}
}

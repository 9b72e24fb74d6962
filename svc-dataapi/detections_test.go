package dataapi

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/natsbus"
)

// core is one core's NATS server with the DETECTIONS stream, as svc-rts
// creates it, and a publisher playing svc-rts.
type core struct {
	site string
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
}

func startCore(t *testing.T, site string) *core {
	t.Helper()
	srv, err := server.NewServer(&server.Options{ServerName: site, Host: "127.0.0.1", Port: -1, JetStream: true,
		JetStreamDomain: site[:3], StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, natsbus.Detections.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	return &core{site: site, srv: srv, nc: nc, js: js}
}

func (c *core) snapshot(t *testing.T, timeMs int64, areas map[uint32]uint32) {
	t.Helper()
	s := &rtsv1.Snapshot{TimeMs: timeMs, Site: c.site}
	for code, level := range areas {
		s.Areas = append(s.Areas, &rtsv1.AreaLevel{Code: code, Level: level})
	}
	msg, err := natsbus.Snapshots.Msg(t.Context(), c.site, &natsbusv1.SnapshotPublished{Snapshot: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	c.nc.Flush()
}

func (c *core) detection(t *testing.T, d *rtsv1.Detection) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := natsbus.Detections.Msg(ctx, c.site, &natsbusv1.DetectionPublished{Detection: d})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(fmt.Sprintf("%s:%d", d.Id, d.Serial))); err != nil {
		t.Fatal(err)
	}
}

// TestDetectionsToReports: each core's data API consumes its core's
// detections into the one database; a final detection becomes a report
// whose areas are the union of what both cores saw, written by both in any
// order without conflict.
func TestDetectionsToReports(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	tnn, tyo := startCore(t, "TNN-1"), startCore(t, "TYO-1")

	const first = int64(1712102289000)
	det := &rtsv1.Detection{Id: fmt.Sprint(first) + "-18", Serial: 1, OriginTimeMs: first - 8000, Lat: 23.7712, Lon: 121.6667,
		DepthKm: 10, Magnitude: 7.23, Location: "Hualien City", LocationCode: 970, MaxLevel: 5,
		FirstTriggerMs: first, UpdatedMs: first, Stations: 3}
	// Published before the data API runs: the durable consumer starts
	// from the beginning of the stream. Malformed messages in between are
	// dropped without stopping the rest: garbage, and a bare detection as
	// svc-rts stored them before natsbus, still in a stream after an
	// upgrade.
	tnn.detection(t, det)
	bare, _ := proto.Marshal(det)
	for _, b := range [][]byte{{0xff, 0xff}, bare} {
		if _, err := tnn.js.Publish(context.Background(), natsbus.Detections.Subject("TNN-1"), b); err != nil {
			t.Fatal(err)
		}
	}
	base := start(t, testConfig(t, "-database-url", dsn, "-nats", tnn.srv.ClientURL()))
	poll.Until(t, 10*time.Second, "the first detection", func() bool {
		return do(t, "GET", base+"/v1/detections/"+det.Id, "", nil).code == 200
	})

	tnn.snapshot(t, first, map[uint32]uint32{970: 5})
	tnn.snapshot(t, first+500, map[uint32]uint32{970: 7, 260: 4})
	tnn.snapshot(t, first-60_000, map[uint32]uint32{100: 9}) // before the event: not its shaking
	final := proto.Clone(det).(*rtsv1.Detection)
	final.Serial, final.Final, final.MaxLevel, final.UpdatedMs = 3, true, 7, first+12_000
	tnn.detection(t, final)
	older := proto.Clone(det).(*rtsv1.Detection)
	older.Serial = 2
	tnn.detection(t, older) // late and older: ignored

	reportID := "113000-2024-0403-075809-18"
	var rep map[string]any
	poll.Until(t, 10*time.Second, "the report", func() bool {
		a := do(t, "GET", base+"/v1/reports/"+reportID, "", nil)
		if a.code == 200 {
			rep = a.json(t)["report"].(map[string]any)
		}
		return a.code == 200
	})
	if rep["lat"] != 23.77 || rep["lon"] != 121.67 || rep["magnitude"] != 7.2 || rep["location"] != "花蓮縣政府南南東方 25.1 公里 (位於花蓮縣近海)" ||
		rep["trem_ms"] != fmt.Sprint(first) || rep["source_detection_id"] != det.Id || rep["max_level"] != float64(7) ||
		fmt.Sprint(rep["areas"]) != "[map[code:260 level:4] map[code:970 level:7]]" {
		t.Fatalf("report %v", rep)
	}
	a := do(t, "GET", base+"/v1/detections/"+det.Id, "", nil)
	if d := a.json(t)["detection"].(map[string]any); d["serial"] != float64(3) || d["final"] != true {
		t.Fatalf("detection %v", d)
	}

	// The other core saw another part of the shaking; its data API
	// merges into the same report.
	base2 := start(t, testConfig(t, "-database-url", dsn, "-nats", tyo.srv.ClientURL(), "-site", "TYO-1"))
	tyo.snapshot(t, first+1000, map[uint32]uint32{970: 6, 100: 3})
	tyo.detection(t, det)
	tyo.detection(t, final)
	poll.Until(t, 10*time.Second, "the merged report", func() bool {
		a := do(t, "GET", base2+"/v1/reports/"+reportID, "", nil)
		return a.code == 200 && fmt.Sprint(a.json(t)["report"].(map[string]any)["areas"]) ==
			"[map[code:100 level:3] map[code:260 level:4] map[code:970 level:7]]"
	})
	a = do(t, "GET", base+"/api/v2/eq/report", "", nil)
	if a.code != 200 || len(jsonArray(t, a.body)) != 1 {
		t.Fatalf("one report for the one event: %s", a.body)
	}
}

func jsonArray(t *testing.T, b []byte) []any {
	t.Helper()
	var v []any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

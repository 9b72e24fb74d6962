package dataapi

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/seismo/mseed"
)

// TestFDSNDataselectFromFiles: a data API that shares svc-waveform's disk
// (-waveform-dir) answers fdsnws-dataselect byte for byte as one that
// takes everything over the Export stream — over windows that cut records,
// cross hours and hold a gap — and copies the stored records from the day
// files itself (its file bytes counter).
func TestFDSNDataselectFromFiles(t *testing.T) {
	// Not parallel: see TestProvisioning.
	dataDir := t.TempDir()
	archiveAddr := freeaddr.TCP(t)
	archive := startArchive(t, archiveAddr, "-data-dir", dataDir, "-flush-age", "1s")
	reg := filepath.Join(t.TempDir(), "stations.json")
	doc := `[{"id":"HUA-01","name":"Hualien","net":"SIM","lat":23.99,"lon":121.61,"code":970,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`
	if err := os.WriteFile(reg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two hours and a half, a minute's gap in them, ending an hour ago.
	from := time.Now().Add(-210*time.Minute).Truncate(time.Hour).UnixMilli() + 17*60_000
	archive.ingest(t, "HUA-01", from, from+70*60_000)
	archive.ingest(t, "HUA-01", from+71*60_000, from+150*60_000)
	_, size := dayFiles(t, dataDir, 3) // 6 when the window crosses midnight
	streamCfg := testConfig(t, "-registry", reg, "-waveform", archiveAddr)
	filesCfg := testConfig(t, "-registry", reg, "-waveform", archiveAddr, "-waveform-dir", dataDir)
	stream, files := start(t, streamCfg), start(t, filesCfg)

	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000") }
	for _, w := range [][2]int64{
		{from, from + 150*60_000},
		{from + 1_234, from + 149*60_000 + 7},      // cut at both ends
		{from + 69*60_000 + 10, from + 73*60_000},  // around the gap
		{from + 43*60_000, from + 43*60_000 + 500}, // inside one record or two
	} {
		q := fmt.Sprintf("/fdsnws/dataselect/1/query?net=*&sta=*&cha=BN?&start=%s&end=%s", at(w[0]), at(w[1]))
		want, got := do(t, "GET", stream+q, "", nil), do(t, "GET", files+q, "", nil)
		if want.code != 200 || got.code != 200 || !bytes.Equal(got.body, want.body) {
			t.Errorf("%s: from the files %d, %d bytes; over the stream %d, %d bytes", q, got.code, len(got.body), want.code, len(want.body))
			continue
		}
		recs, err := mseed.ReadAll(bytes.NewReader(got.body))
		if err != nil || len(recs) == 0 {
			t.Errorf("%s: %d records, %v", q, len(recs), err)
		}
	}
	metrics := do(t, "GET", "http://"+filesCfg.AdminAddr+"/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^shindo_fdsn_dataselect_file_bytes_total (\S+)$`).FindSubmatch(metrics.body)
	if m == nil {
		t.Fatal("no shindo_fdsn_dataselect_file_bytes_total")
	}
	if n, _ := strconv.ParseFloat(string(m[1]), 64); n < float64(size)/2 {
		t.Errorf("%.0f bytes copied from the day files, of answers of some %d: the stored records came over the stream", n, size)
	}
}

package dataapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/metadb"
	"shindo.dev/svc-dataapi/internal/httpapi"
)

// benchConcurrency is the number of clients sending at once.
const benchConcurrency = 16

// BenchmarkReportList measures GET /v1/reports (a page of 50 of 2,000
// reports, filtered by magnitude) through the whole data API — guard,
// ETag, grpc-gateway, protojson — against a bare net/http handler doing
// the same two queries (the version counters, then the page) with pgx and
// encoding/json, in the same run on the same database. "cached" sends the
// ETag of a previous answer, so both answer 304 after the version read.
// Rate limits are off. Each reports requests per second and the 99th
// percentile latency over benchConcurrency concurrent clients.
//
//	cd svc-dataapi && go test -run XXX -bench BenchmarkReportList -benchtime 20000x .
func BenchmarkReportList(b *testing.B) {
	dsn := pgtest.Shared(b).NewDatabase(b)
	cfg := benchConfig(b, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() { cancel(); <-done }()
	gateway := "http://" + cfg.HTTPAddr
	waitReady(b, gateway)

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	store := metadb.NewStore(pool)
	for i := range 2000 {
		r := metadb.Report{ID: fmt.Sprintf("113000-2024-%06d", i), TimeMs: 1_700_000_000_000 + int64(i)*60_000,
			Lat: 22 + float64(i%300)/100, Lon: 120 + float64(i%200)/100, DepthKm: float64(i % 50), Magnitude: float64(i%70) / 10,
			Location: "花蓮縣政府南南東方 25.0 公里", MaxLevel: i % 10}
		if _, _, err := store.CreateReport(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	bare := httptest.NewServer(bareHandler(store))
	defer bare.Close()

	const query = "/v1/reports?min_magnitude=1&page_size=50"
	for _, target := range []struct{ name, base string }{{"gateway", gateway}, {"bare", bare.URL}} {
		for _, cached := range []bool{false, true} {
			name := target.name + "/uncached"
			if cached {
				name = target.name + "/cached"
			}
			b.Run(name, func(b *testing.B) { load(b, target.base+query, cached) })
		}
	}
}

func benchConfig(b *testing.B, dsn string) Config {
	cfg := DefaultConfig()
	cfg.Common.Site, cfg.Common.LogFormat, cfg.Common.LogLevel = "TNN-1", "json", "error"
	cfg.Common.ShutdownTimeout, cfg.Common.DependencyWait = 3*time.Second, 5*time.Second
	for _, a := range []*string{&cfg.GRPCAddr, &cfg.AdminAddr, &cfg.HTTPAddr} {
		*a = freeaddr.TCP(b)
	}
	cfg.DatabaseURL, cfg.RegistryInterval, cfg.DBTimeout = dsn, 5*time.Second, 5*time.Second
	cfg.RateLimitAddr, cfg.RateBurstAddr, cfg.RateLimitKey, cfg.RateBurstKey, cfg.RateBuckets = 0, 1, 0, 1, 1000
	cfg.MaxBody = 65536
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

func waitReady(b *testing.B, base string) {
	poll.Until(b, 15*time.Second, "the data API ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// load sends b.N GETs of u from benchConcurrency clients and reports
// requests per second and p99 latency.
func load(b *testing.B, u string, cached bool) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency}}
	first, err := client.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, first.Body)
	first.Body.Close()
	tag := first.Header.Get("ETag")
	if first.StatusCode != 200 || tag == "" {
		b.Fatalf("%s: %d, ETag %q", u, first.StatusCode, tag)
	}
	want := 200
	if cached {
		want = 304
	}
	lat := make([]time.Duration, b.N)
	var next sync.Mutex
	i := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for {
				next.Lock()
				n := i
				i++
				next.Unlock()
				if n >= b.N {
					return
				}
				req, _ := http.NewRequest("GET", u, nil)
				if cached {
					req.Header.Set("If-None-Match", tag)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[n] = time.Since(t0)
				if resp.StatusCode != want {
					b.Errorf("status %d, want %d", resp.StatusCode, want)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// bareHandler is the baseline: the same list with pgx and encoding/json,
// tagged the same way, without the gateway, the guard or protojson.
func bareHandler(store *metadb.Store) http.Handler {
	type report struct {
		ID        string  `json:"id"`
		TimeMs    string  `json:"time_ms"`
		Lat       float64 `json:"lat"`
		Lon       float64 `json:"lon"`
		DepthKm   float64 `json:"depth_km"`
		Magnitude float64 `json:"magnitude"`
		Location  string  `json:"location"`
		MaxLevel  int     `json:"max_level"`
		MD5       string  `json:"md5"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		v, err := store.DataVersions(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		h := sha256.New()
		binary.Write(h, binary.BigEndian, v.Reports)
		h.Write([]byte(r.URL.Path + "\x00" + httpapi.CanonicalQuery(r.URL.RawQuery)))
		tag := `"v` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:15]) + `"`
		if httpapi.MatchETag(r.Header.Get("If-None-Match"), tag) {
			w.Header().Set("ETag", tag)
			w.WriteHeader(304)
			return
		}
		mag := 1.0
		list, err := store.ListReports(ctx, metadb.ReportFilter{MinMagnitude: &mag, Limit: 51})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := struct {
			Reports       []report `json:"reports"`
			NextPageToken string   `json:"next_page_token"`
		}{Reports: make([]report, 0, 50)}
		for i, rep := range list {
			if i == 50 {
				out.NextPageToken = rep.ID
				break
			}
			out.Reports = append(out.Reports, report{rep.ID, fmt.Sprint(rep.TimeMs), rep.Lat, rep.Lon, rep.DepthKm, rep.Magnitude, rep.Location, rep.MaxLevel, rep.MD5})
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", tag)
		json.NewEncoder(w).Encode(out)
	})
}

// BenchmarkDataselectDay streams one day of one station's three 50 Hz
// channels (BN?) as miniSEED through fdsnws-dataselect — the data API's
// handler, gRPC Export, a real svc-waveform reading its SDS day files —
// and reports MB/s and the time to the first byte; the baselines, in the
// same run, are cat of the same day files (warm in the page cache, as the
// archive's are) to /dev/null and into a pipe this process reads.
//
//	cd svc-dataapi && go test -run '^$' -bench BenchmarkDataselectDay -benchtime 5x .
func BenchmarkDataselectDay(b *testing.B) {
	dataDir := b.TempDir()
	archiveAddr := freeaddr.TCP(b)
	archive := startArchive(b, archiveAddr, "-data-dir", dataDir, "-flush-age", "1s")
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	reg := filepath.Join(b.TempDir(), "stations.json")
	doc := `[{"id":"HUA-01","name":"Hualien","net":"SIM","lat":23.99,"lon":121.61,"code":970,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`
	if err := os.WriteFile(reg, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	archive.ingest(b, "HUA-01", day.UnixMilli(), day.Add(24*time.Hour).UnixMilli())
	b.Logf("one day ingested in %v", time.Since(began).Round(time.Second))
	base := start(b, testConfig(b, "-registry", reg, "-waveform", archiveAddr))
	// The same, sharing the archive's disk: stored records go from the day
	// files to the client without crossing the stream.
	baseFiles := start(b, testConfig(b, "-registry", reg, "-waveform", archiveAddr, "-waveform-dir", dataDir))

	files, size := dayFiles(b, dataDir, 3)
	if len(files) != 3 {
		b.Fatalf("BN? day files: %v", files)
	}
	query := fmt.Sprintf("/fdsnws/dataselect/1/query?net=*&sta=*&cha=BN?&start=%s&end=%s",
		day.Format("2006-01-02T15:04:05"), day.Add(24*time.Hour).Format("2006-01-02T15:04:05"))
	for _, bc := range []struct{ name, url string }{{"dataselect", base + query}, {"dataselect-files", baseFiles + query}} {
		b.Run(bc.name, func(b *testing.B) { dataselectDay(b, bc.url) })
	}
	// The ceiling of any HTTP answer on this machine: a bare net/http
	// server sending the same three files to the same client, with
	// sendfile (a Content-Length) — no selection, no archive.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				panic(err)
			}
			io.Copy(w, f)
			f.Close()
		}
	}))
	defer bare.Close()
	b.Run("http-sendfile", func(b *testing.B) { dataselectDay(b, bare.URL) })
	// cat streaming the files to this process, which reads them as
	// dataselectDay reads an answer (io.Copy to io.Discard): the same bytes
	// handed from one process to another, as dataselect does, without a
	// network.
	b.Run("cat-pipe", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("cat", files...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, out)
			if err != nil || n != size {
				b.Fatalf("cat | this process: %d of %d bytes, %v", n, size, err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatalf("cat: %v", err)
			}
		}
		b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(size)/1e6, "MB/day")
	})
	b.Run("cat", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("sh", "-c", `cat "$@" > /dev/null`, "cat")
			cmd.Args = append(cmd.Args, files...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("cat: %v %s", err, out)
			}
		}
		b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(size)/1e6, "MB/day")
	})
}

// dataselectDay times GETs of url, reading each answer whole.
func dataselectDay(b *testing.B, url string) {
	var total int64
	var ttfb time.Duration
	for b.Loop() {
		t0 := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		n, err := resp.Body.Read(buf)
		ttfb += time.Since(t0)
		rest, err2 := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (err != nil && err != io.EOF) || err2 != nil {
			b.Fatalf("dataselect: %d %v %v", resp.StatusCode, err, err2)
		}
		total += int64(n) + rest
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(ttfb.Milliseconds())/float64(b.N), "ttfb-ms")
	b.ReportMetric(float64(total)/float64(b.N)/1e6, "MB/day")
}

package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"shindo.dev/lib/timesync"
)

// BenchmarkTimeSyncHTTP serves GET /ntp and GET /v1/time over loopback
// HTTP/1.1 keep-alive connections to 64 concurrent clients, beside a
// baseline handler that writes one byte — same server setup, same clients,
// same run — so the time endpoints' own cost shows apart from net/http's
// and the machine's. The clients run in the same process, on the same two
// cores.
//
//	cd svc-edge && go test -run '^$' -bench TimeSyncHTTP -benchtime 200000x .
func BenchmarkTimeSyncHTTP(b *testing.B) {
	for _, tt := range []struct {
		name, path string
		h          http.HandlerFunc
	}{
		{"baseline", "/", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("1")) }},
		{"ntp", "/ntp", timesync.ServeNTP},
		{"v1-time", "/v1/time", serveTime},
	} {
		b.Run(tt.name, func(b *testing.B) {
			srv := httptest.NewServer(tt.h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			url := srv.URL + tt.path
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("%s: %s", tt.path, resp.Status)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

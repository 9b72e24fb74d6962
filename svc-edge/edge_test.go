package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shindo.dev/lib/timesync"
)

func TestParseStreamQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query         string
		sse, compress bool
		wantErr       bool
	}{
		{"", false, false, false},
		{"sse=1", true, false, false},
		{"sse=1&compress=1", true, true, false},
		{"sse=0&compress=0&_=123", false, false, false}, // cache-busters are ignored
		{"sse=yes", false, false, true},
		{"sse=1&sse=1", false, false, true},
		{"compress=2", false, false, true},
		{"sse=%zz", false, false, false}, // undecodable pairs are dropped by net/url
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/api/v2/trem/rts?"+tt.query, nil)
		q, err := parseStreamQuery(r)
		if (err != nil) != tt.wantErr || (err == nil && (q.sse != tt.sse || q.compress != tt.compress)) {
			t.Errorf("%q: %+v, %v", tt.query, q, err)
		}
	}
}

func FuzzParseStreamQuery(f *testing.F) {
	f.Add("sse=1&compress=1")
	f.Add("sse=1&sse=0")
	f.Add("%00=%ff&sse=")
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest("GET", "/api/v2/trem/rts", nil)
		r.URL.RawQuery = query
		q, err := parseStreamQuery(r)
		if err != nil && (q.sse && q.compress) {
			t.Fatal("error with a complete result")
		}
	})
}

func TestTimeEndpoints(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(timesync.ServeNTP))
	defer srv.Close()
	s, err := timesync.Best(context.Background(), srv.Client(), srv.URL, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.Offset > s.RTT || s.Offset < -s.RTT-time.Millisecond {
		t.Fatalf("same clock, offset %v with rtt %v", s.Offset, s.RTT)
	}
	rec := httptest.NewRecorder()
	timesync.ServeNTP(rec, httptest.NewRequest("GET", "/ntp", nil))
	body, _ := strconv.ParseInt(rec.Body.String(), 10, 64)
	t3, err := timesync.ParseMs(rec.Header().Get(timesync.HeaderTransmit))
	if err != nil || body != t3.UnixMilli() {
		t.Fatalf("body %q vs X-NTP-T3 %q", rec.Body.String(), rec.Header().Get(timesync.HeaderTransmit))
	}

	rec = httptest.NewRecorder()
	serveTime(rec, httptest.NewRequest("GET", "/v1/time", nil))
	var doc struct {
		Receive  float64 `json:"receive_ms"`
		Transmit float64 `json:"transmit_ms"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Receive <= 1e12 || doc.Transmit < doc.Receive {
		t.Fatalf("/v1/time %s: %v", rec.Body.String(), err)
	}
}

func BenchmarkNTP(b *testing.B) {
	req := httptest.NewRequest("GET", "/ntp", nil)
	b.ReportAllocs()
	for b.Loop() {
		timesync.ServeNTP(httptest.NewRecorder(), req)
	}
}

// FuzzParseTopics: /v1/stream's topics= never panics; what it accepts is
// public topics only, something at least, and an error echoes at most a
// bounded piece of what was sent.
func FuzzParseTopics(f *testing.F) {
	f.Add("rts,eew,report,notify", true)
	f.Add("rts, intensity ,lpgm", false)
	f.Add("report", false)
	f.Add(",,,", true)
	f.Add("rts,"+strings.Repeat("x", 5000), true)
	f.Add("\xff\xfe,rts", true)
	f.Add("notify", false)
	f.Fuzz(func(t *testing.T, topics string, reports bool) {
		want, notifications, err := parseTopics(topics, reports)
		if err != nil {
			if len(err.Error()) > 512 { // 64 bytes quoted: at most 4 each
				t.Fatalf("error of %d bytes: %q", len(err.Error()), err)
			}
			return
		}
		if len(want) == 0 && !notifications {
			t.Fatal("accepted with nothing to stream")
		}
		for topic := range want {
			if !streamTopics[topic] || topic == topicNotify || topic == topicReport && !reports {
				t.Fatalf("topic %q granted", topic)
			}
			if !slices.ContainsFunc(strings.Split(topics, ","), func(p string) bool { return strings.TrimSpace(p) == topic }) {
				t.Fatalf("topic %q not asked for in %q", topic, topics)
			}
		}
	})
}

// FuzzParseTremTopics: /api/v1/trem/sse's topics= and mode= never panic;
// what is granted is TREM topics asked for, once each, at most
// maxTremTopics named in all, and the hub topics follow the mode.
func FuzzParseTremTopics(f *testing.F) {
	f.Add("trem.rts.v1,trem.intensity.v1", "live")
	f.Add("trem.rts.v1,trem.rts.v1,x,y", "")
	f.Add("trem.rts.v1", "asleep")
	f.Add(strings.Repeat("a,", 40)+"trem.rts.v1", "")
	f.Add(" trem.intensity.v1 ,", "live")
	f.Fuzz(func(t *testing.T, topics, mode string) {
		want, granted, denied, err := parseTremTopics(topics, mode)
		if err != nil {
			return
		}
		if mode != "" && mode != "live" {
			t.Fatalf("mode %q accepted", mode)
		}
		if len(granted) == 0 || len(granted)+len(denied) > maxTremTopics {
			t.Fatalf("%d granted, %d denied", len(granted), len(denied))
		}
		for i, name := range granted {
			tt, ok := tremTopics[name]
			if !ok || slices.Contains(granted[:i], name) {
				t.Fatalf("granted %q", name)
			}
			hub := tt.asleep
			if mode == "live" {
				hub = tt.live
			}
			if !want[hub] {
				t.Fatalf("granted %q without its hub topic %q", name, hub)
			}
		}
		for name := range denied {
			if _, ok := tremTopics[name]; ok {
				t.Fatalf("denied %q, a TREM topic", name)
			}
		}
	})
}

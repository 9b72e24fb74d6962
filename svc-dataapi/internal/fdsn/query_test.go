package fdsn

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// station is a spec like fdsnws-station's, enough to exercise each kind.
var station = &Spec{Params: append(Common("xml", "text"),
	Param{Name: "minlatitude", Aliases: []string{"minlat"}, Kind: Float, Min: -90, Max: 90},
	Param{Name: "limit", Kind: Int, Min: 1, Max: 1e6},
	Param{Name: "level", Kind: Enum, Options: []string{"network", "station", "channel", "response"}, Default: "station"},
	Param{Name: "includerestricted", Kind: Bool, Default: "true"},
	Param{Name: "eventid", Kind: Text},
)}

func TestParseQuery(t *testing.T) {
	t.Parallel()
	// As ObsPy (long names, six fractional digits) and seisplotjs (short
	// names, three digits, level first) send them.
	for _, raw := range []string{
		"network=SH&station=00001&location=--&channel=BN%3F&starttime=2026-12-01T00:00:00.000000&endtime=2026-12-02T00:00:00.000000&level=channel&format=xml",
		"level=channel&net=SH&sta=00001&loc=--&cha=BN?&starttime=2026-12-01T00:00:00.000&endtime=2026-12-02T00:00:00.000",
		"NET=sh&STA=00001&LOC=&CHA=bn?&START=2026-12-01&END=2026-12-02T00:00:00Z&LEVEL=Channel",
	} {
		v, _ := url.ParseQuery(raw)
		q, err := station.ParseQuery(v)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if id := q.Text("eventid"); len(id) > 256 || strings.TrimSpace(id) != id {
			t.Fatalf("%q: eventid %q not bounded and trimmed", raw, id)
		}
		sel := q.Selection()
		if !slices.Equal(sel.Network, []string{"SH"}) || !slices.Equal(sel.Location, []string{""}) || !slices.Equal(sel.Channel, []string{"BN?"}) ||
			!sel.Start.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !sel.End.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: selection %+v", raw, sel)
		}
		if q.Enum("level") != "channel" || q.Enum("format") != "xml" || q.NoData() != 204 || !q.Bool("includerestricted") {
			t.Errorf("%s: level %q format %q nodata %d", raw, q.Enum("level"), q.Enum("format"), q.NoData())
		}
		if !sel.Matches("SH", "00001", "", "BNZ") || sel.Matches("SH", "00001", "00", "BNZ") || sel.Matches("SH", "00001", "", "MXI") {
			t.Errorf("%s: matching", raw)
		}
	}
	for raw, want := range map[string]string{
		"colour=red":            `unknown parameter "colour"`,
		"net=SH&network=TW":     "more than once",
		"net=SH&net=TW":         "more than once",
		"minlat=91":             "outside",
		"minlat=NaN":            "not a number",
		"limit=1.5":             "not an integer",
		"level=everything":      "not one of",
		"includerestricted=yes": "neither true nor false",
		"starttime=yesterday":   "not a time",
		"starttime=1800-01-01":  "year outside",
		"starttime=2026-12-02&endtime=2026-12-01": "before starttime",
		"sta=A.B":                          "only letters",
		"sta=TOOLONG":                      "longer than 5",
		"net=SH,":                          "empty code",
		"nodata=500":                       "not one of",
		"cha=" + strings.Repeat("A,", 101): "more than 100",
	} {
		v, _ := url.ParseQuery(raw)
		_, err := station.ParseQuery(v)
		var fe *Error
		if !errors.As(err, &fe) || fe.Status != http.StatusBadRequest || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want 400 saying %q", raw, err, want)
		}
	}
	v, _ := url.ParseQuery("sta=*&nodata=404&minlat=-23.5")
	q, err := station.ParseQuery(v)
	if err != nil || q.Patterns("station") != nil || q.NoData() != 404 || q.Has("network") || !q.Has("minlatitude") {
		t.Fatalf("%v %v", q, err)
	}
	if f, ok := q.Float("minlatitude"); !ok || f != -23.5 {
		t.Errorf("minlatitude %v %v", f, ok)
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pattern, code string
		want          bool
	}{
		{"BN?", "BNZ", true}, {"BN?", "BN", false}, {"B*", "BNZ", true}, {"*Z", "BNZ", true},
		{"*", "", true}, {"", "", true}, {"", "00", false}, {"0*1", "00001", true}, {"0*1", "00010", false},
		{"*A*B*", "XAYBZ", true}, {"*A*B*", "XBYAZ", false}, {"??", "00", true}, {"??", "0", false},
	} {
		if got := Match(tt.pattern, tt.code); got != tt.want {
			t.Errorf("Match(%q, %q) = %t", tt.pattern, tt.code, got)
		}
	}
	// Never exponential: a pathological pattern against a long code.
	if Match(strings.Repeat("*A", 8)+"B", strings.Repeat("A", 4000)) {
		t.Error("matched")
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 12, 1, 3, 4, 5, 120000000, time.UTC)
	for _, s := range []string{"2026-12-01T03:04:05.12", "2026-12-01T03:04:05.120000", "2026-12-01T03:04:05.120Z", "2026-12-01T12:04:05.12+09:00"} {
		if got, err := ParseTime(s); err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if got := FormatTime(want); got != "2026-12-01T03:04:05.120000" {
		t.Errorf("FormatTime = %s", got)
	}
	if got := FormatTime(want.Truncate(time.Second)); got != "2026-12-01T03:04:05" {
		t.Errorf("FormatTime = %s", got)
	}
}

func TestParsePost(t *testing.T) {
	t.Parallel()
	// ObsPy's bulk body (no trailing newline) and seisplotjs's (lines only).
	body := "level=channel\nformat=text\n# a comment\n\nSH 00001 -- BN? 2026-12-01T00:00:00.000000 2026-12-01T01:00:00.000000\nSH 0000* 00 BNZ,BNN 2026-12-01T00:00:00 *"
	q, sels, err := station.ParsePost(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if q.Enum("level") != "channel" || q.Enum("format") != "text" || len(sels) != 2 {
		t.Fatalf("level %q format %q, %d selections", q.Enum("level"), q.Enum("format"), len(sels))
	}
	if s := sels[0]; !s.Matches("SH", "00001", "", "BNE") || s.End.IsZero() {
		t.Errorf("first %+v", s)
	}
	if s := sels[1]; !s.Matches("SH", "00007", "00", "BNN") || s.Matches("SH", "00007", "00", "BNE") || !s.End.IsZero() {
		t.Errorf("second %+v", s)
	}
	for body, want := range map[string]string{
		"":                "no selection line",
		"level=channel\n": "no selection line",
		"SH 00001 -- BNZ": "want NET STA",
		"starttime=2026-12-01\nSH 00001 -- BNZ 2026-12-01": "goes on the selection lines",
		"SH 00001 -- BNZ 2026-12-01\nlevel=channel":        "after the selection lines",
		"SH 00001 -- BNZ 2026-12-02 2026-12-01":            "before the start",
		"SH 00001 -- B.Z 2026-12-01":                       "only letters",
		"colour=red\nSH 00001 -- BNZ 2026-12-01":           "unknown parameter",
	} {
		_, _, err := station.ParsePost(strings.NewReader(body))
		if err == nil || StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want 400 saying %q", body, err, want)
		}
	}
	long := strings.Repeat("SH 00001 -- BNZ 2026-12-01\n", MaxPostLines+1)
	if _, _, err := station.ParsePost(strings.NewReader(long)); StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("%d lines: %v, want 413", MaxPostLines+1, err)
	}
	if _, _, err := station.ParsePost(strings.NewReader(strings.Repeat("x", 5000))); StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5000-byte line: %v, want 413", err)
	}
	// The data API's guard bounds every body (http.MaxBytesReader): past it
	// is too large too, not a bad request.
	capped := http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(strings.Repeat("\n", 4096))), 1024)
	if _, _, err := station.ParsePost(capped); StatusOf(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the guard's bound: %v, want 413", err)
	}
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "http://core.example:8080/fdsnws/station/1/query?colour=red", nil)
	w := httptest.NewRecorder()
	WriteError(w, r, 400, `unknown parameter "colour"`, "http://core.example:8080/fdsnws/station/1/", "1.1.0")
	lines := strings.Split(w.Body.String(), "\n")
	if w.Code != 400 || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" || len(lines) < 14 ||
		lines[0] != "Error 400: Bad Request" || lines[2] != `unknown parameter "colour"` ||
		lines[4] != "Usage details are available from http://core.example:8080/fdsnws/station/1/" ||
		lines[6] != "Request:" || lines[7] != "http://core.example:8080/fdsnws/station/1/query?colour=red" ||
		lines[9] != "Request Submitted:" || lines[12] != "Service version:" || lines[13] != "1.1.0" {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
	if _, err := ParseTime(lines[10]); err != nil {
		t.Errorf("submitted time %q: %v", lines[10], err)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"network=SH&station=00001&location=--&channel=BN%3F&starttime=2026-12-01T00:00:00.000000&level=channel",
		"net=*&sta=0*1,A?&loc=&minlat=-90&limit=10&nodata=404",
		"starttime=2026-12-02&endtime=2026-12-01", "colour=red", "sta=" + strings.Repeat("*", 40),
		"eventid=%20cwa:113001%20&eventid=", "eventid=" + strings.Repeat("x", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := station.ParseQuery(v)
		if err != nil {
			if StatusOf(err) != http.StatusBadRequest {
				t.Fatalf("%q: %v is not a 400", raw, err)
			}
			return
		}
		if id := q.Text("eventid"); len(id) > 256 || strings.TrimSpace(id) != id {
			t.Fatalf("%q: eventid %q not bounded and trimmed", raw, id)
		}
		sel := q.Selection()
		sel.Matches("SH", "00001", "00", "BNZ")
		if !sel.Start.IsZero() && !sel.End.IsZero() && sel.End.Before(sel.Start) {
			t.Fatalf("%q: window ends before it starts", raw)
		}
	})
}

func FuzzParsePost(f *testing.F) {
	f.Add([]byte("level=channel\nSH 00001 -- BN? 2026-12-01T00:00:00 2026-12-01T01:00:00\n"))
	f.Add([]byte("SH * * * 2026-12-01 *"))
	f.Add([]byte("# only a comment\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, sels, err := station.ParsePost(bytes.NewReader(b))
		if err != nil {
			if s := StatusOf(err); s != http.StatusBadRequest && s != http.StatusRequestEntityTooLarge {
				t.Fatalf("%q: %v answers %d", b, err, s)
			}
			return
		}
		if q == nil || len(sels) == 0 || len(sels) > MaxPostLines {
			t.Fatalf("%q: %d selections", b, len(sels))
		}
	})
}

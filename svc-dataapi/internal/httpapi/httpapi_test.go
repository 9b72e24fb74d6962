package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

func TestMatchETag(t *testing.T) {
	t.Parallel()
	const tag = `"vabc"`
	for header, want := range map[string]bool{
		``: false, `*`: true, `"vabc"`: true, `W/"vabc"`: true, `"x", "vabc"`: true, ` "x" ,W/"vabc" `: true,
		`"x"`: false, `vabc`: false, `"vab`: false, `"vabc`: false, `junk, "vabc"`: true, `"vab","c"`: false,
	} {
		if got := MatchETag(header, tag); got != want {
			t.Errorf("MatchETag(%q) = %v, want %v", header, got, want)
		}
	}
}

// FuzzMatchETag: any header is handled; a list holding the tag matches.
func FuzzMatchETag(f *testing.F) {
	for _, s := range []string{`"vAAAA"`, `W/"b1", "b2"`, `*`, `"`, `,,,`, `W/`, `"a" junk "b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		MatchETag(header, `"vtag"`)
		if !strings.Contains(header, `"`) && MatchETag(header+`, "vtag"`, `"vtag"`) != true {
			t.Fatalf("%q followed by the tag does not match", header)
		}
	})
}

func TestCanonicalQuery(t *testing.T) {
	t.Parallel()
	a := CanonicalQuery("page_size=2&min_level=3&x=%41")
	b := CanonicalQuery("x=A&min_level=3&page_size=2")
	if a != b || a != "min_level=3&page_size=2&x=A" {
		t.Fatalf("%q %q", a, b)
	}
	if CanonicalQuery("a=1&a=2") == CanonicalQuery("a=2&a=1") {
		t.Fatal("values of one name must keep their order")
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.7:5000", []string{"1.2.3.4"}, "192.0.2.7"}, // untrusted peer: its header is ignored
		{"127.0.0.1:5000", nil, "127.0.0.1"},
		{"127.0.0.1:5000", []string{"198.51.100.9"}, "198.51.100.9"},
		{"127.0.0.1:5000", []string{"6.6.6.6, 198.51.100.9, 10.1.1.1"}, "198.51.100.9"},
		{"127.0.0.1:5000", []string{"6.6.6.6", "198.51.100.9"}, "198.51.100.9"},
		{"127.0.0.1:5000", []string{"junk, 10.2.2.2"}, "10.2.2.2"},
		{"[::ffff:127.0.0.1]:1", []string{"2001:db8::1"}, "2001:db8::1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, h := range tc.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		if got := ClientAddr(r, trusted); got.String() != tc.want {
			t.Errorf("%s %v: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
	g := &Guard{Trusted: trusted}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:80"
	if b := g.bucketOf(r); b != "a:2001:db8:1:2::/64" {
		t.Fatalf("IPv6 bucket %q", b)
	}
}

// TestForwardedOrigin: behind a trusted proxy a request carries the
// address its client used (X-Forwarded-Host as Host, X-Forwarded-Proto
// kept); anyone else's forwarding headers are removed, and a host that
// is no host is not taken.
func TestForwardedOrigin(t *testing.T) {
	t.Parallel()
	g := &Guard{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for _, tc := range []struct {
		remote, xfh, xfp string
		host, proto      string
	}{
		{"127.0.0.1:5000", "edge.example:443", "https", "edge.example:443", "https"},
		{"127.0.0.1:5000", "edge.example, other.example", "http", "edge.example", "http"},
		{"127.0.0.1:5000", "", "", "core:17030", ""},
		{"127.0.0.1:5000", "evil.example/path", "gopher", "core:17030", ""},
		{"127.0.0.1:5000", "[2001:db8::1]:8443", "https", "[2001:db8::1]:8443", "https"},
		{"127.0.0.1:5000", `a"><x`, "", "core:17030", ""},
		{"192.0.2.7:5000", "evil.example", "https", "core:17030", ""}, // not a proxy
	} {
		r := httptest.NewRequest("GET", "http://core:17030/fdsnws/station/1/application.wadl", nil)
		r.RemoteAddr = tc.remote
		if tc.xfh != "" {
			r.Header.Set("X-Forwarded-Host", tc.xfh)
		}
		if tc.xfp != "" {
			r.Header.Set("X-Forwarded-Proto", tc.xfp)
		}
		g.forwardedOrigin(r)
		if host, proto := r.Host, r.Header.Get("X-Forwarded-Proto"); host != tc.host || proto != tc.proto {
			t.Errorf("%s %q %q: host %q proto %q, want %q %q", tc.remote, tc.xfh, tc.xfp, host, proto, tc.host, tc.proto)
		}
	}
}

// FuzzForwardedOrigin: whatever a trusted proxy's X-Forwarded-Host, the
// request's host is it only when it is a plausible host, and stays the
// request's own otherwise; X-Forwarded-Proto is http, https or gone.
func FuzzForwardedOrigin(f *testing.F) {
	for _, s := range []string{"edge.example:443", "a, b", "[::1]:80", "", " ", "x/y", "\x00", strings.Repeat("a", 300)} {
		f.Add(s, "https")
	}
	g := &Guard{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	f.Fuzz(func(t *testing.T, xfh, xfp string) {
		r := httptest.NewRequest("GET", "http://core:17030/", nil)
		r.RemoteAddr = "127.0.0.1:5000"
		r.Header.Set("X-Forwarded-Host", xfh)
		r.Header.Set("X-Forwarded-Proto", xfp)
		g.forwardedOrigin(r)
		if r.Host != "core:17030" && !plausibleHost(r.Host) {
			t.Fatalf("host %q from %q", r.Host, xfh)
		}
		if p := r.Header.Get("X-Forwarded-Proto"); p != "" && p != "http" && p != "https" {
			t.Fatalf("proto %q kept", p)
		}
	})
}

// FuzzClientAddr: any forwarding header gives an address or none, never
// a trusted proxy when an untrusted address was named.
func FuzzClientAddr(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 127.0.0.1", "::1,fe80::1%eth0", "", ",,,", "999.1.1.1"} {
		f.Add(s)
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	f.Fuzz(func(t *testing.T, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "127.0.0.1:1"
		r.Header.Set("X-Forwarded-For", xff)
		a := ClientAddr(r, trusted)
		if !a.IsValid() {
			t.Fatalf("%q: no address", xff)
		}
		(&Guard{Trusted: trusted}).bucketOf(r)
	})
}

func TestCheckQuery(t *testing.T) {
	t.Parallel()
	desc := (&datav1.ListReportsRequest{}).ProtoReflect().Descriptor()
	for q, ok := range map[string]bool{
		"":                                true,
		"min_magnitude=5&page_size=10":    true,
		"minMagnitude=5":                  true, // JSON name
		"min_magnitude=5&min_magnitude=6": false,
		"min_magnitud=5":                  false,
		"reports=1":                       false, // not a field of the request
		"a.b=1":                           false,
		"page_token[x]=1":                 false,
	} {
		v, _ := url.ParseQuery(q)
		if err := CheckQuery(desc, v, utilities.NewDoubleArray(nil)); (err == nil) != ok {
			t.Errorf("%q: %v", q, err)
		}
	}
	getDesc := (&datav1.GetReportRequest{}).ProtoReflect().Descriptor()
	if err := CheckQuery(getDesc, url.Values{"id": {"x"}}, utilities.NewDoubleArray([][]string{{"id"}})); err == nil {
		t.Fatal("a path field given in the query accepted")
	}
}

// FuzzStrictQuery: the strict parser never panics on any query.
func FuzzStrictQuery(f *testing.F) {
	for _, s := range []string{"min_magnitude=5&page_size=10", "start_time_ms=1e3", "page_size=-1", "minLevel=3", "min_lat=NaN", "x.y=1", "page_token=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		for _, msg := range []proto.Message{&datav1.ListReportsRequest{}, &datav1.ListDetectionsRequest{}} {
			if err := (StrictQuery{}).Parse(msg, v, utilities.NewDoubleArray(nil)); err != nil {
				continue
			}
			// Accepted: every parameter names a scalar field, once
			// unless the field is a list.
			fields := msg.ProtoReflect().Descriptor().Fields()
			for key, vs := range v {
				fd := fields.ByJSONName(key)
				if fd == nil && protoreflect.Name(key).IsValid() {
					fd = fields.ByName(protoreflect.Name(key))
				}
				if fd == nil || fd.Message() != nil || len(vs) > 1 && !fd.IsList() {
					t.Fatalf("%T: %q accepted (%q)", msg, key, vs)
				}
			}
		}
	})
}

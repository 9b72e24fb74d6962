package edge

import (
	"net/http/httptest"
	"testing"
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

package sdk

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func server(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		w.Write([]byte(`{"ok":` + map[bool]string{true: "true", false: "false"}[code == 200] + `}`))
	}
}

// refused returns a URL nothing listens on.
func refused(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestSwitchesOnConnectionErrorTimeoutAnd5xx(t *testing.T) {
	t.Parallel()
	slow := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	bases := []string{refused(t), slow, server(t, status(503)), server(t, status(200))}
	c, err := New(bases, WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ OK bool }
	if err := c.Get(context.Background(), "/x", &out); err != nil || !out.OK {
		t.Fatalf("Get: %v %+v", err, out)
	}
	if c.Base() != bases[3] {
		t.Fatalf("on %s, want the fourth base URL", c.Base())
	}
	// It stays there.
	if err := c.Get(context.Background(), "/x", &out); err != nil || c.Base() != bases[3] {
		t.Fatalf("second Get: %v on %s", err, c.Base())
	}
}

func TestNoSwitchOn4xx(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 404} {
		first, second := server(t, status(code)), server(t, status(200))
		c, _ := New([]string{first, second})
		err := c.Get(context.Background(), "/x", nil)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Fatalf("%d: err %v", code, err)
		}
		if c.Base() != first {
			t.Fatalf("%d moved the client to %s", code, c.Base())
		}
	}
}

func TestAllFail(t *testing.T) {
	t.Parallel()
	c, _ := New([]string{refused(t), server(t, status(500))})
	if err := c.Get(context.Background(), "/x", nil); err == nil {
		t.Fatal("no error when every base URL fails")
	}
	if _, err := New(nil); err == nil {
		t.Fatal("no base URL accepted")
	}
	if _, err := New([]string{"ftp://x"}); err == nil {
		t.Fatal("ftp base URL accepted")
	}
}

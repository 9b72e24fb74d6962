package dataapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/service"
)

// testConfig returns a configuration with free ports, the tag defaults,
// and flags args on top, as the binary would load it.
func testConfig(t testing.TB, args ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Common = service.Common{Site: "TNN-1", GRPCAddr: freeaddr.TCP(t), AdminAddr: freeaddr.TCP(t), LogFormat: "json", LogLevel: "error",
		ShutdownTimeout: 3 * time.Second, DependencyWait: 5 * time.Second}
	cfg.HTTPAddr = freeaddr.TCP(t)
	noEnv := func(string) (string, bool) { return "", false }
	if err := conf.Load(&cfg, "DATAAPI", args, conf.Options{Env: noEnv, Name: Name, Help: io.Discard, Warn: func(string) {}}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start runs the service with cfg until the test ends and returns its
// base URL once it answers.
func start(t testing.TB, cfg Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	base := "http://" + cfg.HTTPAddr
	waitStarted(t, "the data API", done, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	return base
}

// answer is one HTTP answer.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %s", a.code, a.body)
	}
	return m
}

// do sends a request; body is marshalled unless it is a string or []byte.
func do(t *testing.T, method, url, token string, body any, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// errorBody checks that an error answer is the JSON error shape.
func errorBody(t *testing.T, a answer) string {
	t.Helper()
	var e struct {
		Error   string `json:"error"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error == "" || e.Message != e.Error {
		t.Fatalf("status %d: body %q is not {\"error\":…}", a.code, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("status %d: error Content-Type %q", a.code, ct)
	}
	return e.Error
}

// waitStarted waits up to 15 s for ready to succeed, failing t if it never
// does or if the server's Run ends first (done receives its result).
func waitStarted(t testing.TB, what string, done <-chan error, ready func() error) {
	t.Helper()
	var last, runErr error
	ended := false
	ok := poll.Within(15*time.Second, func() bool {
		if last = ready(); last == nil {
			return true
		}
		select {
		case runErr = <-done:
			ended = true
			return true
		default:
			return false
		}
	})
	if ended {
		t.Fatalf("%s: Run ended: %v", what, runErr)
	}
	if !ok {
		t.Fatalf("%s never became ready: %v", what, last)
	}
}

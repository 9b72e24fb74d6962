package service

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"shindo.dev/lib/conf"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/certfile"
)

func testCommon() Common {
	return Common{
		Site: "TNN-1", GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		LogFormat: "json", LogLevel: "error", ShutdownTimeout: 5 * time.Second, DependencyWait: time.Second,
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// recorder notes the order of shutdown steps.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.steps, ",")
}

func TestServiceLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	var healthy sync.Mutex
	ready := true
	svc.AddReadiness("dependency", func(context.Context) error {
		healthy.Lock()
		defer healthy.Unlock()
		if !ready {
			return errors.New("down")
		}
		return nil
	})
	streamEnded := make(chan struct{})
	httpAddr, err := svc.Listen("public", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A stream that only ends when the service stops.
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-svc.Stopping()
		rec.add("stream ended")
		close(streamEnded)
	}))
	if err != nil {
		t.Fatal(err)
	}
	svc.Go("worker", ComponentFunc(func(ctx context.Context) error {
		<-ctx.Done()
		rec.add("component stopped")
		return nil
	}))
	svc.OnShutdown("first registered", func(context.Context) error { rec.add("close first"); return nil })
	svc.OnShutdown("second registered", func(context.Context) error { rec.add("close second"); return nil })

	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	conn, err := grpc.NewClient(svc.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := WaitServing(ctx, conn, 5*time.Second); err != nil {
		t.Fatalf("health: %v", err)
	}
	refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	resp, err := refl.Recv()
	if err != nil || !strings.Contains(resp.String(), "grpc.health.v1.Health") {
		t.Fatalf("reflection: %v %v", resp, err)
	}
	refl.CloseSend()

	admin := "http://" + svc.AdminAddr().String()
	if code, _ := get(t, admin+"/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get(t, admin+"/readyz"); code != 200 {
		t.Errorf("/readyz %d", code)
	}
	healthy.Lock()
	ready = false
	healthy.Unlock()
	if code, body := get(t, admin+"/readyz"); code != 503 || !strings.Contains(body, "dependency: down") {
		t.Errorf("/readyz with a failing check: %d %q", code, body)
	}
	if code, body := get(t, admin+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics %d", code)
	}
	if code, _ := get(t, admin+"/debug/pprof/"); code != 200 {
		t.Errorf("pprof %d", code)
	}
	// The command line may hold a secret someone passed as a flag.
	if code, body := get(t, admin+"/debug/pprof/cmdline"); code != 404 || strings.Contains(body, os.Args[0]) {
		t.Errorf("/debug/pprof/cmdline: %d %q, want 404", code, body)
	}
	// A header past the admin listener's bound is refused.
	big, _ := http.NewRequest(http.MethodGet, admin+"/healthz", nil)
	big.Header.Set("X-Padding", strings.Repeat("x", 2*adminMaxHeader))
	if resp, err := http.DefaultClient.Do(big); err != nil {
		t.Errorf("oversized admin header: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("oversized admin header: %d, want 431", resp.StatusCode)
		}
	}

	// Open the never-ending stream, then shut down.
	streamResp, err := http.Get("http://" + httpAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer streamResp.Body.Close()
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown took %s with an open stream", took)
	}
	<-streamEnded
	if got, want := rec.String(), "stream ended,component stopped,close second,close first"; got != want {
		t.Errorf("shutdown order %q, want %q", got, want)
	}
	// Health reports NOT_SERVING (or the server is gone) after shutdown.
	hc, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err == nil && hc.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		t.Error("still SERVING after shutdown")
	}
}

func TestComponentFailureStopsService(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	err := Serve(context.Background(), "shindo-test", testCommon(), &struct{}{}, func(_ context.Context, svc *Service) error {
		svc.Go("failing", ComponentFunc(func(context.Context) error { return boom }))
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "failing") {
		t.Fatalf("err = %v", err)
	}
}

func TestBusyPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := testCommon()
	c.AdminAddr = l.Addr().String()
	_, err = New(context.Background(), "shindo-test", c, &struct{}{})
	if err == nil || !strings.Contains(err.Error(), "listen admin") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("err = %v", err)
	}
}

func TestWireFailureReleasesPorts(t *testing.T) {
	t.Parallel()
	c := testCommon()
	c.GRPCAddr = freeaddr.TCP(t)
	wantErr := errors.New("dependency missing")
	closed := false
	err := Serve(context.Background(), "shindo-test", c, &struct{}{}, func(_ context.Context, svc *Service) error {
		svc.OnShutdown("conn", func(context.Context) error { closed = true; return nil })
		return wantErr
	})
	if !errors.Is(err, wantErr) || !closed {
		t.Fatalf("err = %v, closer ran %v", err, closed)
	}
	l, err := net.Listen("tcp", c.GRPCAddr)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	l.Close()
}

func TestValidateCommon(t *testing.T) {
	t.Parallel()
	c := testCommon()
	if err := c.ValidateCommon(); err != nil {
		t.Fatal(err)
	}
	c.GRPCAddr, c.Site, c.DrainDelay = "nope", "", 10*time.Second
	err := c.ValidateCommon()
	for _, want := range []string{`grpc-addr "nope"`, "site must not be empty", "drain-delay"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err      error
		code     int
		wantLine string
	}{
		{nil, 0, ""},
		{conf.ErrHelp, 0, ""},
		{&conf.UsageError{Err: errors.New("bad flag")}, 2, "shindo-x: bad flag (see -h)\n"},
		{errors.New("rts unreachable"), 1, "shindo-x: rts unreachable\n"},
	}
	for _, tt := range tests {
		var buf strings.Builder
		if code := ExitCode(&buf, "shindo-x", tt.err); code != tt.code || buf.String() != tt.wantLine {
			t.Errorf("ExitCode(%v) = %d, %q; want %d, %q", tt.err, code, buf.String(), tt.code, tt.wantLine)
		}
	}
}

// TestListenShared: two services listen on one address with ListenShared
// and both are served; a plain Listen on it is refused.
func TestListenShared(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := "127.0.0.1:0"
	var served [2]int
	var mu sync.Mutex
	for i := range 2 {
		svc, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := svc.Listen("public", addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			served[i]++
			mu.Unlock()
			w.Header().Set("Connection", "close")
		}), SharedPort())
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		addr = a.String()
		go svc.Run(ctx)
	}
	other, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Listen("public", addr, http.NotFoundHandler()); err == nil {
		t.Fatal("a plain listener shares the address")
	}
	// New connections are spread over both by the hash of their ports.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for n := 0; ; n++ {
		mu.Lock()
		both := served[0] > 0 && served[1] > 0
		mu.Unlock()
		if both {
			break
		}
		if n == 200 {
			t.Fatalf("after 200 connections, served %v", served)
		}
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// TestListenTLS: WithTLS serves HTTPS, HTTP/2 when the configuration
// offers it and HTTP/1.1 only when it does not (a WebSocket listener).
func TestListenTLS(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: "test"}, Hosts: []string{"127.0.0.1"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := certfile.Write(certFile, keyFile, is.CertPEM, is.KeyPEM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, "shindo-test", testCommon(), &struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := svc.Certificate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	both, err := svc.Listen("both", "127.0.0.1:0", ok, WithTLS(certfile.ServerConfig(certs)))
	if err != nil {
		t.Fatal(err)
	}
	h1cfg := certfile.ServerConfig(certs)
	h1cfg.NextProtos = []string{"http/1.1"}
	h1, err := svc.Listen("http/1.1", "127.0.0.1:0", ok, WithTLS(h1cfg))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	for addr, want := range map[string]string{both.String(): "HTTP/2.0", h1.String(): "HTTP/1.1"} {
		var resp *http.Response
		poll.UntilNil(t, 5*time.Second, "GET "+addr, func() (err error) { resp, err = client.Get("https://" + addr + "/"); return err })
		resp.Body.Close()
		if resp.Proto != want {
			t.Errorf("%s: %s, want %s", addr, resp.Proto, want)
		}
	}
	// Garbage where a handshake should be: the connection is closed and
	// the failure counted, not logged line by line.
	for range 3 {
		c, err := net.Dial("tcp", both.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(bytes.Repeat([]byte{0x42}, 100))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("garbage: the connection was not closed: %v", err)
		}
		c.Close()
	}
	poll.Until(t, 5*time.Second, "3 failed handshakes counted", func() bool {
		return counterValue(t, svc, "shindo_tls_handshake_failures_total", "both") == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// counterValue reads a counter of svc's registry by its listener label.
// counterValue is the sum of counter name over the series with a label of
// the value given (a listener, a method).
func counterValue(t *testing.T, svc *Service, name, label string) float64 {
	t.Helper()
	mfs, err := svc.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

package wavelive

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/poll"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/svc-edge/internal/sse"
)

// fakeCore is a real WaveformService endpoint whose Live streams what the
// test feeds it.
type fakeCore struct {
	waveformv1.UnimplementedWaveformServiceServer
	feed  chan *waveformv1.Chunk
	srv   *grpc.Server
	addr  string
	lives atomic.Int64 // open Live streams
}

func (c *fakeCore) Live(req *waveformv1.LiveRequest, stream waveformv1.WaveformService_LiveServer) error {
	c.lives.Add(1)
	defer c.lives.Add(-1)
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ch := <-c.feed:
			if ch.GetStationId() != req.GetStationIds()[0] {
				continue
			}
			if err := stream.Send(&waveformv1.LiveResponse{Chunk: ch}); err != nil {
				return err
			}
		}
	}
}

func startCore(t *testing.T) *fakeCore {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeCore{feed: make(chan *waveformv1.Chunk), srv: grpc.NewServer(), addr: ln.Addr().String()}
	waveformv1.RegisterWaveformServiceServer(c.srv, c)
	go c.srv.Serve(ln)
	t.Cleanup(c.srv.Stop)
	return c
}

func chunk(station string, ms int64) *waveformv1.Chunk {
	return &waveformv1.Chunk{StationId: station, FirstSampleMs: ms, RateHz: 50, ScaleGal: 0.01,
		Ns: []int32{1, -2}, Ew: []int32{3, 4}, Ud: []int32{-5, 6}}
}

func testHub(t *testing.T, cores ...*fakeCore) (*Hub, string) {
	t.Helper()
	var conns []*grpc.ClientConn
	var targets []string
	for _, c := range cores {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
		targets = append(targets, c.addr)
	}
	stop := make(chan struct{})
	h := New(t.Context(), targets, conns, Options{
		SSE: sse.Options{Retry: 3 * time.Second, KeepAlive: time.Hour, Buffer: 64, WriteTimeout: time.Second,
			MaxClients: 10, Stop: stop, History: time.Minute, MaxHistory: 200},
		Linger: 100 * time.Millisecond, MaxStations: 2,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("station")
		hub, err := h.Acquire(id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		hub.Serve(w, r, sse.ServeOptions{LastID: r.Header.Get("Last-Event-ID"), Latest: true, OnClose: func() { h.Release(id) }})
	}))
	t.Cleanup(func() {
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return h, srv.URL
}

// events reads an SSE response's waveform events.
func events(t *testing.T, body io.Reader) <-chan map[string]any {
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		buf := make([]byte, 0, 4096)
		tmp := make([]byte, 4096)
		for {
			n, err := body.Read(tmp)
			buf = append(buf, tmp[:n]...)
			for {
				block, rest, ok := strings.Cut(string(buf), "\n\n")
				if !ok {
					break
				}
				buf = []byte(rest)
				if !strings.Contains(block, "event: waveform\n") {
					continue
				}
				_, data, _ := strings.Cut(block, "data: ")
				var doc map[string]any
				if json.Unmarshal([]byte(data), &doc) == nil {
					out <- doc
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// TestBothCoresOnceInOrder: chunks from both cores reach the client once
// each, in time order; when one core dies the other carries on with no
// gap; streams close after the last client left.
func TestBothCoresOnceInOrder(t *testing.T) {
	t.Parallel()
	a, b := startCore(t), startCore(t)
	h, url := testHub(t, a, b)
	resp, err := http.Get(url + "?station=S1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs := events(t, resp.Body)
	poll.Until(t, 5*time.Second, "streams to both cores", func() bool { return a.lives.Load() == 1 && b.lives.Load() == 1 })

	a.feed <- chunk("S1", 500)
	b.feed <- chunk("S1", 500) // the same chunk via the other core: dropped
	b.feed <- chunk("S1", 1000)
	a.feed <- chunk("S1", 1000)
	a.srv.Stop() // core A dies
	b.feed <- chunk("S1", 1500)
	b.feed <- chunk("S1", 2000)
	for _, want := range []float64{500, 1000, 1500, 2000} {
		select {
		case doc := <-evs:
			if doc["time"] != want || doc["station"] != "S1" || doc["rate"] != 50.0 {
				t.Fatalf("chunk %v, want time %v", doc, want)
			}
			if ns := doc["ns"].([]any); len(ns) != 2 || ns[1] != -2.0 {
				t.Fatalf("samples %v", doc["ns"])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %v never came", want)
		}
	}
	select {
	case doc := <-evs:
		t.Fatalf("extra chunk %v", doc)
	case <-time.After(50 * time.Millisecond):
	}

	resp.Body.Close()
	poll.Until(t, 5*time.Second, "the station to be dropped after the linger", func() bool { return h.Watched() == 0 })
	poll.Until(t, 5*time.Second, "the core stream to close", func() bool { return b.lives.Load() == 0 })
}

// TestResumeAndLimit: a client reconnecting within the linger resumes
// after its last chunk; stations beyond the cap are refused.
func TestResumeAndLimit(t *testing.T) {
	t.Parallel()
	a := startCore(t)
	h, url := testHub(t, a)
	resp, err := http.Get(url + "?station=S1")
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, resp.Body)
	poll.Until(t, 5*time.Second, "the stream", func() bool { return a.lives.Load() == 1 })
	a.feed <- chunk("S1", 500)
	<-evs
	resp.Body.Close()
	a.feed <- chunk("S1", 1000) // while away, within the linger
	a.feed <- chunk("S1", 1500)

	req, _ := http.NewRequest("GET", url+"?station=S1", nil)
	req.Header.Set("Last-Event-ID", sse.ID(500, 0))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs = events(t, resp.Body)
	for _, want := range []float64{1000, 1500} {
		if doc := <-evs; doc["time"] != want {
			t.Fatalf("resumed with %v, want %v", doc["time"], want)
		}
	}

	for _, id := range []string{"S2"} {
		if _, err := h.Acquire(id); err != nil {
			t.Fatalf("second station: %v", err)
		}
		defer h.Release(id)
	}
	if _, err := h.Acquire("S3"); err != ErrTooManyStations {
		t.Fatalf("third station: %v", err)
	}
}

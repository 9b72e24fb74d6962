package listen

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"shindo.dev/devkit/poll"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
)

var testKey = make([]byte, 32)

func datagram(t *testing.T, station string) []byte {
	t.Helper()
	b, err := stationwire.Seal(testKey, 1, &stationv1.Packet{StationId: station, Seq: 1, Body: &stationv1.Packet_Probe{Probe: &stationv1.Probe{}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gate acks the datagrams of stations named S…, as the real gate acks the
// valid packets of known stations.
func gate(batch [][]byte, _ ingestv1.Transport) func() [][]byte {
	acks := make([][]byte, len(batch))
	for i, b := range batch {
		if strings.HasPrefix(stationOf(b), "S") {
			acks[i] = []byte("ack")
		}
	}
	return func() [][]byte { return acks }
}

type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) add(reason string) { r.mu.Lock(); r.n[reason]++; r.mu.Unlock() }
func (r *refusals) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

func uplink(t *testing.T, opts WSOptions) (string, *refusals) {
	t.Helper()
	ref := &refusals{n: map[string]int{}}
	opts.Refused = ref.add
	srv := httptest.NewServer(WebSocket(gate, opts, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + WSPath, ref
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func closedWith(c *websocket.Conn) websocket.StatusCode {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// TestWebSocketFirstMessage: a connection proves itself with its first
// message — a packet the gate acks — within FirstWithin, or it is closed;
// once started, junk is only counted by the gate.
func TestWebSocketFirstMessage(t *testing.T) {
	t.Parallel()
	url, ref := uplink(t, WSOptions{FirstWithin: 200 * time.Millisecond, Idle: time.Minute, PerStation: 2})
	ctx := context.Background()

	junk := dial(t, url)
	junk.Write(ctx, websocket.MessageBinary, []byte("hello"))
	if code := closedWith(junk); code != websocket.StatusPolicyViolation {
		t.Errorf("junk first: closed with %d", code)
	}
	silent := dial(t, url)
	if code := closedWith(silent); code != -1 {
		t.Errorf("silent: closed with %d", code)
	}
	poll.Until(t, 5*time.Second, "the refusal counted", func() bool { return ref.get("first_message") == 2 }) // counted as the server lets go

	good := dial(t, url)
	good.Write(ctx, websocket.MessageBinary, datagram(t, "S1"))
	if _, b, err := good.Read(ctx); err != nil || string(b) != "ack" {
		t.Fatalf("ack %q %v", b, err)
	}
	good.Write(ctx, websocket.MessageBinary, []byte("junk after the start"))
	//nolint:forbidigo // time passing is the case under test
	time.Sleep(300 * time.Millisecond) // past FirstWithin: a started connection is not held to it
	good.Write(ctx, websocket.MessageBinary, datagram(t, "S1"))
	if _, b, err := good.Read(ctx); err != nil || string(b) != "ack" {
		t.Fatalf("after junk: %q %v", b, err)
	}
}

// TestWebSocketLimits: connections per address are capped (429), and a
// station's newest connection replaces its oldest beyond PerStation.
func TestWebSocketLimits(t *testing.T) {
	t.Parallel()
	url, ref := uplink(t, WSOptions{FirstWithin: 5 * time.Second, Idle: time.Minute, PerAddr: 2, PerStation: 1})
	ctx := context.Background()
	first := dial(t, url)
	first.Write(ctx, websocket.MessageBinary, datagram(t, "S1"))
	first.Read(ctx)
	second := dial(t, url)
	second.Write(ctx, websocket.MessageBinary, datagram(t, "S1"))
	second.Read(ctx)
	if code := closedWith(first); code != websocket.StatusPolicyViolation {
		t.Errorf("the older connection of S1: closed with %d", code)
	}
	// Two held, S1's newest and S2's (once the replaced one has gone): a
	// third is refused.
	var third *websocket.Conn
	poll.Until(t, 5*time.Second, "S2 connected, once the replaced connection let its slot go", func() bool {
		c, _, err := websocket.Dial(ctx, url, nil)
		third = c
		return err == nil
	})
	t.Cleanup(func() { third.CloseNow() })
	third.Write(ctx, websocket.MessageBinary, datagram(t, "S2"))
	third.Read(ctx)
	_, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third connection from the address: %v %v", resp, err)
	}
	if ref.get("per_address") == 0 {
		t.Errorf("refusals %v", ref.n)
	}
}

// TestUDPClosedTwice: the socket is closed by Run when its context ends
// and by the service's shutdown after; the second close is no failure.
func TestUDPClosedTwice(t *testing.T) {
	u, err := ListenUDP("127.0.0.1:0", 1, func([][]byte, ingestv1.Transport) func() [][]byte { return func() [][]byte { return nil } },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Errorf("Close after Run ended: %v", err)
	}
}

// TestWebSocketStationThatStopsReading: a station that sends but takes
// none of its acks ends its connection within Idle, as a silent one
// does, and gives back its address's slot; without a bound on the ack's
// write the handler waited as long as the station's kernel answered with
// a closed window.
func TestWebSocketStationThatStopsReading(t *testing.T) {
	t.Parallel()
	bigAck := bytes.Repeat([]byte("a"), 64<<10) // fills the buffers in a few dozen
	ref := &refusals{n: map[string]int{}}
	srv := httptest.NewServer(WebSocket(func(batch [][]byte, _ ingestv1.Transport) func() [][]byte {
		acks := make([][]byte, len(batch))
		for i := range batch {
			acks[i] = bigAck
		}
		return func() [][]byte { return acks }
	}, WSOptions{FirstWithin: 5 * time.Second, Idle: 500 * time.Millisecond, PerAddr: 1, Refused: ref.add},
		slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + WSPath

	// A small receive buffer, so the server's writes block soon.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	stuck, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.CloseNow()
	// Packets until the station's own writes block: the server no longer
	// reads, as it waits on an ack's write.
	packet := datagram(t, "S1")
	for range 5000 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := stuck.Write(ctx, websocket.MessageBinary, packet)
		cancel()
		if err != nil {
			break
		}
	}
	// The address's one slot comes back once the server lets go.
	if !poll.Within(5*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			return false
		}
		c.CloseNow()
		return true
	}) {
		t.Fatalf("the address's slot was never given back (refused per address %d times)", ref.get("per_address"))
	}
}

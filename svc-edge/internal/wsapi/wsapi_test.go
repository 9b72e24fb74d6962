package wsapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"shindo.dev/svc-edge/internal/sse"
)

// keyring is the data API's keys, as the edge sees them.
type keyring struct {
	mu     sync.Mutex
	keys   map[string]KeyState
	checks int
	fail   bool
}

func (k *keyring) Check(_ context.Context, _ string, keys []string) ([]KeyState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.checks++
	if k.fail {
		return nil, errors.New("data API away")
	}
	out := make([]KeyState, len(keys))
	for i, key := range keys {
		out[i] = k.keys[key]
	}
	return out, nil
}

func (k *keyring) set(key string, st KeyState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys[key] = st
}

type testEdge struct {
	hub  *sse.Hub
	keys *keyring
	srv  *Server
	url  string
}

func startEdge(t *testing.T, tune func(*Options)) *testEdge {
	t.Helper()
	stop := make(chan struct{})
	e := &testEdge{keys: &keyring{keys: map[string]KeyState{
		"rts-key":  {Known: true, KeyID: "k1", Topics: []string{"websocket.trem.rts.v1"}},
		"all-key":  {Known: true, KeyID: "k2", Topics: []string{"*"}},
		"gone-key": {Known: true, KeyID: "k3", Revoked: true},
	}}}
	e.hub = sse.NewHub(sse.Options{Retry: time.Second, KeepAlive: time.Hour, Buffer: 16, WriteTimeout: time.Second,
		MaxClients: 100, Stop: stop, History: time.Minute, MaxHistory: 100, WebSocket: Frame})
	opts := Defaults()
	opts.Hub, opts.Keys, opts.Log = e.hub, e.keys, slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Addr = func(r *http.Request) string { h, _, _ := net.SplitHostPort(r.RemoteAddr); return h }
	var mu sync.Mutex
	held := map[string]int{}
	opts.Acquire = func(a string) bool { mu.Lock(); defer mu.Unlock(); held[a]++; return held[a] <= 50 }
	opts.Release = func(a string) { mu.Lock(); defer mu.Unlock(); held[a]-- }
	opts.Recheck, opts.NTP = 100*time.Millisecond, 200*time.Millisecond
	if tune != nil {
		tune(&opts)
	}
	srv := New(opts)
	e.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { cancel(); close(stop); hs.CloseClientConnections(); hs.Close() })
	e.url = "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	return e
}

// message is any server message.
type message struct {
	Type    string          `json:"type"`
	Event   string          `json:"event"`
	Msg     string          `json:"msg"`
	Topic   json.RawMessage `json:"topic"`
	Payload json.RawMessage `json:"payload"`
	Time    int64           `json:"time"`
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func send(t *testing.T, c *websocket.Conn, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(v)); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, c *websocket.Conn) message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %q", b)
	}
	return m
}

// closedWith reads until the connection closes and returns its status.
func closedWith(t *testing.T, c *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// TestStartAndData: the documented handshake — connect info listing the
// topics granted and refused — then data messages carrying the SSE
// payloads of the subscribed topics only, and ntp messages.
func TestStartAndData(t *testing.T) {
	t.Parallel()
	e := startEdge(t, nil)
	e.hub.Publish(sse.NewEventID("rts", sse.ID(500, 0), "", []byte(`{"station":{},"box":{},"int":[],"time":500}`)))
	c := dial(t, e.url)
	send(t, c, `{"type":"start","token":"rts-key","topic":["websocket.trem.rts.v1","websocket.eew.v1","no.such.topic"]}`)
	info := recv(t, c)
	var topics struct{ Success, Failed []string }
	json.Unmarshal(info.Topic, &topics)
	if info.Type != "info" || info.Event != "connect" || info.Time == 0 ||
		strings.Join(topics.Success, ",") != "websocket.trem.rts.v1" || strings.Join(topics.Failed, ",") != "websocket.eew.v1,no.such.topic" {
		t.Fatalf("connect %+v %+v", info, topics)
	}
	// The latest RTS at once, then the live ones; EEW is not granted.
	if m := recv(t, c); m.Type != "data" || string(m.Payload) != `{"station":{},"box":{},"int":[],"time":500}` {
		t.Fatalf("latest %+v", m)
	}
	e.hub.Publish(sse.NewEventID("eew", sse.ID(1000, 1), "", []byte(`[]`)))
	e.hub.Publish(sse.NewEventID("rts", sse.ID(1000, 0), "", []byte(`{"station":{},"box":{},"int":[],"time":1000}`)))
	for {
		m := recv(t, c)
		if m.Type == "ntp" {
			if m.Time == 0 {
				t.Fatalf("ntp %+v", m)
			}
			continue
		}
		var topic string
		json.Unmarshal(m.Topic, &topic)
		if m.Type != "data" || topic != "websocket.trem.rts.v1" || !strings.Contains(string(m.Payload), `"time":1000`) {
			t.Fatalf("data %+v", m)
		}
		break
	}
	// ntp arrives on its own.
	for m := recv(t, c); m.Type != "ntp"; m = recv(t, c) {
	}
}

// TestDisconnectReasons: each documented reason, with the connection
// closed after it.
func TestDisconnectReasons(t *testing.T) {
	t.Parallel()
	e := startEdge(t, nil)
	for _, tc := range []struct {
		start, reason string
		code          websocket.StatusCode
	}{
		{`{"type":"start","topic":["websocket.trem.rts.v1"]}`, ReasonRequired, 1008},
		{`{"type":"start","token":"","topic":[]}`, ReasonRequired, 1008},
		{`{"type":"start","token":"shk_0000000000000000.nope","topic":[]}`, ReasonInvalid, 1008},
		{`{"type":"start","token":"gone-key","topic":[]}`, ReasonRevoked, 1008},
		{`hello`, ReasonFormat, 1002},
		{`{"type":"stop"}`, ReasonFormat, 1002},
		{`{"type":"start","token":"all-key","topic":"websocket.trem.rts.v1"}`, ReasonFormat, 1002},
		{`{"type":"start","token":"all-key","topic":[]} {"again":1}`, ReasonFormat, 1002},
	} {
		c := dial(t, e.url)
		send(t, c, tc.start)
		if m := recv(t, c); m.Type != "info" || m.Event != "disconnect" || m.Msg != tc.reason {
			t.Errorf("%s: %+v, want disconnect %q", tc.start, m, tc.reason)
		}
		if code := closedWith(t, c); code != tc.code {
			t.Errorf("%s: closed with %d, want %d", tc.start, code, tc.code)
		}
	}
	// The data API away: a server error, not a verdict on the token.
	e.keys.mu.Lock()
	e.keys.fail = true
	e.keys.mu.Unlock()
	c := dial(t, e.url)
	send(t, c, `{"type":"start","token":"all-key","topic":[]}`)
	if m := recv(t, c); m.Msg != ReasonServer {
		t.Errorf("data API away: %+v", m)
	}
}

// TestRevokedWhileConnected: a key revoked (or deleted) while its clients
// are connected disconnects them within a recheck.
func TestRevokedWhileConnected(t *testing.T) {
	t.Parallel()
	e := startEdge(t, nil)
	c := dial(t, e.url)
	send(t, c, `{"type":"start","token":"all-key","topic":["websocket.eew.v1"]}`)
	if m := recv(t, c); m.Event != "connect" {
		t.Fatalf("%+v", m)
	}
	e.keys.set("all-key", KeyState{Known: true, Revoked: true})
	for {
		m := recv(t, c)
		if m.Type == "ntp" {
			continue
		}
		if m.Event != "disconnect" || m.Msg != ReasonRevoked {
			t.Fatalf("%+v", m)
		}
		break
	}
	if code := closedWith(t, c); code != 1008 {
		t.Fatalf("closed with %d", code)
	}
}

// TestJunkAndFlood: frames after the start are counted and dropped, pings
// answered; a flood is disconnected; a client silent past the start
// timeout is closed; a frame too large or unmasked breaks the protocol.
func TestJunkAndFlood(t *testing.T) {
	t.Parallel()
	e := startEdge(t, func(o *Options) { o.StartTimeout = 300 * time.Millisecond })
	c := dial(t, e.url)
	send(t, c, `{"type":"start","token":"all-key","topic":[]}`)
	recv(t, c)
	for range 5 {
		send(t, c, `junk`)
	}
	for range 40 { // the server closes after the burst: later writes may fail
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Write(ctx, websocket.MessageText, []byte(`flood`))
		cancel()
	}
	for {
		m := recv(t, c)
		if m.Type == "ntp" {
			continue
		}
		if m.Msg != ReasonFlood {
			t.Fatalf("%+v", m)
		}
		break
	}

	// A ping is answered with a pong carrying its payload.
	conn, br := rawDial(t, e.url)
	conn.Write(masked(0x1, []byte(`{"type":"start","token":"all-key","topic":[]}`)))
	if m := rawRead(t, br); !strings.Contains(m, `"connect"`) {
		t.Fatalf("connect: %q", m)
	}
	conn.Write(masked(0x9, []byte("hi")))
	for {
		op, payload := rawFrame(t, br)
		if op == 0x1 { // an ntp message meanwhile
			continue
		}
		if op != 0xA || payload != "hi" {
			t.Fatalf("answer to a ping: opcode %x %q", op, payload)
		}
		break
	}
	conn.Close()

	// Silent after the upgrade: closed without a word.
	quiet := dial(t, e.url)
	if code := closedWith(t, quiet); code != -1 {
		t.Errorf("silent client: status %d", code)
	}

	// Raw frames: unmasked, and too large.
	for _, raw := range [][]byte{{0x81, 0x02, 'h', 'i'}, {0x81, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0}} {
		conn, br := rawDial(t, e.url)
		conn.Write(raw)
		if m := rawRead(t, br); !strings.Contains(m, ReasonFormat) {
			t.Errorf("frame %x: %q", raw, m)
		}
		conn.Close()
	}
}

// rawDial upgrades by hand, to send frames no client library would.
func rawDial(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/ws"), "ws://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return conn, br
}

// rawRead reads one server frame's payload.
func rawRead(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	_, p := rawFrame(t, br)
	return p
}

// rawFrame reads one server frame.
func rawFrame(t *testing.T, br *bufio.Reader) (byte, string) {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	n := int(hdr[1])
	if n == 126 {
		var ext [2]byte
		io.ReadFull(br, ext[:])
		n = int(ext[0])<<8 | int(ext[1])
	}
	b := make([]byte, n)
	io.ReadFull(br, b)
	return hdr[0] & 0x0F, string(b)
}

// masked is a client frame (FIN set, masked as RFC 6455 requires).
func masked(op byte, payload []byte) []byte { return clientFrame(true, op, payload) }

// clientFrame is a client frame, masked as RFC 6455 requires.
func clientFrame(fin bool, op byte, payload []byte) []byte {
	mask := []byte{7, 1, 3, 9}
	b := []byte{op}
	if fin {
		b[0] |= 0x80
	}
	if len(payload) < 126 {
		b = append(b, 0x80|byte(len(payload)))
	} else {
		b = append(b, 0x80|126, byte(len(payload)>>8), byte(len(payload)))
	}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// TestRefusals: what is not a proper upgrade is refused over HTTP, with a
// reason.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := startEdge(t, nil)
	base := "http" + strings.TrimPrefix(e.url, "ws")
	for _, tc := range []struct {
		header map[string]string
		code   int
	}{
		{nil, http.StatusUpgradeRequired},
		{map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusUpgradeRequired},
		{map[string]string{"Upgrade": "websocket", "Connection": "keep-alive, Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "short"}, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest("GET", base, nil)
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%v: %d, want %d", tc.header, resp.StatusCode, tc.code)
		}
	}
}

func FuzzParseStart(f *testing.F) {
	for _, s := range []string{`{"type":"start","token":"k","topic":["websocket.trem.rts.v1"]}`, `{"type":"start"}`, `[]`, `{"type":"start","topic":[1]}`, `{"type":"start","token":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		st, ok := parseStart(msg)
		if ok && (st.Type != "start" || len(st.Topic) > maxTopics) {
			t.Fatalf("%q: %+v", msg, st)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, s := range [][]byte{{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}, {0x89, 0x80, 0, 0, 0, 0}, {0x81, 0xFE, 0xFF, 0xFF}, {0x88, 0x82, 0, 0, 0, 0, 3, 0xE8}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := readFrame(bufio.NewReader(strings.NewReader(string(b))), 4096)
		if err == nil && len(fr.payload) > 4096 {
			t.Fatalf("%d bytes accepted", len(fr.payload))
		}
	})
}

// FuzzAssemble: a text message cut into a text frame and a continuation,
// with a ping between them, comes back whole, the ping answered with its
// payload, within the size bound; any bytes at all give a message within
// the bound or an error, never a panic.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte(`{"type":"start","key":"k","topic":["trem.rts.v1"]}`), uint8(7), true, []byte("p"), []byte{})
	f.Add([]byte("x"), uint8(0), false, []byte{}, []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2})
	f.Add(bytes.Repeat([]byte("y"), 200), uint8(150), true, []byte{}, []byte{0x80, 0x80, 0, 0, 0, 0})
	f.Add([]byte{}, uint8(0), false, []byte{}, []byte{0x01, 0x81, 0, 0, 0, 0, 'a', 0x01, 0x81, 0, 0, 0, 0, 'b'})
	const max = 128
	f.Fuzz(func(t *testing.T, payload []byte, cut uint8, ping bool, pingData, raw []byte) {
		if len(pingData) > 125 {
			pingData = pingData[:125]
		}
		k := min(int(cut), len(payload))
		in := clientFrame(false, opText, payload[:k])
		if ping {
			in = append(in, clientFrame(true, opPing, pingData)...)
		}
		in = append(in, clientFrame(true, opContinuation, payload[k:])...)
		var pongs [][]byte
		msg, err := assemble(bufio.NewReader(bytes.NewReader(in)), max, func(p []byte) error {
			pongs = append(pongs, bytes.Clone(p))
			return nil
		})
		switch {
		case len(payload) > max:
			if !errors.Is(err, errTooBig) {
				t.Fatalf("%d bytes: %v", len(payload), err)
			}
		case err != nil || !bytes.Equal(msg, payload):
			t.Fatalf("%q cut at %d: %q, %v", payload, k, msg, err)
		case ping && (len(pongs) != 1 || !bytes.Equal(pongs[0], pingData)):
			t.Fatalf("ping %q answered %q", pingData, pongs)
		}

		msg, err = assemble(bufio.NewReader(bytes.NewReader(raw)), max, func([]byte) error { return nil })
		if err == nil && len(msg) > max {
			t.Fatalf("%d bytes accepted", len(msg))
		}
	})
}

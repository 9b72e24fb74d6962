package seedlink

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"shindo.dev/devkit/poll"
	"shindo.dev/seismo/mseed"
)

type testServer struct {
	*Server
	addr string
}

func startServer(t testing.TB, mod func(*Options)) *testServer {
	t.Helper()
	opts := Options{
		Addr: "127.0.0.1:0", Window: time.Minute, ClientBuffer: 256, MaxClients: 100, MaxPerAddr: 20,
		Negotiation: 5 * time.Second, WriteTimeout: 2 * time.Second, Site: "TNN-1",
		Names: func(id string) (StationKey, bool) {
			if id == "unnamed" {
				return StationKey{}, false
			}
			return StationKey{Network: "SH", Station: strings.TrimPrefix(id, "S")}, true
		},
	}
	if mod != nil {
		mod(&opts)
	}
	s := New(opts, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String()}
}

// base is the first frame's time in the tests: a recent whole second.
var base = time.Now().Add(-30 * time.Second).Truncate(time.Second).UnixMilli()

// sensorFrame is station S00001's frame n: 25 samples from base+500*n ms,
// values derived from n.
func sensorFrame(n uint64) Frame { return sensorFrameAt(base+500*int64(n), n) }

func sensorFrameAt(ms int64, n uint64) Frame {
	ud, ns, ew := make([]int32, 25), make([]int32, 25), make([]int32, 25)
	for i := range ud {
		v := int32(n)*100 + int32(i)
		ud[i], ns[i], ew[i] = v, -v, 3*v
	}
	return Frame{Station: "S00001", Sensor: true, FirstMs: ms, UD: ud, NS: ns, EW: ew}
}

// client is a SeedLink client over TCP.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, cmd+"\r\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) line() string {
	c.t.Helper()
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read reply: %v (got %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// cmd sends a command and checks its reply.
func (c *client) cmd(cmd, want string) {
	c.t.Helper()
	c.send(cmd)
	if got := c.line(); got != want {
		c.t.Fatalf("%s: reply %q, want %q", cmd, got, want)
	}
}

// packet3 reads one SeedLink 3 data packet.
func (c *client) packet3() (uint64, *mseed.Record) {
	c.t.Helper()
	buf := make([]byte, 8+RecordLen)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		c.t.Fatalf("read packet: %v", err)
	}
	if string(buf[:2]) != "SL" {
		c.t.Fatalf("packet starts %q, want SL", buf[:8])
	}
	seq, err := strconv.ParseUint(string(buf[2:8]), 16, 32)
	if err != nil {
		c.t.Fatalf("sequence %q: %v", buf[2:8], err)
	}
	rec, err := mseed.Parse(buf[8:])
	if err != nil {
		c.t.Fatal(err)
	}
	return seq, rec
}

// packet4 reads one SeedLink 4 packet.
func (c *client) packet4() (format, subformat byte, seq uint64, station string, payload []byte) {
	c.t.Helper()
	h := make([]byte, 17)
	if _, err := io.ReadFull(c.r, h); err != nil {
		c.t.Fatalf("read packet: %v", err)
	}
	if string(h[:2]) != "SE" {
		c.t.Fatalf("packet starts %q, want SE", h[:2])
	}
	id := make([]byte, h[16])
	if _, err := io.ReadFull(c.r, id); err != nil {
		c.t.Fatal(err)
	}
	payload = make([]byte, binary.LittleEndian.Uint32(h[4:]))
	if _, err := io.ReadFull(c.r, payload); err != nil {
		c.t.Fatal(err)
	}
	return h[2], h[3], binary.LittleEndian.Uint64(h[8:]), string(id), payload
}

// TestProtocol3: the classic handshake of slinktool and seisplotjs's
// SeedLink 3 client; each packet is one 512-byte record of exactly the
// samples the station sent, numbered from the time of its first sample.
func TestProtocol3(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	c := dial(t, s.addr)
	c.send("HELLO")
	if l := c.line(); !strings.HasPrefix(l, "SeedLink v4.0 (") || !strings.Contains(l, ":: SLPROTO:4.0 SLPROTO:3.1") {
		t.Fatalf("HELLO line 1 %q", l)
	}
	if l := c.line(); l != "shindo TNN-1" {
		t.Fatalf("HELLO line 2 %q", l)
	}
	c.cmd("STATION 00001 SH", "OK")
	c.cmd("SELECT 00BNZ.D", "OK")
	c.cmd("DATA", "OK")
	c.send("END")
	waitStreaming(t, s, 1)
	for seq := uint64(1); seq <= 3; seq++ {
		f := sensorFrame(seq)
		s.Publish(f)
		got, rec := c.packet3()
		if want := uint64(f.FirstMs/20*8+3) & 0xFFFFFF; got != want {
			t.Errorf("frame %d: sequence %X, want %X (its first sample's index × 8 + BNZ's slot, 24 bits)", seq, got, want)
		}
		if rec.Network != "SH" || rec.Station != "00001" || rec.Location != "00" || rec.Channel != "BNZ" || rec.SampleRate != 50 {
			t.Errorf("record header %+v", rec.Header)
		}
		if !rec.Start.Equal(time.UnixMilli(f.FirstMs)) || !slices.Equal(rec.Ints, f.UD) {
			t.Errorf("frame %d: record from %v holds %v, want %v from %v", seq, rec.Start, rec.Ints, f.UD, time.UnixMilli(f.FirstMs))
		}
	}
}

// TestResumeAsObsPy: ObsPy's SeedLink client, reconnecting, asks for the
// packet after the last it got as Python's hex() writes it — "DATA
// 0x…" after its STATION and SELECT (obspy/clients/seedlink/client/
// seedlinkconnection.py, negotiate_station) — and gets exactly the
// packets from there; the number after 0xFFFFFF is 0.
func TestResumeAsObsPy(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	for seq := uint64(1); seq <= 3; seq++ {
		s.Publish(sensorFrame(seq))
	}
	second := uint64(sensorFrame(2).FirstMs/20*8+3) & 0xFFFFFF
	c := dial(t, s.addr)
	c.cmd("STATION 00001 SH", "OK")
	c.cmd("SELECT BNZ", "OK")
	c.cmd(fmt.Sprintf("DATA %#x", second), "OK")
	c.send("END")
	for n := uint64(2); n <= 3; n++ {
		got, rec := c.packet3()
		if want := uint64(sensorFrame(n).FirstMs/20*8+3) & 0xFFFFFF; got != want || !rec.Start.Equal(time.UnixMilli(sensorFrame(n).FirstMs)) {
			t.Fatalf("after DATA %#x: packet %X from %v, want %X from frame %d", second, got, rec.Start, want, n)
		}
	}
	for _, tc := range []struct {
		arg  string
		seq  uint64
		good bool
	}{{"0x1000000", 0, true}, {"0XABC", 0xABC, true}, {"abc", 0xABC, true}, {"0x", 0, false}, {"0x1000001", 0, false}, {"-0x1", 0, false}, {"0x+1", 0, false}} {
		if seq, ok := parseSeq3(tc.arg); ok != tc.good || seq != tc.seq {
			t.Errorf("parseSeq3(%q) = %X, %v; want %X, %v", tc.arg, seq, ok, tc.seq, tc.good)
		}
	}
}

func waitStreaming(t *testing.T, s *testServer, n int) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("%d sessions streaming", n), func() bool { return testutil.ToFloat64(s.m.streaming) >= float64(n) })
}

// streamOneFrame starts a protocol 4 client on station SH_00001 with the
// SELECT patterns sel, then publishes one sensor frame (returned) and the
// intensity frame after it: 2.5, 12 and 0.7.
func streamOneFrame(t *testing.T, s *testServer, sel string) (*client, Frame) {
	t.Helper()
	c := dial(t, s.addr)
	c.cmd("SLPROTO 4.0", "OK")
	c.cmd("USERAGENT test/1.0", "OK")
	c.cmd("STATION SH_00001", "OK")
	c.cmd("SELECT "+sel, "OK")
	c.cmd("DATA", "OK")
	c.send("END")
	waitStreaming(t, s, 1)
	f := sensorFrame(7)
	s.Publish(f)
	s.Publish(Frame{Station: "S00001", FirstMs: f.FirstMs + 500, Values: [3]float32{2.5, 12, 0.7}})
	return c, f
}

// TestProtocol4: SLPROTO 4.0 framing ("SE", format '2', subformat 'D',
// little-endian length and 64-bit sequence, NET_STA) and source-ID
// selectors; the intensity channels come as FLOAT32 records.
func TestProtocol4(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	c, f := streamOneFrame(t, s, "00_B_N_E 00_M_X_I")
	k := uint64(f.FirstMs / 20)
	want := []struct {
		seq     uint64
		channel string
	}{{k*8 + 5, "BNE"}, {k * 8, "MXI"}}
	for _, w := range want {
		format, sub, seq, id, payload := c.packet4()
		if format != '2' || sub != 'D' || id != "SH_00001" || seq != w.seq {
			t.Fatalf("packet %c%c seq %d station %q, want 2D %d SH_00001", format, sub, seq, id, w.seq)
		}
		rec, err := mseed.Parse(payload)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Channel != w.channel {
			t.Fatalf("channel %s, want %s", rec.Channel, w.channel)
		}
		switch w.channel {
		case "BNE":
			if !slices.Equal(rec.Ints, f.EW) {
				t.Errorf("BNE samples %v, want %v", rec.Ints, f.EW)
			}
		case "MXI":
			if len(rec.Floats) != 1 || rec.Floats[0] != 2.5 || rec.SampleRate != 2 {
				t.Errorf("MXI record %+v %v", rec.Header, rec.Floats)
			}
		}
	}
}

// TestResumeOnTheOtherCore: two cores fed the same station packets number
// their records alike, so a client that read part of the stream from one
// resumes on the other with DATA last+1 and gets the rest exactly: no gap,
// no repeat, record by record, for SeedLink 3's 24-bit numbers and
// SeedLink 4's 64-bit ones.
func TestResumeOnTheOtherCore(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{3, 4} {
		t.Run(fmt.Sprintf("protocol %d", proto), func(t *testing.T) {
			t.Parallel()
			a, b := startServer(t, nil), startServer(t, nil)
			// The frames sit around a 24-bit boundary of the numbers,
			// which SeedLink 3 must cross: the last before now.
			wrap := time.Now().UnixMilli() / 20 &^ (1<<21 - 1) * 20
			frame := func(i uint64) Frame { return sensorFrameAt(wrap-1500+500*int64(i), i) }
			for i := range uint64(10) {
				a.Publish(frame(i))
				b.Publish(frame(i))
			}
			read := func(c *client) (uint64, []int32) {
				if proto == 3 {
					seq, rec := c.packet3()
					return seq, rec.Ints
				}
				_, _, seq, _, payload := c.packet4()
				rec, err := mseed.Parse(payload)
				if err != nil {
					t.Fatal(err)
				}
				return seq, rec.Ints
			}
			start := func(s *testServer, data string) *client {
				c := dial(t, s.addr)
				if proto == 4 {
					c.cmd("SLPROTO 4.0", "OK")
					c.cmd("STATION SH_00001", "OK")
					c.cmd("SELECT 00_B_N_Z", "OK")
				} else {
					c.cmd("STATION 00001 SH", "OK")
					c.cmd("SELECT BNZ", "OK")
				}
				c.cmd(data, "OK")
				c.send("END")
				return c
			}
			var got [][]int32
			from := "DATA ALL"
			if proto == 3 {
				from = fmt.Sprintf("DATA %06X", uint64(frame(0).FirstMs/20*8)&0xFFFFFF)
			}
			c := start(a, from)
			var last uint64
			for range 4 {
				seq, x := read(c)
				last = seq
				got = append(got, x)
			}
			c.c.Close()
			next := fmt.Sprintf("DATA %d", last+1)
			if proto == 3 {
				next = fmt.Sprintf("DATA %06X", (last+1)&0xFFFFFF)
			}
			c = start(b, next)
			for range 6 {
				_, x := read(c)
				got = append(got, x)
			}
			for i, x := range got {
				if want := frame(uint64(i)).UD; !slices.Equal(x, want) {
					t.Fatalf("record %d holds %v, want %v", i, x, want)
				}
			}
			// Nothing more: the 10 frames were sent once each.
			b.Publish(frame(10))
			if _, x := read(c); !slices.Equal(x, frame(10).UD) {
				t.Fatalf("after the resumed ones: %v, want the next live frame", x)
			}
		})
	}
}

// TestTimeWindow: TIME (SeedLink 3) and DATA ALL start (SeedLink 4) send
// the held records from a time on, then live ones.
func TestTimeWindow(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	for seq := uint64(1); seq <= 10; seq++ {
		s.Publish(sensorFrame(seq))
	}
	from := time.UnixMilli(base + 500*6).UTC()
	for _, proto := range []int{3, 4} {
		c := dial(t, s.addr)
		if proto == 4 {
			c.cmd("SLPROTO 4.0", "OK")
			c.cmd("STATION SH_00001", "OK")
			c.cmd("SELECT 00_B_N_Z", "OK")
			c.cmd("DATA ALL "+from.Format("2006-01-02T15:04:05Z"), "OK")
		} else {
			c.cmd("STATION 00001 SH", "OK")
			c.cmd("SELECT BNZ", "OK")
			c.cmd("TIME "+from.Format("2006,01,02,15,04,05"), "OK")
		}
		c.send("END")
		for seq := uint64(6); seq <= 10; seq++ {
			var start time.Time
			if proto == 3 {
				_, rec := c.packet3()
				start = rec.Start
			} else {
				_, _, _, _, p := c.packet4()
				h, err := mseed.ParseHeader(p)
				if err != nil {
					t.Fatal(err)
				}
				start = h.Start
			}
			if want := time.UnixMilli(sensorFrame(seq).FirstMs); !start.Equal(want) {
				t.Fatalf("protocol %d: record from %v, want %v", proto, start, want)
			}
		}
	}
}

// TestInfo: INFO ID and STATIONS as JSON (SeedLink 4) and as XML in
// "SLINFO" records (SeedLink 3).
func TestInfo(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	s.Publish(sensorFrame(1))
	c := dial(t, s.addr)
	c.cmd("SLPROTO 4.0", "OK")
	c.send("INFO STREAMS")
	format, sub, _, _, payload := c.packet4()
	if format != 'J' || sub != 'I' {
		t.Fatalf("INFO packet %c%c, want JI", format, sub)
	}
	var doc jsonInfo
	if err := json.Unmarshal(payload, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Station) != 1 || doc.Station[0].ID != "SH_00001" || doc.Station[0].StartSeq != uint64(sensorFrame(1).FirstMs/20*8+3) || len(doc.Station[0].Stream) != 3 ||
		doc.Station[0].Stream[0].ID != "00_B_N_Z" {
		t.Fatalf("INFO STREAMS %s", payload)
	}
	c.send("INFO NOSUCH")
	if _, sub, _, _, payload := c.packet4(); sub != 'E' || !strings.Contains(string(payload), `"ARGUMENTS"`) {
		t.Fatalf("INFO NOSUCH: %c %s", sub, payload)
	}

	c3 := dial(t, s.addr)
	if xmlDoc := c3.info3("STATIONS"); !strings.Contains(string(xmlDoc), `<station name="00001" network="SH"`) {
		t.Fatalf("INFO STATIONS XML %s", xmlDoc)
	}
	// Protocol 3's capability names, as ringserver lists them: ObsPy's
	// EasySeedLinkClient selects streams only where "multistation" is.
	var caps struct {
		Capability []struct {
			Name string `xml:"name,attr"`
		} `xml:"capability"`
	}
	xmlDoc := c3.info3("CAPABILITIES")
	if err := xml.Unmarshal(xmlDoc, &caps); err != nil {
		t.Fatalf("INFO CAPABILITIES XML %s: %v", xmlDoc, err)
	}
	var names []string
	for _, c := range caps.Capability {
		names = append(names, c.Name)
	}
	for _, want := range []string{"dialup", "multistation", "window-extraction", "info:id", "info:capabilities", "info:stations", "info:streams"} {
		if !slices.Contains(names, want) {
			t.Errorf("INFO CAPABILITIES lacks %q: %s", want, xmlDoc)
		}
	}
}

// info3 reads the XML of a protocol 3 INFO answer from its "SLINFO"
// records.
func (c *client) info3(level string) []byte {
	c.t.Helper()
	c.send("INFO " + level)
	var xmlDoc []byte
	for {
		head := make([]byte, 8+RecordLen)
		if _, err := io.ReadFull(c.r, head); err != nil {
			c.t.Fatal(err)
		}
		if string(head[:6]) != "SLINFO" {
			c.t.Fatalf("INFO record starts %q", head[:8])
		}
		h, err := mseed.ParseHeader(head[8:])
		if err != nil {
			c.t.Fatal(err)
		}
		xmlDoc = append(xmlDoc, head[8+h.DataOffset:8+h.DataOffset+h.NumSamples]...)
		if head[7] == ' ' {
			return xmlDoc
		}
	}
}

// TestWebSocket: the same port speaks SeedLink over WebSocket with
// seisplotjs's subprotocols, one reply or packet per message.
func TestWebSocket(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+s.addr+"/seedlink", &websocket.DialOptions{Subprotocols: []string{"SeedLink4.0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "SeedLink4.0" {
		t.Fatalf("subprotocol %q", p)
	}
	say := func(cmd string) string {
		if err := c.Write(ctx, websocket.MessageText, []byte(cmd+"\r\n")); err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if hello := say("HELLO"); !strings.Contains(hello, "SLPROTO:4.0") || strings.Count(hello, "\r\n") != 2 {
		t.Fatalf("HELLO %q", hello)
	}
	for _, cmd := range []string{"SLPROTO 4.0", "STATION SH_00001", "SELECT 00_B_N_Z", "DATA"} {
		if r := say(cmd); r != "OK\r\n" {
			t.Fatalf("%s: %q", cmd, r)
		}
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("END\r\n")); err != nil {
		t.Fatal(err)
	}
	waitStreaming(t, s, 1)
	s.Publish(sensorFrame(3))
	_, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg[:2]) != "SE" || binary.LittleEndian.Uint64(msg[8:]) != uint64(sensorFrame(3).FirstMs/20*8+3) {
		t.Fatalf("packet %q", msg[:17])
	}
}

// TestBadInput: junk and unknown commands get ERROR and the session goes
// on; a line over MaxLine, and a negotiation that stalls, end the
// connection; connections over one address's budget are answered ERROR
// and closed; every case is counted.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *Options) { o.MaxPerAddr = 5; o.Negotiation = 300 * time.Millisecond })
	c := dial(t, s.addr)
	c.cmd("FROBNICATE now", "ERROR")
	c.cmd("CAPABILITIES EXTREPLY", "OK")
	c.send("SELECT 00BNZZZZ")
	if l := c.line(); l != "ERROR\rARGUMENTS invalid selector pattern" {
		t.Fatalf("bad SELECT: %q", l)
	}
	c.cmd("STATION NOSUCH XX", "OK") // as ringserver: a station may come later
	c.cmd("DATA ZZZZZZZ", "ERROR\rARGUMENTS invalid sequence number")
	c.cmd("TIME 2026,13,01,00,00,00", "ERROR\rARGUMENTS error parsing start time")
	c.send(strings.Repeat("A", MaxLine+10))
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("a line over the limit was answered")
	}
	if n := testutil.ToFloat64(s.m.ended.WithLabelValues("line_too_long")); n != 1 {
		t.Errorf("line_too_long counted %v", n)
	}

	stalled := dial(t, s.addr)
	stalled.send("HELLO")
	stalled.line()
	stalled.line()
	if _, err := stalled.r.ReadByte(); err == nil {
		t.Fatal("a stalled negotiation was not closed")
	}

	// The connections above are gone once the server has let them go.
	poll.Until(t, 5*time.Second, "no connection open", func() bool { return testutil.ToFloat64(s.m.connections) == 0 })
	var open []*client
	for range 5 {
		open = append(open, dial(t, s.addr))
	}
	for _, c := range open {
		c.cmd("HELLO", "SeedLink v4.0 (shindo-waveform) :: "+helloCapabilities)
		c.line()
	}
	extra := dial(t, s.addr)
	if l := extra.line(); l != "ERROR" {
		t.Fatalf("over the address budget: %q", l)
	}
	if _, err := extra.r.ReadByte(); err == nil {
		t.Fatal("over the address budget: still open")
	}
	if n := testutil.ToFloat64(s.m.turnedAway.WithLabelValues("address")); n != 1 {
		t.Errorf("turned away %v", n)
	}
	if n := testutil.ToFloat64(s.m.refused.WithLabelValues("UNSUPPORTED")); n != 1 {
		t.Errorf("UNSUPPORTED counted %v", n)
	}
}

// TestSlowClientDropped: a client that stops reading is dropped (its
// buffer fills, or a write to it times out), and a reading client misses
// nothing meanwhile.
func TestSlowClientDropped(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *Options) {
		o.ClientBuffer = 16
		o.WriteTimeout = 200 * time.Millisecond
		o.SendBuffer = 16 << 10
	})
	slow, fast := dial(t, s.addr), dial(t, s.addr)
	if err := slow.c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{slow, fast} {
		c.cmd("STATION 00001 SH", "OK")
		c.cmd("DATA", "OK")
		c.send("END")
	}
	waitStreaming(t, s, 2)
	var received atomic.Uint64
	bad := make(chan string, 1)
	go func() {
		for seq := uint64(1); ; seq++ {
			_ = fast.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for axis := range uint64(3) {
				buf := make([]byte, 8+RecordLen)
				if _, err := io.ReadFull(fast.r, buf); err != nil {
					return
				}
				want := uint64(sensorFrame(seq).FirstMs/20*8+3+int64(axis)) & 0xFFFFFF
				if n, _ := strconv.ParseUint(string(buf[2:8]), 16, 32); n != want {
					bad <- fmt.Sprintf("fast client got %X, want %X", n, want)
					return
				}
			}
			received.Store(seq)
		}
	}()
	slowGone := func() bool {
		return testutil.ToFloat64(s.m.ended.WithLabelValues("slow"))+testutil.ToFloat64(s.m.ended.WithLabelValues("timeout")) == 1
	}
	seq := uint64(1)
	for ; !slowGone(); seq++ {
		if seq > 100_000 {
			t.Fatal("the slow client was never dropped")
		}
		s.Publish(sensorFrame(seq))
		poll.Until(t, 5*time.Second, "the fast client keeps up", func() bool { return received.Load()+8 >= seq })
	}
	for n := seq + 10; seq < n; seq++ {
		s.Publish(sensorFrame(seq))
	}
	poll.Until(t, 5*time.Second, "the fast client has every frame", func() bool { return received.Load() == seq-1 })
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
	if n := testutil.ToFloat64(s.m.streaming); n != 1 {
		t.Fatalf("%v sessions streaming, want the fast one", n)
	}
}

// TestParseTime: both of SeedLink's time forms.
func TestParseTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 12, 2, 10, 20, 30, 0, time.UTC)
	for _, s := range []string{"2026,12,02,10,20,30", "2026-12-02T10:20:30Z", "2026-12-02T10:20:30", "2026-12-02T10:20:30.000000Z"} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if got, err := parseTime("2026-12-02T10:20:30.25Z"); err != nil || !got.Equal(want.Add(250*time.Millisecond)) {
		t.Errorf("fraction: %v %v", got, err)
	}
	for _, s := range []string{"", "2026,13,01", "x", "2026-12-02T10:20:30.Z", "1,2,3,4,5,6,7", "2026-12-02T10:20:30.1234567890"} {
		if _, err := parseTime(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

// TestResumeFromTheArchive: a client that resumes from further back than
// the ring holds (the core's svc-waveform restarted since, or it asks for
// minutes ago) gets the archive's samples first, then the ring's, then
// live ones: every sample once, in order, for a sequence number and for a
// time.
func TestResumeFromTheArchive(t *testing.T) {
	t.Parallel()
	// The archive holds frames 1–25 as one contiguous run, as it returns
	// them; the ring holds 18–30 (it started at 18).
	run := archivedRun(25)
	var reads atomic.Int32
	s := startServer(t, func(o *Options) {
		o.Archive = func(id string, fromMs, toMs int64) ([]Frame, error) {
			reads.Add(1)
			if id != "S00001" || fromMs >= toMs {
				return nil, fmt.Errorf("archive read of %s [%d, %d)", id, fromMs, toMs)
			}
			return []Frame{run}, nil
		}
	})
	for n := uint64(18); n <= 30; n++ {
		s.Publish(sensorFrame(n))
	}
	for _, c := range []struct{ start, sel string }{
		{fmt.Sprintf("DATA %d", seqAt(sensorFrame(5).FirstMs, 0)), "00_B_N_Z"},
		{"DATA ALL " + time.UnixMilli(sensorFrame(5).FirstMs).UTC().Format("2006-01-02T15:04:05.000Z"), "00_B_N_Z"},
		{fmt.Sprintf("DATA %d", seqAt(sensorFrame(5).FirstMs, 0)), "00_B_N_Z:3"},
	} {
		start := c.start + " " + c.sel
		cl := dial(t, s.addr)
		cl.cmd("SLPROTO 4.0", "OK")
		cl.cmd("STATION SH_00001", "OK")
		cl.cmd("SELECT "+c.sel, "OK")
		cl.cmd(c.start, "OK")
		cl.send("END")
		var got []int32
		var last uint64
		for len(got) < 26*25 {
			format, _, seq, _, payload := cl.packet4()
			if seq <= last {
				t.Fatalf("%s: record %d after %d", start, seq, last)
			}
			last = seq
			rec := decode(t, format, payload)
			if want := strings.HasSuffix(c.sel, ":3"); (format == '3') != want {
				t.Fatalf("%s: a record of format %c", start, format)
			}
			if want := time.UnixMilli(sensorFrame(5).FirstMs + int64(len(got))*20); !rec.Start.Equal(want) {
				t.Fatalf("%s: record from %v, want %v: a gap or a repeat", start, rec.Start, want)
			}
			got = append(got, rec.Ints...)
		}
		var want []int32
		for n := uint64(5); n <= 30; n++ {
			want = append(want, sensorFrame(n).UD...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: samples differ from the frames' from frame 5 on", start)
		}
	}
	if reads.Load() == 0 {
		t.Fatal("the archive was never read")
	}
}

// decode reads a protocol 4 packet's payload in its format.
func decode(t *testing.T, format byte, payload []byte) *mseed.Record {
	t.Helper()
	var rec *mseed.Record
	var err error
	switch format {
	case '2':
		rec, err = mseed.Parse(payload)
	case '3':
		rec, err = mseed.Parse3(payload)
		if err == nil && rec.RecordLen != len(payload) {
			err = fmt.Errorf("a record of %d bytes in a payload of %d", rec.RecordLen, len(payload))
		}
	default:
		err = fmt.Errorf("format %q", format)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestMiniSEED3: protocol 4's ":3" filter sends the streams it selects
// as miniSEED 3 records of exactly what arrived (format '3' in the
// header, numbered as the miniSEED 2 ones), the others stay miniSEED 2,
// and INFO FORMATS lists both, as ringserver does.
func TestMiniSEED3(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	c, f := streamOneFrame(t, s, "00_B_N_Z:3 00_B_N_E 00_M_X_?:3")
	k := uint64(f.FirstMs / 20)
	for _, w := range []struct {
		seq     uint64
		format  byte
		channel string
	}{{k*8 + 5, '2', "BNE"}, {k*8 + 3, '3', "BNZ"}, {k * 8, '3', "MXI"}, {k*8 + 1, '3', "MXA"}, {k*8 + 2, '3', "MXV"}} {
		format, sub, seq, id, payload := c.packet4()
		// The packets of one frame come by format: miniSEED 2 first.
		if format != w.format || sub != 'D' || id != "SH_00001" || seq != w.seq {
			t.Fatalf("packet %c%c seq %d station %q, want %c %d (%s)", format, sub, seq, id, w.format, w.seq, w.channel)
		}
		rec := decode(t, format, payload)
		if rec.Channel != w.channel || rec.Network != "SH" || rec.Station != "00001" || rec.Location != "00" {
			t.Fatalf("record of %s, want %s", rec.SourceName(), w.channel)
		}
		switch w.channel {
		case "BNZ":
			if !slices.Equal(rec.Ints, f.UD) || !rec.Start.Equal(time.UnixMilli(f.FirstMs)) || rec.SampleRate != 50 {
				t.Errorf("BNZ record %+v %v, want %v", rec.Header, rec.Ints, f.UD)
			}
			// Exactly what arrived: the header, the identifier and the
			// Steim-2 frames 25 samples need, not a 512-byte block.
			if want := mseed.FixedHeader3Len + len("FDSN:SH_00001_00_B_N_Z") + mseed.FrameLen*((25+2+14)/15); len(payload) > want {
				t.Errorf("a miniSEED 3 record of %d bytes for 25 samples, want at most %d", len(payload), want)
			}
		case "MXI":
			if len(rec.Floats) != 1 || rec.Floats[0] != 2.5 || rec.SampleRate != 2 {
				t.Errorf("MXI record %+v %v", rec.Header, rec.Floats)
			}
		}
	}

	i := dial(t, s.addr)
	i.cmd("SLPROTO 4.0", "OK")
	i.send("INFO FORMATS")
	format, sub, _, _, body := i.packet4()
	var v struct {
		Format map[string]struct {
			Mimetype string `json:"mimetype"`
		} `json:"format"`
		Filter map[string]string `json:"filter"`
	}
	if err := json.Unmarshal(body, &v); err != nil || format != 'J' || sub != 'I' {
		t.Fatalf("INFO FORMATS: %c%c %s: %v", format, sub, body, err)
	}
	if v.Format["3"].Mimetype != "application/vnd.fdsn.mseed3" || v.Filter["3"] == "" || v.Format["2"].Mimetype != "application/vnd.fdsn.mseed" {
		t.Errorf("INFO FORMATS: %s", body)
	}
}

// TestThousandIdleFromOneAddress: 1,000 connections from one address that
// say nothing: the address's budget is served (and closed once the
// negotiation times out), the rest are answered ERROR and closed at once,
// all counted, and a client in data flow meanwhile misses nothing.
func TestThousandIdleFromOneAddress(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *Options) { o.MaxPerAddr, o.MaxClients = 64, 2000; o.Negotiation = 2 * time.Second })
	live := dial(t, s.addr)
	live.cmd("STATION 00001 SH", "OK")
	live.cmd("SELECT BNZ", "OK")
	live.cmd("DATA", "OK")
	live.send("END")
	waitStreaming(t, s, 1)

	conns := make([]net.Conn, 0, 1000)
	for range 1000 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	poll.Until(t, 10*time.Second, "1,000 connections accepted or turned away", func() bool {
		return testutil.ToFloat64(s.m.turnedAway.WithLabelValues("address")) == 1000-63
	})
	for seq := uint64(1); seq <= 20; seq++ {
		f := sensorFrame(seq)
		s.Publish(f)
		if _, rec := live.packet3(); !slices.Equal(rec.Ints, f.UD) {
			t.Fatalf("frame %d: the live client got %v", seq, rec.Ints)
		}
	}
	// The idle ones within the budget are closed when their negotiation
	// times out.
	poll.Until(t, 10*time.Second, "idle connections timed out", func() bool {
		return testutil.ToFloat64(s.m.ended.WithLabelValues("timeout")) == 63
	})
	if n := testutil.ToFloat64(s.m.connections); n != 1 {
		t.Fatalf("%v connections open, want the live one", n)
	}
}

// TestProxiesNotHeldToTheAddressBudget: an edge carries many clients from
// its one address; its connections (Proxy) are held to the total limit
// only, while others from an address stop at MaxPerAddr.
func TestProxiesNotHeldToTheAddressBudget(t *testing.T) {
	t.Parallel()
	var proxied atomic.Bool
	proxied.Store(true)
	s := startServer(t, func(o *Options) {
		o.MaxPerAddr, o.MaxClients = 2, 7
		o.Proxy = func(net.Conn) bool { return proxied.Load() }
	})
	hello := func(c *client) string {
		c.send("HELLO")
		return c.line()
	}
	for i := range 4 {
		if l := hello(dial(t, s.addr)); !strings.HasPrefix(l, "SeedLink v4.0") {
			t.Fatalf("proxied connection %d: %q", i+1, l)
		}
	}
	proxied.Store(false)
	for i := range 2 {
		if l := hello(dial(t, s.addr)); !strings.HasPrefix(l, "SeedLink v4.0") {
			t.Fatalf("direct connection %d: %q", i+1, l)
		}
	}
	if l := dial(t, s.addr).line(); l != "ERROR" {
		t.Fatalf("a third direct connection from the address: %q, want ERROR", l)
	}
	proxied.Store(true)
	if l := hello(dial(t, s.addr)); !strings.HasPrefix(l, "SeedLink v4.0") {
		t.Fatalf("a fifth proxied connection: %q", l)
	}
	if l := dial(t, s.addr).line(); l != "ERROR" {
		t.Fatalf("an eighth connection: %q, want ERROR (the total limit)", l)
	}
	if a, l := testutil.ToFloat64(s.m.turnedAway.WithLabelValues("address")), testutil.ToFloat64(s.m.turnedAway.WithLabelValues("limit")); a != 1 || l != 1 {
		t.Errorf("turned away: %v by address, %v by the limit; want 1 and 1", a, l)
	}
}

// TestTimeWindowEnds: a session asking for a window with an end (protocol
// 3's TIME start end, protocol 4's DATA ALL start end) gets the records in
// it and, once its station's data passed the end, END and a close, as
// ringserver ends a time window; one without an end goes on.
func TestTimeWindowEnds(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	for n := uint64(1); n <= 4; n++ {
		s.Publish(sensorFrame(n))
	}
	at := func(n uint64) time.Time { return time.UnixMilli(sensorFrame(n).FirstMs).UTC() }
	v3 := func(t time.Time) string { return t.Format("2006,01,02,15,04,05") }
	for _, tc := range []struct {
		proto int
		cmds  []string
	}{
		{3, []string{"STATION 00001 SH", "SELECT BNZ", "TIME " + v3(at(2)) + " " + v3(at(6))}},
		{4, []string{"SLPROTO 4.0", "STATION SH_00001", "SELECT 00_B_N_Z",
			"DATA ALL " + at(2).Format(time.RFC3339) + " " + at(6).Format(time.RFC3339)}},
	} {
		c := dial(t, s.addr)
		for _, cmd := range tc.cmds {
			c.cmd(cmd, "OK")
		}
		c.send("END")
		var got []time.Time
		read := func() {
			if tc.proto == 3 {
				_, rec := c.packet3()
				got = append(got, rec.Start)
				return
			}
			_, _, _, _, payload := c.packet4()
			got = append(got, decode(t, '2', payload).Start)
		}
		for range 3 { // frames 2, 3 and 4 are held
			read()
		}
		// Frames 5 (in the window) and 7 (past its end) arrive live.
		s.Publish(sensorFrame(5))
		read()
		s.Publish(sensorFrame(7))
		end := make([]byte, 3)
		if _, err := io.ReadFull(c.r, end); err != nil || string(end) != "END" {
			t.Fatalf("protocol %d: after the window %q %v, want END", tc.proto, end, err)
		}
		if _, err := c.r.ReadByte(); err == nil {
			t.Fatalf("protocol %d: still open after END", tc.proto)
		}
		if want := []time.Time{at(2), at(3), at(4), at(5)}; !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("protocol %d: records from %v, want %v", tc.proto, got, want)
		}
	}
	if n := testutil.ToFloat64(s.m.ended.WithLabelValues("window_ended")); n != 2 {
		t.Errorf("sessions ended with their window: %v", n)
	}
}

// TestInfoConnections: INFO CONNECTIONS lists every session — its address,
// how it is carried, its user agent, protocol, stations and selectors, what
// it was sent — to a trusted client, as ringserver's JSON does; others get
// UNAUTHORIZED, as from ringserver.
func TestInfoConnections(t *testing.T) {
	t.Parallel()
	var trusted sync.Map // local address of a trusted client's connection
	s := startServer(t, func(o *Options) {
		o.Trusted = func(c net.Conn) bool { _, ok := trusted.Load(c.RemoteAddr().String()); return ok }
	})
	c, f := streamOneFrame(t, s, "00_B_N_Z:3 !00_M_X_?")
	c.packet4()
	_ = f
	info := func(c *client) (byte, []byte) {
		t.Helper()
		c.send("INFO CONNECTIONS")
		format, sub, _, _, body := c.packet4()
		if format != 'J' {
			t.Fatalf("INFO CONNECTIONS: format %c", format)
		}
		return sub, body
	}
	op := dial(t, s.addr)
	trusted.Store(op.c.LocalAddr().String(), true)
	op.cmd("SLPROTO 4.0", "OK")
	op.cmd("USERAGENT operator/1", "OK")
	sub, body := info(op)
	var v struct {
		Connections struct {
			ClientCount int `json:"client_count"`
			Client      []struct {
				IPAddress       string `json:"ip_address"`
				ClientPort      string `json:"client_port"`
				Type            string `json:"type"`
				ClientID        string `json:"client_id"`
				TransmitPackets uint64 `json:"transmit_packets"`
				TransmitBytes   uint64 `json:"transmit_bytes"`
				ProtocolVersion string `json:"protocol_version"`
				Station         []struct {
					ID       string   `json:"id"`
					Selector []string `json:"selector"`
				} `json:"station"`
			} `json:"client"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &v); err != nil || sub != 'I' {
		t.Fatalf("INFO CONNECTIONS: %c %s %v", sub, body, err)
	}
	if v.Connections.ClientCount != 2 || len(v.Connections.Client) != 2 {
		t.Fatalf("connections %s", body)
	}
	streamer := v.Connections.Client[0]
	if streamer.ClientPort != strings.Split(c.c.LocalAddr().String(), ":")[1] || streamer.IPAddress != "127.0.0.1" ||
		streamer.Type != "SeedLink" || streamer.ClientID != "test/1.0" || streamer.ProtocolVersion != "4.0" ||
		streamer.TransmitPackets != 1 || streamer.TransmitBytes == 0 || len(streamer.Station) != 1 ||
		streamer.Station[0].ID != "SH_00001" || strings.Join(streamer.Station[0].Selector, " ") != "00_B_N_Z:3 !00_M_X_?" {
		t.Errorf("the streaming client: %+v", streamer)
	}
	if v.Connections.Client[1].ClientID != "operator/1" {
		t.Errorf("the operator's own: %+v", v.Connections.Client[1])
	}
	// While streaming, an untrusted client asks: refused.
	if sub, body := info(c); sub != 'E' || !strings.Contains(string(body), "UNAUTHORIZED") {
		t.Errorf("an untrusted client: %c %s", sub, body)
	}
}

// TestResumeAtARestartedCore: a client resuming at a core whose ring does
// not hold its station yet (svc-waveform just restarted) gets, when the
// station's first frame comes, what the archive holds from where it asked
// up to that frame, then the live frames — each once, also a frame the
// archive had whose delivery was still queued.
func TestResumeAtARestartedCore(t *testing.T) {
	t.Parallel()
	run := archivedRun(25)
	s := startServer(t, func(o *Options) {
		o.Archive = func(id string, fromMs, toMs int64) ([]Frame, error) {
			if id != "S00001" {
				return nil, fmt.Errorf("archive read of %s", id)
			}
			// The run, cut to [fromMs, toMs) as the archive reads.
			f := run
			lo, hi := max((fromMs-f.FirstMs)/20, 0), min((toMs-f.FirstMs)/20, int64(len(f.UD)))
			if lo >= hi {
				return nil, nil
			}
			f.FirstMs += lo * 20
			f.UD, f.NS, f.EW = f.UD[lo:hi], f.NS[lo:hi], f.EW[lo:hi]
			return []Frame{f}, nil
		}
	})
	c := dial(t, s.addr)
	c.cmd("SLPROTO 4.0", "OK")
	c.cmd("STATION SH_00001", "OK")
	c.cmd("SELECT 00_B_N_Z", "OK")
	c.cmd(fmt.Sprintf("DATA %d", seqAt(sensorFrame(5).FirstMs, 0)), "OK")
	c.send("END")
	waitStreaming(t, s, 1)
	// The ring is empty. The station's first frame comes, then one the
	// archive had (stored before the backfill read it, delivered after),
	// then the next.
	s.Publish(sensorFrame(26))
	s.Publish(sensorFrame(25))
	s.Publish(sensorFrame(27))
	var got []int32
	want := []int32{}
	for n := uint64(5); n <= 27; n++ {
		want = append(want, sensorFrame(n).UD...)
	}
	next := sensorFrame(5).FirstMs
	for len(got) < len(want) {
		_, _, _, _, payload := c.packet4()
		rec := decode(t, '2', payload)
		if ms := rec.Start.UnixMilli(); ms != next {
			t.Fatalf("a record from %+d ms after the previous ended: a gap or a repeat", ms-next)
		}
		next += int64(len(rec.Ints)) * 20
		got = append(got, rec.Ints...)
	}
	if !slices.Equal(got, want) {
		t.Fatal("samples differ from frames 5 to 27")
	}
}

// archivedRun is frames 1 to last of station S00001 as the archive
// returns them: one contiguous run of samples.
func archivedRun(last uint64) Frame {
	var run Frame
	for n := uint64(1); n <= last; n++ {
		f := sensorFrame(n)
		if n == 1 {
			run = Frame{Station: f.Station, Sensor: true, FirstMs: f.FirstMs}
		}
		run.UD, run.NS, run.EW = append(run.UD, f.UD...), append(run.NS, f.NS...), append(run.EW, f.EW...)
	}
	return run
}

// TestRefusedWebSocketRequestLetsGo: an HTTP request on the SeedLink port
// that is no WebSocket upgrade is answered and its connection closed: kept
// alive, it would hold a connection slot for as long as the client
// cared to, as net/http waits for a next request without a deadline.
func TestRefusedWebSocketRequestLetsGo(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *Options) { o.MaxPerAddr = 2 })
	c := dial(t, s.addr)
	if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("a plain GET answered %s", resp.Status)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := c.r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the refusal the connection read %d, %v; want it closed", n, err)
	}
	if !poll.Within(3*time.Second, func() bool { return s.connCount() == 0 }) {
		t.Fatalf("%d connections held after the refusal", s.connCount())
	}
}

// connCount is how many connections s holds.
func (s *testServer) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// TestSlowLineCut: a command line must arrive within the negotiation
// timeout as a whole; a client sending a byte now and then, each within
// the timeout, is cut all the same.
func TestSlowLineCut(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *Options) { o.Negotiation = 500 * time.Millisecond })
	c := dial(t, s.addr)
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if _, err := c.c.Write([]byte("H")); err != nil {
			break // cut
		}
		//nolint:forbidigo // the trickle is the case under test
		time.Sleep(100 * time.Millisecond)
	}
	if !poll.Within(2*time.Second, func() bool { return s.connCount() == 0 }) {
		t.Fatalf("a line trickling in for %v still holds its connection", time.Since(start).Round(time.Second))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cut after %v; the negotiation timeout is 500ms", took)
	}
}

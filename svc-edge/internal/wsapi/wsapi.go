// Package wsapi is the edge's WebSocket API, the one subscribed apps use
// (ExpTech's API documentation, docs/api/socket/index.mdx of
// ExpTechTW/api-docs at e38086b):
//
//	client: {"type":"start","token":"<API key>","topic":["websocket.trem.rts.v1",…]}
//	server: {"type":"info","event":"connect","topic":{"success":[…],"failed":[…]},"time":ms}
//	server: {"type":"data","topic":"websocket.trem.rts.v1","payload":{…},"time":ms}
//	server: {"type":"ntp","time":ms}                       every 60 s
//	server: {"type":"info","event":"disconnect","msg":"Token invalid","time":ms}
//
// The token is an API key of the data API (a client with the topics it may
// subscribe to, checked through the cores: Keys); a topic it may not have,
// or that does not exist, is listed as failed. Payloads are the events of
// the edge's SSE hub, byte for byte what the compatible SSE routes send,
// and each event's frame is made once for all WebSocket clients: an idle
// client costs its socket, one goroutine parked on its next frame, and a
// small buffer. Keys are checked again every few seconds, so a revoked key
// is disconnected within seconds.
//
// Disconnect reasons are the documented ones ("Token required", "Token
// invalid", "Token has been revoked", "Invalid message format", "Server
// error") and one of ours, "Too many messages", for a client that floods.
// After a disconnect message the server closes the connection with status
// 1008 (policy violation) for token reasons, 1002 (protocol error) for bad
// messages and floods, 1011 (internal error) for server errors.
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/peerwrite"
	"shindo.dev/svc-edge/internal/sse"
)

// Topic is a public topic of the WebSocket API and the hub topic whose
// events it carries.
type Topic struct {
	Name string // e.g. websocket.trem.rts.v1
	Hub  string // e.g. rts
}

// Topics are the topics served, their payloads those of the SSE routes:
// websocket.trem.rts.v1 is ExpTech's documented name (docs/api/socket/rts.mdx);
// the others follow its pattern.
var Topics = []Topic{
	{"websocket.trem.rts.v1", "rts"},
	{"websocket.eew.v1", "eew"},
	{"websocket.trem.intensity.v1", "intensity"},
	{"websocket.trem.lpgm.v1", "lpgm"},
	{"websocket.report.v1", "report"},
}

// ntpTopic is the hub topic of the ntp messages.
const ntpTopic = "ntp"

// The disconnect reasons.
const (
	ReasonRequired = "Token required"
	ReasonInvalid  = "Token invalid"
	ReasonRevoked  = "Token has been revoked"
	ReasonFormat   = "Invalid message format"
	ReasonServer   = "Server error"
	ReasonFlood    = "Too many messages"
)

// Close codes after a disconnect (RFC 6455 §7.4.1).
const (
	closePolicy   = 1008
	closeProtocol = 1002
	closeInternal = 1011
	closeNormal   = 1000
)

// KeyState is what the data API says of a key.
type KeyState struct {
	Known   bool
	Revoked bool
	KeyID   string
	Admin   bool     // may subscribe to every topic
	Topics  []string // topics it may subscribe to; "*" for all
}

// Allows reports whether the key may subscribe to topic.
func (k KeyState) Allows(topic string) bool {
	return k.Admin || slices.Contains(k.Topics, "*") || slices.Contains(k.Topics, topic)
}

// Keys checks API keys (through the cores' data API). addr is the address
// of the client presenting them, "" for the edge's own checks.
type Keys interface {
	Check(ctx context.Context, addr string, keys []string) ([]KeyState, error)
}

// Options tune the server.
type Options struct {
	Hub  *sse.Hub
	Keys Keys
	// Addr names a request's client, and Acquire and Release hold one of a
	// client address's connections (the edge's per-address limit, shared
	// with SSE); Acquire false refuses.
	Addr    func(*http.Request) string
	Acquire func(addr string) bool
	Release func(addr string)
	// MaxClients bounds the WebSocket clients of the edge.
	MaxClients int
	// StartTimeout is how long a client has to send its start message.
	StartTimeout time.Duration
	// MaxMessage bounds a client message, bytes.
	MaxMessage int
	// Recheck is how often the keys of connected clients are checked again.
	Recheck time.Duration
	// NTP is the interval of ntp messages.
	NTP time.Duration
	// FrameRate and FrameBurst bound what a client may send (frames per
	// second, sustained and at once) before it is disconnected.
	FrameRate  float64
	FrameBurst float64
	Log        *slog.Logger
}

// Defaults returns the options' defaults (Hub, Keys, Acquire, Release and
// Log still to set).
func Defaults() Options {
	return Options{MaxClients: 60000, StartTimeout: 10 * time.Second, MaxMessage: 4096,
		Recheck: 3 * time.Second, NTP: time.Minute, FrameRate: 5, FrameBurst: 20}
}

// Server serves the WebSocket API.
type Server struct {
	opts   Options
	byName map[string]string // public topic → hub topic

	mu       sync.Mutex
	sessions map[*session]struct{}

	clients     prometheus.GaugeFunc
	refused     *prometheus.CounterVec
	disconnects *prometheus.CounterVec
	junk        prometheus.Counter
}

type session struct {
	key  string
	addr string
	conn *sse.Conn
	once sync.Once
}

// New returns a server.
func New(opts Options) *Server {
	s := &Server{opts: opts, byName: map[string]string{}, sessions: map[*session]struct{}{}}
	for _, t := range Topics {
		s.byName[t.Name] = t.Hub
	}
	s.clients = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shindo_edge_ws_clients", Help: "Connected WebSocket API clients (started).",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.sessions)) })
	s.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_edge_ws_refused_total", Help: "WebSocket upgrades refused before the handshake, by reason.",
	}, []string{"reason"})
	s.disconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shindo_edge_ws_disconnects_total", Help: "WebSocket API clients disconnected by the server, by reason.",
	}, []string{"reason"})
	s.junk = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shindo_edge_ws_junk_frames_total", Help: "Frames from started WebSocket clients that were dropped (the API takes none after start).",
	})
	return s
}

// Collectors returns the server's metrics.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.clients, s.refused, s.disconnects, s.junk}
}

// hubNames maps the hub's topics to the public ones.
var hubNames = func() map[string]string {
	m := map[string]string{}
	for _, t := range Topics {
		m[t.Hub] = t.Name
	}
	return m
}()

// Frame makes the WebSocket frame of a hub event: a data message of its
// public topic, the payload the SSE stream carries, and the time the
// edge published it; nil for events no WebSocket topic carries. The hub
// makes it once per event (sse.Options.WebSocket).
func Frame(e *sse.Event) []byte {
	name, ok := hubNames[e.Topic()]
	if !ok {
		return nil
	}
	data := e.Data()
	b := make([]byte, 0, len(data)+len(name)+64)
	b = append(b, `{"type":"data","topic":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"payload":`...)
	b = append(b, data...)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, e.At().UnixMilli(), 10)
	b = append(b, '}')
	return TextFrame(b)
}

// Run sends the ntp messages and checks the keys of the connected clients
// again until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ntp := time.NewTicker(s.opts.NTP)
	defer ntp.Stop()
	recheck := time.NewTicker(s.opts.Recheck)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-ntp.C:
			b := strconv.AppendInt([]byte(`{"type":"ntp","time":`), now.UnixMilli(), 10)
			s.opts.Hub.Publish(sse.NewRaw(ntpTopic, TextFrame(append(b, '}'))))
		case <-recheck.C:
			s.recheck(ctx)
		}
	}
}

// maxBatch is how many keys one check asks about.
const maxBatch = 500

// recheck asks about the keys of the connected clients and disconnects
// those whose key was revoked or is gone.
func (s *Server) recheck(ctx context.Context) {
	s.mu.Lock()
	byKey := map[string][]*session{}
	for ss := range s.sessions {
		byKey[ss.key] = append(byKey[ss.key], ss)
	}
	s.mu.Unlock()
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	for len(keys) > 0 {
		batch := keys[:min(maxBatch, len(keys))]
		keys = keys[len(batch):]
		cctx, cancel := context.WithTimeout(ctx, s.opts.Recheck)
		states, err := s.opts.Keys.Check(cctx, "", batch)
		cancel()
		if err != nil {
			// The data API is away: clients stay until it answers.
			s.opts.Log.WarnContext(ctx, "websocket: keys not checked again", slog.Any("error", err))
			return
		}
		for i, st := range states {
			reason := ""
			switch {
			case !st.Known:
				reason = ReasonInvalid
			case st.Revoked:
				reason = ReasonRevoked
			default:
				continue
			}
			for _, ss := range byKey[batch[i]] {
				s.disconnect(ss, reason, closePolicy)
			}
		}
	}
}

// disconnect tells a started client why it is disconnected, then closes.
func (s *Server) disconnect(ss *session, reason string, code uint16) {
	ss.once.Do(func() {
		s.disconnects.WithLabelValues(reason).Inc()
		ss.conn.Send(append(disconnectFrame(reason), closeFrame(code, "")...), true)
	})
}

func disconnectFrame(reason string) []byte {
	b := []byte(`{"type":"info","event":"disconnect","msg":`)
	b = strconv.AppendQuote(b, reason)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	return TextFrame(append(b, '}'))
}

// ServeHTTP upgrades GET /ws (and /websocket) to the WebSocket API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	switch {
	case !headerHas(r.Header, "Upgrade", "websocket") || !headerHas(r.Header, "Connection", "upgrade"):
		s.refuse(w, http.StatusUpgradeRequired, "not a websocket upgrade", "this is the WebSocket API: connect with a WebSocket client")
		return
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		s.refuse(w, http.StatusUpgradeRequired, "version", "Sec-WebSocket-Version: 13 only")
		return
	case !validKey(key):
		s.refuse(w, http.StatusBadRequest, "bad key", "Sec-WebSocket-Key: 16 bytes in base64")
		return
	}
	addr := s.opts.Addr(r)
	s.mu.Lock()
	full := len(s.sessions) >= s.opts.MaxClients
	s.mu.Unlock()
	if full {
		w.Header().Set("Retry-After", "3")
		s.refuse(w, http.StatusServiceUnavailable, "full", "too many clients on this edge")
		return
	}
	if !s.opts.Acquire(addr) {
		w.Header().Set("Retry-After", "3")
		s.refuse(w, http.StatusTooManyRequests, "per address", "too many connections from this address")
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.opts.Release(addr)
		s.refuse(w, http.StatusInternalServerError, "hijack", "this connection cannot be upgraded")
		return
	}
	conn.SetWriteDeadline(time.Now().Add(s.opts.StartTimeout))
	if _, err := conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		acceptKey(key) + "\r\n\r\n")); err != nil {
		conn.Close()
		s.opts.Release(addr)
		return
	}
	// A client may send its start message right behind the request: bytes
	// net/http read ahead are read first. The reader is small, as it
	// lives as long as the connection.
	var src io.Reader = conn
	if n := brw.Reader.Buffered(); n > 0 {
		ahead, _ := brw.Reader.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), conn)
	}
	go s.session(conn, bufio.NewReaderSize(src, 512), addr)
}

func (s *Server) refuse(w http.ResponseWriter, code int, reason, msg string) {
	s.refused.WithLabelValues(reason).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(b)
}

// start is the client's first message.
type start struct {
	Type  string   `json:"type"`
	Token *string  `json:"token"`
	Topic []string `json:"topic"`
}

// Bounds on the start message.
const (
	maxTopics   = 32
	maxTopicLen = 64
	maxTokenLen = 256
)

// parseStart reads a start message; false for anything else.
func parseStart(msg []byte) (start, bool) {
	var st start
	dec := json.NewDecoder(strings.NewReader(string(msg)))
	if err := dec.Decode(&st); err != nil || dec.More() || st.Type != "start" || len(st.Topic) > maxTopics {
		return start{}, false
	}
	if st.Token != nil && len(*st.Token) > maxTokenLen {
		return start{}, false
	}
	for _, t := range st.Topic {
		if t == "" || len(t) > maxTopicLen {
			return start{}, false
		}
	}
	return st, true
}

// session runs one connection: the start message, then the client's
// frames until it leaves.
func (s *Server) session(conn net.Conn, br *bufio.Reader, addr string) {
	release := sync.OnceFunc(func() { s.opts.Release(addr) })
	fail := func(reason string, code uint16) {
		s.disconnects.WithLabelValues(reason).Inc()
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		// The connection is closed next either way; a client that does
		// not take the reason within the second loses only the reason.
		_, _ = conn.Write(append(disconnectFrame(reason), closeFrame(code, "")...))
		// Not crypto/tls's Close, which would wait 5 s more to write its
		// alert where the reason did not fit, holding the address's slot.
		_ = peerwrite.Close(conn)
		release()
	}
	conn.SetReadDeadline(time.Now().Add(s.opts.StartTimeout))
	msg, err := s.firstMessage(conn, br)
	if err != nil {
		if errors.Is(err, errProtocol) || errors.Is(err, errTooBig) || errors.Is(err, errNotText) {
			fail(ReasonFormat, closeProtocol)
			return
		}
		_ = peerwrite.Close(conn) // gone, or silent past the start timeout
		release()
		return
	}
	st, ok := parseStart(msg)
	switch {
	case !ok:
		fail(ReasonFormat, closeProtocol)
		return
	case st.Token == nil || *st.Token == "":
		fail(ReasonRequired, closePolicy)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	states, err := s.opts.Keys.Check(ctx, addr, []string{*st.Token})
	cancel()
	switch {
	case err != nil || len(states) != 1:
		s.opts.Log.WarnContext(ctx, "websocket: key not checked", slog.String("addr", addr), slog.Any("error", err))
		fail(ReasonServer, closeInternal)
		return
	case !states[0].Known:
		fail(ReasonInvalid, closePolicy)
		return
	case states[0].Revoked:
		fail(ReasonRevoked, closePolicy)
		return
	}
	key := states[0]
	want := map[string]bool{ntpTopic: true}
	success, failed := []string{}, []string{}
	for _, t := range st.Topic {
		hub, known := s.byName[t]
		switch {
		case known && key.Allows(t):
			want[hub] = true
			if !slices.Contains(success, t) {
				success = append(success, t)
			}
		case !slices.Contains(failed, t):
			failed = append(failed, t)
		}
	}
	info, _ := json.Marshal(map[string]any{"type": "info", "event": "connect",
		"topic": map[string][]string{"success": success, "failed": failed}, "time": time.Now().UnixMilli()})
	ss := &session{key: *st.Token, addr: addr}
	conn.SetReadDeadline(time.Time{})
	wc, ok := s.opts.Hub.ServeConn(conn, TextFrame(info), sse.ServeOptions{
		Want: func(topic string) bool { return want[topic] },
		OnClose: func() {
			s.mu.Lock()
			delete(s.sessions, ss)
			s.mu.Unlock()
			release()
		},
	})
	if !ok {
		fail(ReasonServer, closeInternal)
		return
	}
	ss.conn = wc
	s.mu.Lock()
	s.sessions[ss] = struct{}{}
	s.mu.Unlock()
	s.opts.Log.DebugContext(ctx, "websocket client started", slog.String("addr", addr), slog.String("key", key.KeyID), slog.Any("topics", success))
	s.follow(br, ss)
}

var errNotText = errors.New("first message is not text")

// firstMessage reads the client's first data message (the start),
// answering pings on the way.
func (s *Server) firstMessage(conn net.Conn, br *bufio.Reader) ([]byte, error) {
	return assemble(br, s.opts.MaxMessage, func(p []byte) error {
		_, err := conn.Write(serverFrame(opPong, p))
		return err
	})
}

// assemble reads one text message of at most max bytes from a client's
// frames: a text frame and its continuations, with pings (answered
// through pong) and pongs between them. A close is net.ErrClosed; a
// continuation with nothing to continue, or a text frame within a message,
// errProtocol; a binary message errNotText; a longer message errTooBig.
func assemble(br *bufio.Reader, max int, pong func([]byte) error) ([]byte, error) {
	var msg []byte
	started := false
	for {
		f, err := readFrame(br, max)
		if err != nil {
			return nil, err
		}
		switch f.op {
		case opPing:
			if err := pong(f.payload); err != nil {
				return nil, err // gone
			}
			continue
		case opPong:
			continue
		case opClose:
			return nil, net.ErrClosed
		case opText:
			if started {
				return nil, errProtocol
			}
			started = true
		case opContinuation:
			if !started {
				return nil, errProtocol
			}
		default:
			return nil, errNotText
		}
		msg = append(msg, f.payload...)
		if len(msg) > max {
			return nil, errTooBig
		}
		if f.fin {
			return msg, nil
		}
	}
}

// follow reads a started client's frames until it leaves: pings are
// answered, a close is echoed, anything else is counted and dropped, and a
// client that sends faster than the frame rate, or breaks the protocol,
// is disconnected. A started client need send nothing, so there is no
// read deadline: a dead peer is found by the writes to it (the hub's
// write timeout, the pings of silent connections) and by TCP keep-alive.
func (s *Server) follow(br *bufio.Reader, ss *session) {
	defer ss.conn.Close()
	tokens, last := s.opts.FrameBurst, time.Now()
	for {
		f, err := readFrame(br, s.opts.MaxMessage)
		if err != nil {
			if errors.Is(err, errProtocol) || errors.Is(err, errTooBig) {
				s.disconnect(ss, ReasonFormat, closeProtocol)
				s.drain(ss)
			}
			return
		}
		now := time.Now()
		tokens = min(s.opts.FrameBurst, tokens+now.Sub(last).Seconds()*s.opts.FrameRate)
		last = now
		if tokens < 1 {
			s.disconnect(ss, ReasonFlood, closeProtocol)
			s.drain(ss)
			return
		}
		tokens--
		switch f.op {
		case opPing:
			ss.conn.Send(serverFrame(opPong, f.payload), false)
		case opPong:
		case opClose:
			ss.once.Do(func() { ss.conn.Send(closeFrame(closeNormal, ""), true) })
			s.drain(ss)
			return
		default:
			s.junk.Inc()
		}
	}
}

// drain waits briefly for a closing client's last frames to be written.
func (s *Server) drain(ss *session) {
	select {
	case <-ss.conn.Done():
	case <-time.After(time.Second):
	}
}

// headerHas reports whether a comma-separated header lists token
// (case-insensitive).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

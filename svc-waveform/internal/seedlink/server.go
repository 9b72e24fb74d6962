// Package seedlink serves a core's live waveforms over SeedLink, the
// real-time protocol of seismology's tools (SeisComP, slarchive, ObsPy,
// seisplotjs): protocol 3.1 and 4.0, on TCP and over WebSocket on the
// same port (a connection that starts with an HTTP GET is upgraded, with
// the subprotocols "SeedLink3.1" and "SeedLink4.0" that ringserver and
// seisplotjs use).
//
// Every packet a station sends becomes miniSEED 2 records of exactly the
// samples it carried, sent as soon as the core has merged it: a 25-sample
// frame is one part-filled 512-byte record per channel, never held back
// to fill one. A record's sequence number is derived from the data: the
// time of its first sample, as a 50 Hz sample index, times 8 plus the
// channel's slot (see seqAt), so both cores and the archive number the
// same record alike and a client that moves to the other core resumes
// where it was. SeedLink 3 carries the low 24 bits of it.
//
// The last Window of every station is kept in memory (the Ring); clients
// that resume by sequence number or ask from a time further back get the
// archive's samples first (Options.Archive).
package seedlink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/peerwrite"
	"shindo.dev/lib/service"
	"shindo.dev/lib/writev"
)

// Options configure a Server.
type Options struct {
	// Addr is the TCP address SeedLink (and its WebSocket) listens on.
	Addr string
	// Window is how much of each station the ring keeps.
	Window time.Duration
	// ClientBuffer is how many frames may wait for a client before it is
	// dropped as too slow.
	ClientBuffer int
	// MaxClients and MaxPerAddr bound the connections, in all and from
	// one address.
	MaxClients, MaxPerAddr int
	// Trusted tells whether a TCP connection's client may list the
	// connections (INFO CONNECTIONS), as ringserver grants its trusted
	// clients. Nil: no one.
	Trusted func(net.Conn) bool
	// Proxy tells whether a connection comes through a proxy of the
	// network (an edge, which carries many clients and keeps its own
	// per-address budget): those are not held to MaxPerAddr. Nil: none.
	Proxy func(net.Conn) bool
	// Negotiation bounds the wait for each command before data flows.
	Negotiation time.Duration
	// WriteTimeout bounds one write to a client.
	WriteTimeout time.Duration
	// SendBuffer caps the kernel's send buffer of each connection (0: the
	// system's), so what a stalled client holds is bounded and it is found
	// out sooner.
	SendBuffer int
	// Site names the core in HELLO and INFO.
	Site string
	// Names returns the SEED codes a station ID is archived under.
	Names func(id string) (StationKey, bool)
	// Archive returns a station's frames in [fromMs, toMs), at most an
	// hour: what clients asking from further back than the ring get
	// first. Nil: the ring only.
	Archive func(id string, fromMs, toMs int64) ([]Frame, error)
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Server is a SeedLink server.
type Server struct {
	opts    Options
	ring    *Ring
	log     *slog.Logger
	m       *metrics
	started time.Time

	names sync.Map // station ID → StationKey

	mu       sync.Mutex
	conns    map[net.Conn]string // the address counted in byAddr; "" for a proxy's
	byAddr   map[string]int
	sessions map[*session]struct{} // for INFO CONNECTIONS
	wg       sync.WaitGroup
}

type metrics struct {
	connections prometheus.Gauge
	streaming   prometheus.Gauge
	turnedAway  *prometheus.CounterVec
	ended       *prometheus.CounterVec
	commands    *prometheus.CounterVec
	refused     *prometheus.CounterVec
	records     prometheus.Counter
	dropped     prometheus.Counter
	unencodable prometheus.Counter
	frames      *prometheus.CounterVec
	backfills   *prometheus.CounterVec
}

// New returns a server; Run serves it.
func New(opts Options, reg prometheus.Registerer, log *slog.Logger) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, ring: NewRing(opts.Window), log: log, conns: map[net.Conn]string{}, byAddr: map[string]int{},
		sessions: map[*session]struct{}{}}
	s.started = s.now()
	s.m = &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "shindo_seedlink_connections", Help: "Open SeedLink connections (TCP and WebSocket)."}),
		streaming:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "shindo_seedlink_streaming", Help: "SeedLink connections in data flow."}),
		turnedAway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_turned_away_total",
			Help: "SeedLink connections closed on accept, by reason (limit: the server's, address: one address's)."}, []string{"reason"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_sessions_ended_total",
			Help: "SeedLink sessions ended, by reason (bye, fetched, window_ended: its time window passed, closed, slow, timeout, line_too_long, stopping, error)."}, []string{"reason"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_commands_total",
			Help: "SeedLink commands received, by command (other: unknown ones)."}, []string{"command"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_errors_total",
			Help: "SeedLink commands answered ERROR, by error code."}, []string{"code"}),
		records:     prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_seedlink_records_total", Help: "miniSEED records sent to SeedLink clients."}),
		dropped:     prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_seedlink_slow_clients_total", Help: "SeedLink clients dropped for falling behind."}),
		unencodable: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_seedlink_unencodable_total", Help: "Frames whose samples did not fit SeedLink's records."}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_frames_total",
			Help: "Frames offered to the SeedLink ring, by result (kept, unnamed: no SEED codes yet, malformed: off the sample grid)."}, []string{"result"}),
	}
	s.m.backfills = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shindo_seedlink_archive_reads_total",
		Help: "Archive reads for clients that start before the ring, by result (read, failed, too_many_stations: a request of more than 16 stations starts at the ring)."}, []string{"result"})
	reg.MustRegister(s.m.backfills, s.m.connections, s.m.streaming, s.m.turnedAway, s.m.ended, s.m.commands, s.m.refused,
		s.m.records, s.m.dropped, s.m.unencodable, s.m.frames)
	return s
}

func (s *Server) now() time.Time { return s.opts.Now() }

func (s *Server) software() string { return "shindo-waveform" }

func (s *Server) organization() string { return "shindo " + s.opts.Site }

func (s *Server) helloLine() string {
	return "SeedLink v4.0 (" + s.software() + ") :: " + helloCapabilities
}

// Publish offers a merged frame to the ring and its clients.
func (s *Server) Publish(f Frame) {
	key, ok := s.names.Load(f.Station)
	if !ok {
		k, found := s.opts.Names(f.Station)
		if !found {
			s.m.frames.WithLabelValues("unnamed").Inc()
			return
		}
		key, _ = s.names.LoadOrStore(f.Station, k)
	}
	if !s.ring.Add(key.(StationKey), f) {
		s.m.frames.WithLabelValues("malformed").Inc()
		return
	}
	s.m.frames.WithLabelValues("kept").Inc()
}

// Listen binds the TCP address; Serve then serves it.
func (s *Server) Listen() (net.Listener, error) {
	return net.Listen("tcp", s.opts.Addr)
}

// Serve accepts connections on ln until ctx ends, then closes every
// connection and waits for their handlers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := make(chan struct{})
	web := newChanListener(ln.Addr())
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveWebSocket(w, r, stop) }),
		ReadHeaderTimeout: 10 * time.Second,
		// A connection serves one upgrade; kept alive after anything
		// else, it would hold its slot waiting for a next request, which
		// net/http does without a deadline unless given this one.
		IdleTimeout:    s.opts.Negotiation,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() { _ = hs.Serve(web) }() // ends when web closes
	go func() {
		<-ctx.Done()
		close(stop)
		_ = ln.Close()
		web.close()
		// Closed outside the lock, which every session's end takes, and
		// without waiting on clients that stopped reading (a TLS
		// connection's closing alert waits up to 5 s on a full socket).
		s.mu.Lock()
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			_ = peerwrite.Close(c)
		}
	}()
	for {
		c, err := service.Accept(ln)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if !s.admit(c) {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.release(c)
			s.serveConn(c, web, stop)
		}()
	}
	_ = hs.Close()
	s.wg.Wait()
	return nil
}

// admit counts c against the limits, or answers ERROR and closes it.
func (s *Server) admit(c net.Conn) bool {
	addr := service.AddrKey(service.RemoteHost(c.RemoteAddr()))
	if s.opts.Proxy != nil && s.opts.Proxy(c) {
		addr = ""
	}
	s.mu.Lock()
	reason := ""
	switch {
	case s.opts.MaxClients > 0 && len(s.conns) >= s.opts.MaxClients:
		reason = "limit"
	case addr != "" && s.opts.MaxPerAddr > 0 && s.byAddr[addr] >= s.opts.MaxPerAddr:
		reason = "address"
	default:
		s.conns[c] = addr
		if addr != "" {
			s.byAddr[addr]++
		}
	}
	s.mu.Unlock()
	if reason != "" {
		s.m.turnedAway.WithLabelValues(reason).Inc()
		// Off the accept loop: under TLS the write runs the handshake.
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("ERROR\r\n"))
			_ = c.Close()
		}()
		return false
	}
	s.m.connections.Inc()
	raw := c
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // under TLS
		raw = u.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok && s.opts.SendBuffer > 0 {
		_ = tc.SetWriteBuffer(s.opts.SendBuffer)
	}
	return true
}

func (s *Server) release(c net.Conn) {
	s.mu.Lock()
	if addr, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if addr != "" {
			if s.byAddr[addr]--; s.byAddr[addr] <= 0 {
				delete(s.byAddr, addr)
			}
		}
	}
	s.mu.Unlock()
	s.m.connections.Dec()
}

// serveConn serves one TCP connection: SeedLink, or an HTTP request to
// upgrade to WebSocket, which is handed to the HTTP server and waited for.
func (s *Server) serveConn(c net.Conn, web *chanListener, stop <-chan struct{}) {
	// A session ended by a write that timed out leaves a full socket,
	// where a TLS connection's closing alert would wait 5 s more.
	defer func() { _ = peerwrite.Close(c) }()
	br := bufio.NewReaderSize(c, MaxLine+2)
	_ = c.SetReadDeadline(time.Now().Add(s.opts.Negotiation))
	head, err := br.Peek(4)
	if err != nil {
		s.ended(err)
		return
	}
	if bytes.Equal(head, []byte("GET ")) {
		done := make(chan struct{})
		if !web.hand(&sniffedConn{Conn: c, r: br, done: done}) {
			return
		}
		<-done // the HTTP server owns c until it closes it
		return
	}
	t := &tcpTransport{c: c, r: br, negotiation: s.opts.Negotiation, writeTimeout: s.opts.WriteTimeout}
	sess := newSession(s, t)
	sess.conn, sess.kind = c, "SeedLink"
	s.ended(s.serveSession(sess, c.RemoteAddr().String(), stop))
}

// serveSession runs sess, listed for INFO CONNECTIONS meanwhile.
func (s *Server) serveSession(sess *session, remote string, stop <-chan struct{}) error {
	sess.remote, sess.connected = remote, s.now()
	if _, ok := sess.conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		sess.kind += ":TLS"
	}
	s.mu.Lock()
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, sess)
		s.mu.Unlock()
	}()
	return sess.run(stop)
}

// ended counts a session's end by reason.
func (s *Server) ended(err error) {
	var ne net.Error
	reason := "error"
	switch {
	case errors.Is(err, errBye):
		reason = "bye"
	case errors.Is(err, errFetched):
		reason = "fetched"
	case errors.Is(err, errWindowEnded):
		reason = "window_ended"
	case err == nil:
		reason = "stopping"
	case errors.Is(err, errSlowClient):
		reason = "slow"
	case errors.Is(err, errLineTooLong):
		reason = "line_too_long"
	case errors.As(err, &ne) && ne.Timeout():
		reason = "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), websocket.CloseStatus(err) != -1:
		reason = "closed"
	}
	s.m.ended.WithLabelValues(reason).Inc()
}

var errLineTooLong = errors.New("command line too long")

// tcpTransport is SeedLink over a TCP connection: commands end with CR,
// LF or both.
type tcpTransport struct {
	c            net.Conn
	r            *bufio.Reader
	negotiation  time.Duration
	writeTimeout time.Duration
	inStream     bool

	wmu sync.Mutex
}

// beginStream lifts the negotiation's read deadline: a client in data
// flow may stay silent for good.
func (t *tcpTransport) beginStream() {
	t.inStream = true
	_ = t.c.SetReadDeadline(time.Time{})
}

func (t *tcpTransport) readLine() (string, error) {
	// A whole line within the negotiation timeout, not each byte: one
	// byte now and then must not hold a connection for MaxLine times it.
	if !t.inStream {
		_ = t.c.SetReadDeadline(time.Now().Add(t.negotiation))
	}
	return nextLine(t.r)
}

// nextLine reads the next command line from a client's bytes: up to CR or
// LF (either ends a line, as clients send either or both), skipping empty
// lines; errLineTooLong beyond MaxLine bytes.
func nextLine(r io.ByteReader) (string, error) {
	var line []byte
	for {
		b, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if b == '\r' || b == '\n' {
			if len(line) == 0 {
				continue
			}
			return string(line), nil
		}
		if len(line) >= MaxLine {
			return "", errLineTooLong
		}
		line = append(line, b)
	}
}

func (t *tcpTransport) write(parts ...[]byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	_ = t.c.SetWriteDeadline(time.Now().Add(t.writeTimeout))
	// One record per write under TLS (an edge's connection under mutual
	// TLS), not one per packet header and record.
	return writev.Write(t.c, parts...)
}

func (t *tcpTransport) writePackets(parts [][]byte) error { return t.write(parts...) }

// serveWebSocket upgrades a request to SeedLink over WebSocket.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	c, err := websocket.Accept(closeUnlessUpgraded{w}, r, &websocket.AcceptOptions{
		Subprotocols: []string{"SeedLink4.0", "SeedLink3.1"},
		// Browser pages of any origin may read public data, as ringserver
		// lets them.
		InsecureSkipVerify: true,
	})
	if err != nil {
		s.m.ended.WithLabelValues("error").Inc()
		return
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(MaxLine)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	t := &wsTransport{c: c, ctx: ctx, negotiation: s.opts.Negotiation, writeTimeout: s.opts.WriteTimeout}
	sess := newSession(s, t)
	sess.kind = "SeedLink:WebSocket"
	err = s.serveSession(sess, r.RemoteAddr, stop)
	s.ended(err)
	if err == nil || errors.Is(err, errBye) {
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
}

// closeUnlessUpgraded closes the connection after any answer but an
// upgrade's: this port serves nothing else over HTTP. (The WebSocket
// library answers a request that is no upgrade with "Connection: Upgrade",
// which would keep it alive.)
type closeUnlessUpgraded struct{ http.ResponseWriter }

func (w closeUnlessUpgraded) WriteHeader(code int) {
	if code != http.StatusSwitchingProtocols {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w closeUnlessUpgraded) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wsTransport is SeedLink over WebSocket: each message from the client
// holds one or more commands; each reply and packet is one binary message.
type wsTransport struct {
	c            *websocket.Conn
	ctx          context.Context
	negotiation  time.Duration
	writeTimeout time.Duration
	inStream     bool
	pending      []string

	wmu sync.Mutex
}

func (t *wsTransport) readLine() (string, error) {
	for len(t.pending) == 0 {
		ctx, cancel := t.ctx, context.CancelFunc(func() {})
		if !t.inStream {
			ctx, cancel = context.WithTimeout(t.ctx, t.negotiation)
		}
		_, msg, err := t.c.Read(ctx)
		cancel()
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
				return "", errLineTooLong
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return "", timeoutError{}
			}
			return "", err
		}
		t.pending = append(t.pending, commands(msg)...)
	}
	l := t.pending[0]
	t.pending = t.pending[1:]
	return l, nil
}

// commands splits a WebSocket message into its command lines: at CR or
// LF, blank lines left out.
func commands(msg []byte) []string {
	var out []string
	for _, l := range strings.FieldsFunc(string(msg), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func (t *wsTransport) write(parts ...[]byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	ctx, cancel := context.WithTimeout(t.ctx, t.writeTimeout)
	defer cancel()
	return t.c.Write(ctx, websocket.MessageBinary, bytes.Join(parts, nil))
}

func (t *wsTransport) beginStream() { t.inStream = true }

func (t *wsTransport) writePackets(parts [][]byte) error {
	for i := 0; i+1 < len(parts); i += 2 {
		if err := t.write(parts[i], parts[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// timeoutError is a negotiation that waited too long for a command.
type timeoutError struct{}

func (timeoutError) Error() string   { return "no command within the negotiation timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// sniffedConn is a connection whose first bytes were read to tell HTTP
// from SeedLink; done closes when the HTTP server is through with it.
type sniffedConn struct {
	net.Conn
	r    *bufio.Reader
	done chan struct{}
	once sync.Once
}

func (c *sniffedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *sniffedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// chanListener is a net.Listener fed the connections that turned out to
// be HTTP.
type chanListener struct {
	addr   net.Addr
	c      chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, c: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.c <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.closed) }) }

func (l *chanListener) Close() error { l.close(); return nil }

func (l *chanListener) Addr() net.Addr { return l.addr }

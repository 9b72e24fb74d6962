// Package listen terminates station transports for svc-ingest: UDP
// datagrams and WebSocket binary messages, both handed to the same packet
// handler so the two transports have identical semantics.
package listen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationwire"
)

// Handler processes datagrams received together over tr. It decides on
// them at once (the slices are only valid during the call) and returns a
// finish function that waits until the batch's records are durable and
// returns, for each datagram, the ack to send back or nil. The UDP listener
// reads the next batch while one finishes, so that many batches share a
// sync.
type Handler func(batch [][]byte, tr ingestv1.Transport) (finish func() [][]byte)

// readBuffer is larger than any valid datagram so an oversize one is seen
// whole and counted as such rather than silently truncated.
const readBuffer = 2048

// UDP serves station datagrams on one socket with several readers.
type UDP struct {
	conn    *net.UDPConn
	readers int
	handle  Handler
	log     *slog.Logger
}

// ListenUDP binds addr. readers ≤ 0 means one per CPU.
func ListenUDP(addr string, readers int, handle Handler, log *slog.Logger) (*UDP, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("udp address %q: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("listen udp %s: %w", addr, err)
	}
	// Bursts from thousands of stations at a tick boundary must queue in
	// the kernel rather than be dropped before we read them.
	_ = conn.SetReadBuffer(8 << 20)
	_ = conn.SetWriteBuffer(8 << 20)
	if readers <= 0 {
		readers = runtime.NumCPU()
	}
	return &UDP{conn: conn, readers: readers, handle: handle, log: log}, nil
}

// Close closes the socket; Run returns. Run closes it too when its
// context ends, so a second close is not an error.
func (u *UDP) Close() error {
	if err := u.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Addr returns the bound address.
func (u *UDP) Addr() net.Addr { return u.conn.LocalAddr() }

// Run reads until ctx ends.
func (u *UDP) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { u.conn.Close() })
	defer stop()
	errs := make(chan error, u.readers)
	var wg sync.WaitGroup
	for range u.readers {
		wg.Go(func() { errs <- u.read(ctx) })
	}
	wg.Wait()
	close(errs)
	if ctx.Err() != nil {
		return nil
	}
	return <-errs
}

// batch is how many datagrams one system call reads or writes: at a tick
// boundary thousands of stations send at once, and recvmmsg/sendmmsg move
// a burst for the cost of one call.
const batch = 64

// batchConn is the part of x/net's ipv4 and ipv6 PacketConn used here.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func (u *UDP) batchConn() batchConn {
	if a, ok := u.conn.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		return ipv6.NewPacketConn(u.conn)
	}
	return ipv4.NewPacketConn(u.conn)
}

// pipelined is how many batches a reader may have waiting for their sync
// while it reads on.
const pipelined = 8

type finishing struct {
	finish func() [][]byte
	addrs  []net.Addr
}

func (u *UDP) read(ctx context.Context) error {
	bc := u.batchConn()
	in := make([]ipv4.Message, batch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, readBuffer)}
	}
	pending := make(chan finishing, pipelined)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for f := range pending {
			u.sendAcks(ctx, bc, f)
		}
	}()
	defer func() {
		close(pending)
		<-sent
	}()
	datagrams := make([][]byte, 0, batch)
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read udp: %w", err)
		}
		datagrams = datagrams[:0]
		addrs := make([]net.Addr, n)
		for i, m := range in[:n] {
			datagrams = append(datagrams, m.Buffers[0][:m.N])
			addrs[i] = m.Addr
		}
		pending <- finishing{u.handle(datagrams, ingestv1.Transport_TRANSPORT_UDP), addrs}
	}
}

// sendAcks waits for a batch to be durable and sends its acks.
func (u *UDP) sendAcks(ctx context.Context, bc batchConn, f finishing) {
	acks := f.finish()
	out := make([]ipv4.Message, 0, len(acks))
	for i, ack := range acks {
		if ack != nil {
			out = append(out, ipv4.Message{Buffers: [][]byte{ack}, Addr: f.addrs[i]})
		}
	}
	for len(out) > 0 {
		sent, err := bc.WriteBatch(out, 0)
		if err != nil {
			if ctx.Err() == nil {
				u.log.DebugContext(ctx, "acks not sent", slog.Int("count", len(out)), slog.Any("error", err))
			}
			// Skip the datagram that failed (an unreachable station) and
			// keep acking the others.
			sent = max(sent, 1)
		}
		out = out[sent:]
	}
}

// WSPath is where stations open their WebSocket uplink.
const WSPath = "/v1/station/ws"

// WSOptions bound the WebSocket uplink.
type WSOptions struct {
	// FirstWithin is how long a new connection has to send its first
	// message, which must be a packet the gate accepts (acked): until it
	// is, the connection is anonymous and costs the server for nothing.
	FirstWithin time.Duration
	// Idle closes a connection silent this long: a station sends several
	// packets a second, and one that stopped is gone. It bounds the write
	// of an ack too: a station that takes none for that long is gone.
	Idle time.Duration
	// PerAddr bounds connections per client address, started or not (0:
	// no bound); PerStation the connections of one station — the newest
	// replaces the oldest, as a station that moved networks reconnects
	// before its old connection is known dead.
	PerAddr, PerStation int
	// Refused counts refusals by reason ("per_address", "first_message").
	Refused func(reason string)
}

// WebSocket returns the HTTP handler of the WebSocket uplink: each binary
// message is one datagram, each ack one binary message back.
func WebSocket(handle Handler, opts WSOptions, log *slog.Logger) http.Handler {
	ws := &wsUplink{handle: handle, opts: opts, log: log, perAddr: map[string]int{}, stations: map[string][]*websocket.Conn{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+WSPath, ws.serve)
	return mux
}

type wsUplink struct {
	handle Handler
	opts   WSOptions
	log    *slog.Logger

	mu       sync.Mutex
	perAddr  map[string]int
	stations map[string][]*websocket.Conn // oldest first
}

func (u *wsUplink) refuse(reason string) {
	if u.opts.Refused != nil {
		u.opts.Refused(reason)
	}
}

func (u *wsUplink) serve(w http.ResponseWriter, r *http.Request) {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	addr = service.AddrKey(addr) // an IPv6 host by its /64
	u.mu.Lock()
	if u.opts.PerAddr > 0 && u.perAddr[addr] >= u.opts.PerAddr {
		u.mu.Unlock()
		u.refuse("per_address")
		// Not kept alive for another try: the address is over its cap.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many uplink connections from this address", http.StatusTooManyRequests)
		return
	}
	u.perAddr[addr]++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		if u.perAddr[addr]--; u.perAddr[addr] <= 0 {
			delete(u.perAddr, addr)
		}
		u.mu.Unlock()
	}()

	// A request that is not a valid upgrade is answered and the
	// connection closed: this listener serves nothing else. (An upgrade
	// replaces the header with its own.)
	w.Header().Set("Connection", "close")
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	defer func() { _ = c.CloseNow() }() // closed is closed
	// Oversize messages must reach the handler to be counted; far larger
	// ones are an abuse and end the connection.
	c.SetReadLimit(64 << 10)
	ctx := r.Context()
	station := ""
	defer func() {
		if station != "" {
			u.mu.Lock()
			u.stations[station] = slices.DeleteFunc(u.stations[station], func(x *websocket.Conn) bool { return x == c })
			if len(u.stations[station]) == 0 {
				delete(u.stations, station)
			}
			u.mu.Unlock()
		}
	}()
	for {
		wait := u.opts.Idle
		if station == "" {
			wait = u.opts.FirstWithin
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		typ, b, err := c.Read(rctx)
		cancel()
		if err != nil {
			if station == "" {
				u.refuse("first_message")
			}
			return
		}
		if typ != websocket.MessageBinary {
			b = nil // counted as malformed by the handler
		}
		id := stationOf(b) // before the handler: the slice is only valid during it
		ack := u.handle([][]byte{b}, ingestv1.Transport_TRANSPORT_WS)()[0]
		if ack == nil {
			if station == "" {
				// The first message proves nothing: no valid packet, no
				// connection.
				u.refuse("first_message")
				c.Close(websocket.StatusPolicyViolation, "the first message must be a signed packet of a known station")
				return
			}
			continue
		}
		if station == "" {
			station = id
			u.admit(station, c)
		}
		// A station that stops reading its acks ends the connection
		// within Idle, as one that stops sending does: without a bound
		// the write would wait as long as its kernel answers with a
		// closed window, holding the address's connection slot.
		wctx, cancel := context.WithTimeout(ctx, u.opts.Idle)
		err = c.Write(wctx, websocket.MessageBinary, ack)
		cancel()
		if err != nil {
			u.log.DebugContext(ctx, "ws ack not sent", slog.Any("error", err))
			return
		}
	}
}

// admit registers a station's connection, closing its oldest beyond
// PerStation.
func (u *wsUplink) admit(station string, c *websocket.Conn) {
	u.mu.Lock()
	conns := append(u.stations[station], c)
	var old []*websocket.Conn
	if u.opts.PerStation > 0 && len(conns) > u.opts.PerStation {
		old, conns = conns[:len(conns)-u.opts.PerStation], conns[len(conns)-u.opts.PerStation:]
	}
	u.stations[station] = conns
	u.mu.Unlock()
	for _, o := range old {
		// In the background: the close handshake waits for the old peer,
		// which may be dead, and the new connection's ack must not.
		go o.Close(websocket.StatusPolicyViolation, "replaced by a newer connection of the station")
	}
}

// stationOf reads the station a datagram names, without verifying it (the
// handler does); "" when it names none.
func stationOf(b []byte) string {
	d, err := stationwire.Open(b)
	if err != nil {
		return ""
	}
	p, err := stationwire.Packet(d)
	if err != nil {
		return ""
	}
	return p.GetStationId()
}

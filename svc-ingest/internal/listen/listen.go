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
	"sync"

	"github.com/coder/websocket"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// Handler processes one datagram received over tr and returns the ack to
// send back, or nil.
type Handler func(b []byte, tr ingestv1.Transport) (ack []byte)

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

// Close closes the socket; Run returns.
func (u *UDP) Close() error { return u.conn.Close() }

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

func (u *UDP) read(ctx context.Context) error {
	buf := make([]byte, readBuffer)
	for {
		n, from, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read udp: %w", err)
		}
		ack := u.handle(buf[:n], ingestv1.Transport_TRANSPORT_UDP)
		if ack == nil {
			continue
		}
		if _, err := u.conn.WriteToUDPAddrPort(ack, from); err != nil && ctx.Err() == nil {
			u.log.Debug("ack not sent", slog.String("to", from.String()), slog.Any("error", err))
		}
	}
}

// WSPath is where stations open their WebSocket uplink.
const WSPath = "/v1/station/ws"

// WebSocket returns the HTTP handler of the WebSocket uplink: each binary
// message is one datagram, each ack one binary message back.
func WebSocket(handle Handler, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+WSPath, func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return // Accept has answered the client
		}
		defer c.CloseNow()
		// Oversize messages must reach the handler to be counted; far
		// larger ones are an abuse and end the connection.
		c.SetReadLimit(64 << 10)
		ctx := r.Context()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageBinary {
				b = nil // counted as malformed by the handler
			}
			ack := handle(b, ingestv1.Transport_TRANSPORT_WS)
			if ack == nil {
				continue
			}
			if err := c.Write(ctx, websocket.MessageBinary, ack); err != nil {
				log.Debug("ws ack not sent", slog.Any("error", err))
				return
			}
		}
	})
	return mux
}

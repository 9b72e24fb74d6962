package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// pushServer is how runPushClients speaks to a server: the path its
// clients request, over SSE or WebSocket, the start of the message that
// greets a client (once every client has it, they are all in), and how a
// message gives its tick's time.
type pushServer struct {
	path string
	// ws: the clients upgrade to WebSocket; otherwise they read SSE.
	ws bool
	// start is a WebSocket client's first message, %s its API key; ""
	// sends none.
	start string
	hello []byte
	// tick reads the time (Unix ms) of the tick a message carries.
	tick func(msg []byte) (int64, bool)
}

// pushServers are the servers runPushClients knows, by the name in its
// spec. Every server's tick messages end with the tick's time ("time":ms,
// then closing braces), as the topology's ticks do (compatjson.RTS).
var pushServers = map[string]pushServer{
	"edge": {path: "/api/v2/trem/rts?sse=1", hello: []byte("event: info"), tick: sseTickTime},
	// The edge's WebSocket API (svc-edge/internal/wsapi): a start message
	// with a subscriber's key, answered by the connect info (encoding/json
	// sorts its keys); a data message carries the tick as its payload,
	// then the edge's own "time".
	"edge-ws": {
		path: "/ws", ws: true,
		start: `{"type":"start","token":"%s","topic":["websocket.trem.rts.v1"]}`,
		hello: []byte(`{"event":"connect",`),
		tick: func(msg []byte) (int64, bool) {
			i := bytes.LastIndex(msg, []byte(`,"time":`))
			if !bytes.HasPrefix(msg, []byte(`{"type":"data"`)) || i < 0 {
				return 0, false
			}
			return lastTime(msg[:i])
		},
	},
	// The connect request goes in the cf_connect URL parameter (JSON),
	// subscribing at connect; Centrifugo answers with a connect push
	// first (https://centrifugal.dev/docs/transports/uni_sse; its
	// internal/unisse/handler.go at v6.9.1).
	"centrifugo": {path: "/connection/uni_sse?" + centrifugoConnect, hello: []byte(`data: {"connect":`), tick: sseTickTime},
	// The same over its unidirectional WebSocket (internal/uniws/handler.go
	// at v6.9.1: the connect request in cf_connect, or else the client's
	// first message), a push per text frame, or several a line apart.
	"centrifugo-ws": {
		path: "/connection/uni_websocket?" + centrifugoConnect, ws: true,
		hello: []byte(`{"connect":`),
		tick: func(msg []byte) (int64, bool) {
			if !bytes.Contains(msg, []byte(`"pub":`)) {
				return 0, false
			}
			return lastTime(msg)
		},
	},
}

// centrifugoConnect subscribes a client to centrifugoChannel at connect.
var centrifugoConnect = "cf_connect=" + url.QueryEscape(`{"subs":{"`+centrifugoChannel+`":{}}}`)

// open reads the server's answer to a client's request and returns how
// to read its messages: SSE lines, or for WebSocket, after the upgrade and
// the start message (with the API key token), the data messages.
func (srv pushServer) open(conn net.Conn, r *bufio.Reader, token string) (func() ([]byte, error), error) {
	if !srv.ws {
		return func() ([]byte, error) {
			line, err := r.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				return nil, nil // a long line: only its end holds the time
			}
			return line, err
		}, nil
	}
	status, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 101 ") {
		return nil, fmt.Errorf("upgrade refused: %q", status)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	if srv.start != "" {
		if _, err := conn.Write(clientFrame(wsText, fmt.Appendf(nil, srv.start, token))); err != nil {
			return nil, err
		}
	}
	return func() ([]byte, error) { return wsMessage(conn, r) }, nil
}

// sseTickTime reads the tick of a data line of an SSE stream.
func sseTickTime(line []byte) (int64, bool) {
	if !bytes.HasPrefix(line, []byte("data: ")) {
		return 0, false
	}
	return lastTime(line)
}

// lastTime reads the last "time" of a message that ends with it (then
// closing braces).
func lastTime(msg []byte) (int64, bool) {
	i := bytes.LastIndex(msg, []byte(`"time":`))
	if i < 0 {
		return 0, false
	}
	v := bytes.TrimRight(msg[i+len(`"time":`):], "}\r\n")
	t, err := strconv.ParseInt(string(v), 10, 64)
	return t, err == nil
}

// WebSocket opcodes (RFC 6455 §5.2).
const (
	wsText  = 0x1
	wsClose = 0x8
	wsPing  = 0x9
	wsPong  = 0xA
)

// wsMaxFrame bounds a server frame the clients accept: ticks are a few
// hundred bytes.
const wsMaxFrame = 1 << 20

var errWSClosed = errors.New("websocket closed by the server")

// wsMessage reads the server's next data message, answering its pings on
// the way (a server may drop a client that does not: Centrifugo's
// unidirectional WebSocket does after 35 s).
func wsMessage(conn net.Conn, r *bufio.Reader) ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(r, ext[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(r, ext[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		if h[1]&0x80 != 0 || n > wsMaxFrame {
			return nil, fmt.Errorf("server frame: masked %t, %d bytes", h[1]&0x80 != 0, n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil, err
		}
		switch h[0] & 0x0F {
		case wsPing:
			if _, err := conn.Write(clientFrame(wsPong, payload)); err != nil {
				return nil, err
			}
			continue
		case wsPong:
			continue
		case wsClose:
			return nil, errWSClosed
		}
		msg = append(msg, payload...)
		if h[0]&0x80 != 0 { // FIN
			return msg, nil
		}
	}
}

// clientFrame is a client's frame of one fragment: masked, as a client's
// must be, with a zero key (any key is valid; a load client has nothing
// to hide from a proxy).
func clientFrame(op byte, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, payload...)
}

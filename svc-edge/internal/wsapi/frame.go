package wsapi

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
)

// RFC 6455 opcodes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// acceptGUID is RFC 6455's fixed GUID of the opening handshake.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// acceptKey is the Sec-WebSocket-Accept answering a Sec-WebSocket-Key.
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// validKey reports whether a Sec-WebSocket-Key is 16 bytes in base64, as
// RFC 6455 §4.1 requires.
func validKey(key string) bool {
	b, err := base64.StdEncoding.DecodeString(key)
	return err == nil && len(b) == 16
}

// serverFrame is one unmasked frame from the server (RFC 6455 §5.2).
func serverFrame(op byte, payload []byte) []byte {
	n := len(payload)
	b := make([]byte, 0, n+10)
	b = append(b, 0x80|op)
	switch {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xFFFF:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

// TextFrame is a server text frame carrying payload.
func TextFrame(payload []byte) []byte { return serverFrame(opText, payload) }

// closeFrame is a close frame with a status code (RFC 6455 §7.4).
func closeFrame(code uint16, reason string) []byte {
	p := binary.BigEndian.AppendUint16(nil, code)
	if len(reason) > 120 {
		reason = reason[:120]
	}
	return serverFrame(opClose, append(p, reason...))
}

// Errors of readFrame: the client broke the protocol.
var (
	errProtocol = errors.New("websocket protocol error")
	errTooBig   = errors.New("message too big")
)

// frame is one frame from the client.
type frame struct {
	fin     bool
	op      byte
	payload []byte
}

// readFrame reads one client frame of at most max payload bytes. Client
// frames must be masked (RFC 6455 §5.1); control frames carry at most 125
// bytes and are never fragmented.
func readFrame(r *bufio.Reader, max int) (frame, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{fin: hdr[0]&0x80 != 0, op: hdr[0] & 0x0F}
	if hdr[0]&0x70 != 0 || hdr[1]&0x80 == 0 { // reserved bits, or unmasked
		return frame{}, errProtocol
	}
	n := uint64(hdr[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return frame{}, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	control := f.op >= opClose
	switch {
	case control && (n > 125 || !f.fin):
		return frame{}, errProtocol
	case f.op > opPong || f.op > opBinary && f.op < opClose:
		return frame{}, errProtocol
	case n > uint64(max):
		return frame{}, errTooBig
	}
	var mask [4]byte
	if _, err := io.ReadFull(r, mask[:]); err != nil {
		return frame{}, err
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return frame{}, err
	}
	for i := range f.payload {
		f.payload[i] ^= mask[i%4]
	}
	return f, nil
}

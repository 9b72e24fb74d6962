// Package stationwire encodes, signs, opens and verifies the datagrams of the
// station wire protocol (SPEC §3). Both ends use it: the station agent to
// send packets and check acks, svc-ingest to check packets and sign acks.
//
// A datagram is a serialized stationv1.Datagram whose packet field holds a
// serialized Packet or Ack; the MAC is HMAC-SHA256 over exactly those bytes
// under the station key named by key_id.
package stationwire

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
)

// MaxDatagram is the largest datagram a server accepts, in bytes; it keeps
// every datagram inside one IPv6 minimum-MTU packet.
const MaxDatagram = 1200

// MACSize is the length of an HMAC-SHA256 tag.
const MACSize = sha256.Size

// Errors returned when opening a datagram, one per drop reason.
var (
	ErrOversize  = errors.New("datagram over 1200 bytes")
	ErrMalformed = errors.New("malformed datagram")
	ErrBadMAC    = errors.New("bad MAC")
)

// Seal serializes msg (a Packet or an Ack), signs it with key and returns
// the datagram bytes.
func Seal(key []byte, keyID uint32, msg proto.Message) ([]byte, error) {
	inner, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", msg, err)
	}
	return SealBytes(key, keyID, inner)
}

// SealBytes signs an already serialized Packet or Ack.
func SealBytes(key []byte, keyID uint32, inner []byte) ([]byte, error) {
	d := &stationv1.Datagram{Packet: inner, Mac: Sum(key, inner), KeyId: keyID}
	b, err := proto.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("marshal datagram: %w", err)
	}
	return b, nil
}

// Sum returns HMAC-SHA256(key, b).
func Sum(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

// Open checks the size of b and decodes its envelope. It does not verify
// the MAC: the key depends on the station named inside.
func Open(b []byte) (*stationv1.Datagram, error) {
	if len(b) > MaxDatagram {
		return nil, ErrOversize
	}
	var d stationv1.Datagram
	if err := proto.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(d.GetPacket()) == 0 || len(d.GetMac()) != MACSize {
		return nil, fmt.Errorf("%w: empty packet or MAC of %d bytes", ErrMalformed, len(d.GetMac()))
	}
	return &d, nil
}

// Verify reports whether d's MAC is right for key, in constant time.
func Verify(key []byte, d *stationv1.Datagram) bool {
	return hmac.Equal(Sum(key, d.GetPacket()), d.GetMac())
}

// Packet decodes the packet inside d. Ingest calls it before verifying the
// MAC, because the station named inside selects the key; it therefore checks
// only what the lookup needs, and the caller checks the body after the MAC.
func Packet(d *stationv1.Datagram) (*stationv1.Packet, error) {
	var p stationv1.Packet
	if err := proto.Unmarshal(d.GetPacket(), &p); err != nil {
		return nil, fmt.Errorf("%w: packet: %v", ErrMalformed, err)
	}
	if p.GetStationId() == "" {
		return nil, fmt.Errorf("%w: packet without station", ErrMalformed)
	}
	return &p, nil
}

// OpenAck decodes and verifies an ack datagram with the station's key.
func OpenAck(key []byte, b []byte) (*stationv1.Ack, error) {
	d, err := Open(b)
	if err != nil {
		return nil, err
	}
	if !Verify(key, d) {
		return nil, ErrBadMAC
	}
	var a stationv1.Ack
	if err := proto.Unmarshal(d.GetPacket(), &a); err != nil {
		return nil, fmt.Errorf("%w: ack: %v", ErrMalformed, err)
	}
	return &a, nil
}

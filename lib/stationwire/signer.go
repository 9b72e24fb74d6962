package stationwire

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
)

// Signer signs and verifies with one key, reusing HMAC states: creating an
// HMAC hashes the key pads, which costs as much as the message itself for
// a datagram, and a core verifies and signs once per packet.
type Signer struct {
	pool sync.Pool
}

// NewSigner returns a signer for key.
func NewSigner(key []byte) *Signer {
	k := append([]byte(nil), key...)
	s := &Signer{}
	s.pool.New = func() any { return hmac.New(sha256.New, k) }
	return s
}

// Sum appends HMAC-SHA256(key, b) to dst.
func (s *Signer) Sum(dst, b []byte) []byte {
	m := s.pool.Get().(hash.Hash)
	m.Reset()
	m.Write(b)
	dst = m.Sum(dst)
	s.pool.Put(m)
	return dst
}

// Verify reports whether d's MAC is right, in constant time.
func (s *Signer) Verify(d *stationv1.Datagram) bool {
	var buf [MACSize]byte
	return hmac.Equal(s.Sum(buf[:0], d.GetPacket()), d.GetMac())
}

// Seal serializes msg, signs it and returns the datagram bytes.
func (s *Signer) Seal(keyID uint32, msg proto.Message) ([]byte, error) {
	inner, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	var buf [MACSize]byte
	return proto.Marshal(&stationv1.Datagram{Packet: inner, Mac: s.Sum(buf[:0], inner), KeyId: keyID})
}

package reports

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// Page tokens are opaque to clients: base64url of a version byte, the kind
// of list ('r' reports, 'd' detections), the sort time (8 bytes, big
// endian) and the ID of the last item of the previous page. They carry no
// filters: a token used with other filters simply resumes at the same
// place in the list order.
const (
	tokenVersion = 1
	// MaxTokenLen bounds a token as text: 10 bytes of header and a 64-byte
	// ID, base64url.
	MaxTokenLen = 100
)

// Kinds of lists a token belongs to.
const (
	KindReports    byte = 'r'
	KindDetections byte = 'd'
)

// ErrToken is the error of every malformed or foreign token.
var ErrToken = errors.New("page_token: not a token this list gave out")

// EncodeToken returns the token of position (timeMs, id) in a list of
// kind.
func EncodeToken(kind byte, timeMs int64, id string) string {
	b := make([]byte, 10, 10+len(id))
	b[0], b[1] = tokenVersion, kind
	binary.BigEndian.PutUint64(b[2:], uint64(timeMs))
	return base64.RawURLEncoding.EncodeToString(append(b, id...))
}

// DecodeToken returns the position a token of kind holds, ErrToken if it
// is malformed, of another kind, or holds an impossible position.
func DecodeToken(kind byte, token string) (timeMs int64, id string, err error) {
	if len(token) > MaxTokenLen {
		return 0, "", ErrToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	// The decoder skips line breaks; a token is exactly its encoding.
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != token || len(b) < 11 || len(b) > 10+64 || b[0] != tokenVersion || b[1] != kind {
		return 0, "", ErrToken
	}
	timeMs = int64(binary.BigEndian.Uint64(b[2:]))
	id = string(b[10:])
	if timeMs < 0 || !utf8.ValidString(id) {
		return 0, "", ErrToken
	}
	for _, c := range []byte(id) {
		if c < 0x20 || c == 0x7f {
			return 0, "", ErrToken
		}
	}
	return timeMs, id, nil
}

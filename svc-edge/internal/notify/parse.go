package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Client IDs are opaque strings the app server chooses: knowing one is the
// capability to receive its notifications, like a push token, so they are
// long enough not to be guessed.
const (
	minClientLen = 16
	maxClientLen = 128
	maxIDLen     = 64
)

// ValidClient reports whether s is a client ID: 16 to 128 characters of
// A–Z, a–z, 0–9, '.', '_' and '-'.
func ValidClient(s string) bool {
	return len(s) >= minClientLen && len(s) <= maxClientLen && idChars(s)
}

// validID reports whether s can be a poster-chosen notification ID: 1 to
// 64 characters of the same set.
func validID(s string) bool { return len(s) >= 1 && len(s) <= maxIDLen && idChars(s) }

func idChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// errTooLarge marks a request whose data exceeds the limit (413, not 400).
var errTooLarge = errors.New("too large")

func clientError(client string) error {
	if client == "" {
		return errors.New(`"client" is required: the client ID to notify`)
	}
	return fmt.Errorf("client ID %q: want %d to %d characters of A-Z a-z 0-9 . _ -", truncate(client), minClientLen, maxClientLen)
}

// PostRequest is the body of POST /v1/notify.
type PostRequest struct {
	Client string          `json:"client"`
	Data   json.RawMessage `json:"data"`
	// ID optionally names the notification: a post repeated with the same
	// ID within the dedup window is stored and delivered once.
	ID string `json:"id,omitempty"`
}

// ParsePost reads a POST /v1/notify body: one JSON object with "client",
// "data" (any JSON value, at most maxData bytes once compacted) and
// optionally "id". Data comes back compacted. Errors say what to fix;
// those about size wrap errTooLarge.
func ParsePost(body []byte, maxData int) (PostRequest, error) {
	var r PostRequest
	if err := decodeStrict(body, &r); err != nil {
		return PostRequest{}, err
	}
	if !ValidClient(r.Client) {
		return PostRequest{}, clientError(r.Client)
	}
	if r.ID != "" && !validID(r.ID) {
		return PostRequest{}, fmt.Errorf("id %q: want 1 to %d characters of A-Z a-z 0-9 . _ -, or no id", truncate(r.ID), maxIDLen)
	}
	if len(r.Data) == 0 {
		return PostRequest{}, errors.New(`"data" is required: any JSON value for the client`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, r.Data); err != nil {
		return PostRequest{}, fmt.Errorf("data: %w", err)
	}
	if buf.Len() > maxData {
		return PostRequest{}, fmt.Errorf("data is %d bytes of JSON; at most %d are allowed: %w", buf.Len(), maxData, errTooLarge)
	}
	r.Data = buf.Bytes()
	return r, nil
}

// AckRequest is the body of POST /v1/notify/ack: the client has received
// every notification up to and including Seq.
type AckRequest struct {
	Client string `json:"client"`
	Seq    uint64 `json:"seq"`
}

// ParseAck reads a POST /v1/notify/ack body.
func ParseAck(body []byte) (AckRequest, error) {
	var r struct {
		Client string          `json:"client"`
		Seq    json.RawMessage `json:"seq"`
	}
	if err := decodeStrict(body, &r); err != nil {
		return AckRequest{}, err
	}
	if !ValidClient(r.Client) {
		return AckRequest{}, clientError(r.Client)
	}
	if len(r.Seq) == 0 {
		return AckRequest{}, errors.New(`"seq" is required: the last sequence number received`)
	}
	var seq uint64
	if err := json.Unmarshal(r.Seq, &seq); err != nil || seq == 0 {
		return AckRequest{}, fmt.Errorf("seq %s: want a whole number from 1, the seq of the last notification received", truncate(string(r.Seq)))
	}
	return AckRequest{Client: r.Client, Seq: seq}, nil
}

// decodeStrict decodes exactly one JSON object with only known fields.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("empty body: want a JSON object")
	}
	if !utf8.Valid(body) {
		return errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body is not the expected JSON object: %s", jsonError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body has more after the JSON object: send exactly one object")
	}
	return nil
}

// jsonError phrases a decoding error without echoing much of the input.
func jsonError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("%q must be a JSON %s", typ.Field, kind(typ.Field))
		}
		return "want a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends too early"
	}
	return truncate(err.Error())
}

func kind(field string) string {
	if field == "seq" {
		return "number"
	}
	return "string"
}

func truncate(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

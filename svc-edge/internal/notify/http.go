package notify

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// maxAckBody bounds POST /v1/notify/ack bodies.
const maxAckBody = 1024

// Register adds POST /v1/notify (app servers, with a bearer token) and
// POST /v1/notify/ack (clients; knowing the client ID is the capability).
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/notify", s.servePost)
	mux.HandleFunc("POST /v1/notify/ack", s.serveAck)
}

// maxPostBody leaves room around the data for the other fields and for
// whitespace the compaction removes.
func (s *Service) maxPostBody() int64 { return int64(2*s.cfg.MaxData + 1024) }

func (s *Service) servePost(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.m.posts.WithLabelValues(resultUnauthorized).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="shindo notify"`)
		// The body is not read: closing spares net/http reading it, slowly
		// perhaps, to reuse the connection.
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token>, a token configured at the edges for app servers")
		return
	}
	body, ok := readBody(w, r, s.maxPostBody())
	if !ok {
		s.m.posts.WithLabelValues(resultInvalid).Inc()
		return
	}
	req, err := ParsePost(body, s.cfg.MaxData)
	if err != nil {
		s.m.posts.WithLabelValues(resultInvalid).Inc()
		code := http.StatusBadRequest
		if errors.Is(err, errTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, err.Error())
		return
	}
	rec, err := s.Post(r.Context(), req.Client, req.ID, req.Data)
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, rec)
	case errors.Is(err, ErrTooManyPending):
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, ErrUnavailable):
		s.log.WarnContext(r.Context(), "notification not accepted", slog.String("client", req.Client), slog.Any("error", err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "notification store unavailable: retry (with the same id, if you gave one, so that it is stored once)")
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

func (s *Service) serveAck(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, maxAckBody)
	if !ok {
		return
	}
	req, err := ParseAck(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	acked, err := s.Ack(r.Context(), req.Client, req.Seq)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"client": req.Client, "acked": acked})
	case errors.Is(err, ErrAckBehind), errors.Is(err, ErrAckBeyond):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		b, _ := json.Marshal(map[string]any{"error": err.Error(), "acked": acked})
		w.Write(b)
	case errors.Is(err, ErrUnavailable):
		s.log.WarnContext(r.Context(), "acknowledgement not recorded", slog.String("client", req.Client), slog.Any("error", err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "notification store unavailable: retry")
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

// authorized checks the bearer token against every configured one in
// constant time (comparing digests, so the length is not revealed either).
func (s *Service) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, want := range s.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// readBody reads at most limit bytes; beyond that it answers 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
		} else {
			writeError(w, http.StatusBadRequest, "body not read: "+err.Error())
		}
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "response not encoded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(b)
}

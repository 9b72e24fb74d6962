package fdsn

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is a request the service refuses, with the status it answers.
type Error struct {
	Status int
	Detail string
}

func (e *Error) Error() string { return e.Detail }

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Detail: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf(format, args...)}
}

// StatusOf is the status err answers: its own for an *Error, 500
// otherwise.
func StatusOf(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Status
	}
	return http.StatusInternalServerError
}

// WriteError answers r with the FDSN error document (FDSN Web Service
// Specifications 1.2, "Error handling"): plain text, the status and its
// reason, the detail, where the service's usage is described, the request
// as submitted, when, and the service's version.
func WriteError(w http.ResponseWriter, r *http.Request, status int, detail, usage, version string) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Error %d: %s\n\n", status, http.StatusText(status))
	fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(detail))
	fmt.Fprintf(&b, "Usage details are available from %s\n\n", usage)
	fmt.Fprintf(&b, "Request:\n%s://%s%s\n\n", scheme, r.Host, r.URL.RequestURI())
	fmt.Fprintf(&b, "Request Submitted:\n%s\n\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000"))
	fmt.Fprintf(&b, "Service version:\n%s\n", version)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

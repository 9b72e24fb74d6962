// Package httpapi is the HTTP side of the data API around grpc-gateway:
// errors as JSON with the right status codes, strict query parameters,
// conditional GETs (ETag, If-None-Match), and the guard in front of every
// route (credentials, rate limits, body size).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503: about the
// time a database failover takes.
const RetryAfterUnavailable = 3

// Error is the body of every error answer:
//
//	{"error":"…","code":5,"message":"…"}
//
// "error" is what clients should read; "code" (the gRPC code) and
// "message" (the same text) are what grpc-gateway's own error body holds,
// kept so gateway clients find them where they expect.
type Error struct {
	Error   string `json:"error"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteError writes an error answer with HTTP status httpStatus; code is
// the matching gRPC code. A 503 carries Retry-After.
func WriteError(w http.ResponseWriter, httpStatus int, code codes.Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	if httpStatus == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
	}
	b, _ := json.Marshal(Error{Error: msg, Code: int(code), Message: msg})
	w.WriteHeader(httpStatus)
	w.Write(append(b, '\n'))
}

// WriteStatus writes the error answer of a gRPC status error.
func WriteStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	WriteError(w, runtime.HTTPStatusFromCode(st.Code()), st.Code(), st.Message())
}

// GatewayError is grpc-gateway's error handler: the status's code decides
// the HTTP status (InvalidArgument 400, Unauthenticated 401,
// PermissionDenied 403, NotFound 404, AlreadyExists 409,
// ResourceExhausted 429, Unavailable 503 with Retry-After, …) and the body
// is an Error.
func GatewayError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	var he *runtime.HTTPStatusError
	if errors.As(err, &he) {
		st := status.Convert(he.Err)
		WriteError(w, he.HTTPStatus, st.Code(), st.Message())
		return
	}
	st := status.Convert(err)
	code := st.Code()
	msg := st.Message()
	// The gateway reports a body that failed to decode, or a query
	// parameter that failed to parse, as InvalidArgument; a body over the
	// limit is a 413.
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		WriteError(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument, "request body too large")
		return
	}
	WriteError(w, runtime.HTTPStatusFromCode(code), code, msg)
}

// RoutingError answers requests no route matches: 404 for an unknown path,
// 405 (with the method named) for a known path and another method.
func RoutingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		WriteError(w, httpStatus, codes.Unimplemented, "method "+r.Method+" not allowed here")
	case http.StatusNotFound:
		WriteError(w, httpStatus, codes.NotFound, "no such route: "+r.URL.Path)
	default:
		WriteError(w, httpStatus, codes.InvalidArgument, http.StatusText(httpStatus))
	}
}

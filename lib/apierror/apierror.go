// Package apierror writes the error answers of shindo's REST servers — the
// data API (the waveform archive's routes too) and the edges — all with one body,
// shindo.data.v1.Error, which the OpenAPI document every server publishes
// names as the answer of any error:
//
//	{"error":"…","code":5,"message":"…"}
//
// "error" is what clients should read; "code" (the gRPC code) and
// "message" (the same text) are where grpc-gateway's own error body holds
// them, kept so gateway clients find them where they expect. The HTTP
// status follows the code.
package apierror

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// Every field, even an empty message, as the document lists them.
var marshal = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503: about the
// time a database failover takes.
const RetryAfterUnavailable = 3

// Write writes an error answer with HTTP status httpStatus; code is
// the matching gRPC code. A 503 carries Retry-After.
func Write(w http.ResponseWriter, httpStatus int, code codes.Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	if httpStatus == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
	}
	b, _ := marshal.Marshal(&datav1.Error{Error: msg, Code: int32(code), Message: msg})
	w.WriteHeader(httpStatus)
	w.Write(append(b, '\n'))
}

// WriteStatus writes the error answer of a gRPC status error.
func WriteStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	Write(w, runtime.HTTPStatusFromCode(st.Code()), st.Code(), st.Message())
}

// Gateway is grpc-gateway's error handler: the status's code decides
// the HTTP status (InvalidArgument 400, Unauthenticated 401,
// PermissionDenied 403, NotFound 404, AlreadyExists 409,
// ResourceExhausted 429, Unavailable 503 with Retry-After, …) and the body
// is an Error.
func Gateway(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	var he *runtime.HTTPStatusError
	if errors.As(err, &he) {
		st := status.Convert(he.Err)
		Write(w, he.HTTPStatus, st.Code(), st.Message())
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
		Write(w, http.StatusRequestEntityTooLarge, codes.InvalidArgument, "request body too large")
		return
	}
	Write(w, runtime.HTTPStatusFromCode(code), code, msg)
}

// Routing answers requests no route matches: 404 for an unknown path,
// 405 (with the method named) for a known path and another method.
func Routing(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		Write(w, httpStatus, codes.Unimplemented, "method "+r.Method+" not allowed here")
	case http.StatusNotFound:
		Write(w, httpStatus, codes.NotFound, "no such route: "+r.URL.Path)
	default:
		Write(w, httpStatus, codes.InvalidArgument, http.StatusText(httpStatus))
	}
}

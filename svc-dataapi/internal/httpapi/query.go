package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"shindo.dev/lib/apierror"
)

// StrictQuery is grpc-gateway's query parameter parser made strict: a
// parameter that names no field of the request (a typo, a filter we do not
// have), a field the path already gives, or a single-valued field given
// twice is refused, where the default parser silently ignores the first
// two — a client misspelling min_magnitude must not get every report.
// Values are then parsed by the default parser.
type StrictQuery struct{}

var _ runtime.QueryParameterParser = StrictQuery{}

// Parse implements runtime.QueryParameterParser.
func (StrictQuery) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	if err := CheckQuery(msg.ProtoReflect().Descriptor(), values, filter); err != nil {
		return err
	}
	return (&runtime.DefaultQueryParser{}).Parse(msg, values, filter)
}

// CheckQuery checks the parameter names of values against the fields of
// desc (by proto or JSON name); filter holds the fields bound to the path.
func CheckQuery(desc protoreflect.MessageDescriptor, values url.Values, filter *utilities.DoubleArray) error {
	for key, vs := range values {
		var fd protoreflect.FieldDescriptor
		if !strings.ContainsAny(key, ".[]") && protoreflect.Name(key).IsValid() {
			fd = desc.Fields().ByName(protoreflect.Name(key))
		}
		if fd == nil {
			fd = desc.Fields().ByJSONName(key)
		}
		switch {
		case fd == nil || fd.Message() != nil:
			return fmt.Errorf("unknown query parameter %q", truncate(key, 64))
		case filter != nil && filter.HasCommonPrefix([]string{string(fd.Name())}):
			return fmt.Errorf("query parameter %q: given in the path already", key)
		case len(vs) > 1 && !fd.IsList():
			return fmt.Errorf("query parameter %q given %d times", key, len(vs))
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// NoQuery refuses query parameters on the /v1/ routes that take none —
// writes, whose request is the body, and GETs whose fields all come from
// the path — for which grpc-gateway does not parse the query at all and
// would ignore a misspelt filter silently. queried lists the paths (GET)
// whose requests have query fields; StrictQuery checks those.
func NoQuery(queried map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" && strings.HasPrefix(r.URL.Path, "/v1/") &&
			!(r.Method == http.MethodGet && queried[r.URL.Path]) {
			apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, "this route takes no query parameters")
			return
		}
		next.ServeHTTP(w, r)
	})
}

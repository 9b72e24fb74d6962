package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"

	"shindo.dev/lib/apierror"
)

// Data a GET answer may depend on, as a set of bits.
type Data uint8

const (
	// BodyHash: the answer is tagged with a hash of its body (it comes
	// from memory or another service, not from versioned tables).
	BodyHash Data = 0
	// Reports, Detections, Stations: the answer depends on these tables,
	// and is tagged with their versions instead of its body, so a matching
	// If-None-Match is answered with one primary-key read.
	Reports Data = 1 << iota
	Detections
	Stations
	// NoTag: no ETag at all (the waveform archive's answers, health).
	NoTag Data = 0x80
)

// Versions are the version counters of the tables (metadb.Versions).
type Versions struct {
	Reports, Detections, Stations int64
}

// Conditional answers conditional GETs. Every 200 answer to a GET gets an
// ETag and Cache-Control: no-cache (clients revalidate every time), and a
// GET whose If-None-Match holds the current tag gets 304 without a body.
//
// The tag of a versioned route is a hash of the route's path, its query in
// canonical form (parameters sorted by name, so the same query in any order
// has the same tag) and the versions of the tables it reads. The versions
// are read before the answer is computed, so a tag is never newer than the
// body it labels: at worst a body that raced with a write carries the older
// tag and is fetched once more. Other routes are tagged with a hash of
// their body, which must then be computed even for a 304.
type Conditional struct {
	// Route classifies a path.
	Route func(path string) Data
	// Versions reads the current versions; nil without a database (every
	// route is then tagged by body).
	Versions func(ctx context.Context) (Versions, error)
	// MaxBuffer bounds the body hashed for BodyHash routes; a longer body
	// is sent untagged.
	MaxBuffer int
}

// Wrap returns next with conditional GETs.
func (c *Conditional) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		data := c.Route(r.URL.Path)
		switch {
		case data == NoTag:
			next.ServeHTTP(w, r)
		case data == BodyHash || c.Versions == nil:
			c.byBody(w, r, next)
		default:
			c.byVersion(w, r, next, data)
		}
	})
}

func (c *Conditional) byVersion(w http.ResponseWriter, r *http.Request, next http.Handler, data Data) {
	v, err := c.Versions(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left
		}
		apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, "metadata database unavailable, retry")
		return
	}
	h := sha256.New()
	var num [8]byte
	h.Write([]byte{byte(data)})
	for _, d := range []struct {
		bit Data
		v   int64
	}{{Reports, v.Reports}, {Detections, v.Detections}, {Stations, v.Stations}} {
		if data&d.bit != 0 {
			binary.BigEndian.PutUint64(num[:], uint64(d.v))
			h.Write(num[:])
		}
	}
	h.Write([]byte(r.URL.Path))
	h.Write([]byte{0})
	h.Write([]byte(CanonicalQuery(r.URL.RawQuery)))
	tag := `"v` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:15]) + `"`
	if MatchETag(r.Header.Get("If-None-Match"), tag) {
		notModified(w, tag)
		return
	}
	next.ServeHTTP(&tagWriter{ResponseWriter: w, tag: tag}, r)
}

func notModified(w http.ResponseWriter, tag string) {
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusNotModified)
}

// CanonicalQuery returns a raw query with its parameters sorted by name
// (values of one name keep their order) and encoded alike; a query that
// does not parse is returned as it is (its answer is an error anyway).
func CanonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	return v.Encode()
}

// MatchETag reports whether an If-None-Match header value matches tag,
// with the weak comparison RFC 9110 prescribes for it: "*" matches, W/
// prefixes are ignored.
func MatchETag(header, tag string) bool {
	header = strings.TrimSpace(header)
	if header == "" {
		return false
	}
	if header == "*" {
		return true
	}
	tag = strings.TrimPrefix(tag, "W/")
	for len(header) > 0 {
		header = strings.TrimLeft(header, " \t,")
		header = strings.TrimPrefix(header, "W/")
		if !strings.HasPrefix(header, `"`) {
			// Not an entity tag: skip to the next comma.
			i := strings.IndexByte(header, ',')
			if i < 0 {
				return false
			}
			header = header[i:]
			continue
		}
		end := strings.IndexByte(header[1:], '"')
		if end < 0 {
			return false
		}
		if header[:end+2] == tag {
			return true
		}
		header = header[end+2:]
	}
	return false
}

// tagWriter adds the ETag to a 200 answer.
type tagWriter struct {
	http.ResponseWriter
	tag   string
	wrote bool
}

func (t *tagWriter) WriteHeader(code int) {
	if !t.wrote {
		t.wrote = true
		if code == http.StatusOK {
			t.Header().Set("ETag", t.tag)
			t.Header().Set("Cache-Control", "no-cache")
		}
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *tagWriter) Write(b []byte) (int, error) {
	if !t.wrote {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

func (t *tagWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (c *Conditional) byBody(w http.ResponseWriter, r *http.Request, next http.Handler) {
	bw := &bufferWriter{ResponseWriter: w, max: c.MaxBuffer}
	next.ServeHTTP(bw, r)
	if bw.passing {
		return
	}
	code := bw.code
	if code == 0 {
		code = http.StatusOK
	}
	if code == http.StatusOK {
		sum := sha256.Sum256(bw.buf.Bytes())
		tag := `"b` + base64.RawURLEncoding.EncodeToString(sum[:15]) + `"`
		if MatchETag(r.Header.Get("If-None-Match"), tag) {
			w.Header().Del("Content-Length")
			notModified(w, tag)
			return
		}
		w.Header().Set("ETag", tag)
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(code)
	w.Write(bw.buf.Bytes())
}

// bufferWriter holds an answer back until it is complete, or passes it on
// once it grows past max.
type bufferWriter struct {
	http.ResponseWriter
	max     int
	code    int
	buf     bytes.Buffer
	passing bool
}

func (b *bufferWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.passing {
		return b.ResponseWriter.Write(p)
	}
	if b.code == 0 {
		b.code = http.StatusOK
	}
	if b.buf.Len()+len(p) <= b.max {
		return b.buf.Write(p)
	}
	b.passing = true
	b.ResponseWriter.WriteHeader(b.code)
	if _, err := b.ResponseWriter.Write(b.buf.Bytes()); err != nil {
		return 0, err
	}
	return b.ResponseWriter.Write(p)
}

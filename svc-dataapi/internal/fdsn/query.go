// Package fdsn holds what the FDSN web services (fdsnws-station,
// -dataselect, -event and -availability 1.x, FDSN Web Service
// Specifications 1.2) share: their query parameters with aliases and
// types, times, SEED code patterns with wildcards and lists, the POST
// selection body, and the plain-text error document. Each service
// declares the parameters it takes (Spec); a request naming any other is
// refused, as the specifications and SeisComP's fdsnws do, so a client's
// misspelt filter is an error rather than silently ignored.
package fdsn

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"shindo.dev/seismo/seedcode"
)

// Kind is the type of a parameter's value.
type Kind int

// Kinds of parameter values.
const (
	Time  Kind = iota // a UTC time (ParseTime)
	Float             // a decimal number within [Min, Max]
	Int               // an integer within [Min, Max]
	Bool              // true or false, any case
	Enum              // one of Options, any case
	Codes             // SEED code patterns of one field (Field), comma-separated
	Text              // any text, spaces at its ends trimmed
)

// Field is which SEED code a Codes parameter selects.
type Field int

// SEED code fields.
const (
	Network Field = iota
	Station
	Location
	Channel
)

// maxLen is each field's code length (SEED 2.4).
var maxLen = [...]int{Network: seedcode.MaxNetwork, Station: seedcode.MaxStation, Location: seedcode.MaxLocation, Channel: seedcode.LenChannel}

// Param is one parameter a service takes.
type Param struct {
	Name    string   // the long name, lower case
	Aliases []string // short names (starttime: start)
	Kind    Kind
	Field   Field    // of a Codes parameter
	Options []string // of an Enum, lower case
	// Min and Max bound a Float or an Int (both 0: unbounded).
	Min, Max float64
	// Default is the value when the request gives none ("" for none).
	Default string
	// Unlisted leaves the parameter out of the WADL: the service takes it
	// at its default only (an optional feature it lacks), and clients
	// decide from the WADL whether to use a feature — ObsPy's
	// MassDownloader sends matchtimeseries=true to a station service
	// that lists it (obspy/clients/fdsn/mass_downloader/
	// download_helpers.py).
	Unlisted bool
}

// Spec is a service's parameters.
type Spec struct {
	Params []Param
}

// Common are the parameters of every service: the selection (times and
// codes), format and nodata. A service adds its own (and its formats).
func Common(formats ...string) []Param {
	return []Param{
		{Name: "starttime", Aliases: []string{"start"}, Kind: Time},
		{Name: "endtime", Aliases: []string{"end"}, Kind: Time},
		{Name: "network", Aliases: []string{"net"}, Kind: Codes, Field: Network},
		{Name: "station", Aliases: []string{"sta"}, Kind: Codes, Field: Station},
		{Name: "location", Aliases: []string{"loc"}, Kind: Codes, Field: Location},
		{Name: "channel", Aliases: []string{"cha"}, Kind: Codes, Field: Channel},
		{Name: "format", Kind: Enum, Options: formats, Default: formats[0]},
		{Name: "nodata", Kind: Enum, Options: []string{"204", "404"}, Default: "204"},
	}
}

// selection are the parameters a POST body gives on its selection lines,
// not as key=value lines.
var selection = []string{"starttime", "endtime", "network", "station", "location", "channel"}

// Bounds of what a request may ask, so that parsing it costs little
// whatever it holds.
const (
	maxPatterns   = 100 // code patterns in one parameter
	maxPatternLen = 16  // bytes of one pattern
	maxValueLen   = 256 // bytes of any other value
)

// Query is a parsed request: its values by long name.
type Query struct {
	spec   *Spec
	values map[string]any
}

// lookup finds the parameter a request names, by long name or alias.
func (s *Spec) lookup(name string) (*Param, bool) {
	for i := range s.Params {
		p := &s.Params[i]
		if p.Name == name || slices.Contains(p.Aliases, name) {
			return p, true
		}
	}
	return nil, false
}

// ParseQuery parses a GET request's query string.
func (s *Spec) ParseQuery(values url.Values) (*Query, error) {
	q := &Query{spec: s, values: map[string]any{}}
	for key, vs := range values {
		if err := q.set(strings.ToLower(key), vs); err != nil {
			return nil, err
		}
	}
	return q, q.check()
}

func (q *Query) set(key string, vs []string) error {
	p, ok := q.spec.lookup(key)
	if !ok {
		return badRequest("unknown parameter %q", key)
	}
	if _, dup := q.values[p.Name]; dup || len(vs) != 1 {
		return badRequest("parameter %q given more than once", p.Name)
	}
	v, err := p.parse(vs[0])
	if err != nil {
		return badRequest("parameter %q: %v", key, err)
	}
	q.values[p.Name] = v
	return nil
}

// check refuses a window that ends before it starts.
func (q *Query) check() error {
	start, okS := q.Time("starttime")
	end, okE := q.Time("endtime")
	if okS && okE && end.Before(start) {
		return badRequest("endtime %s is before starttime %s", FormatTime(end), FormatTime(start))
	}
	return nil
}

func (p *Param) parse(v string) (any, error) {
	if p.Kind != Codes && len(v) > maxValueLen {
		return nil, fmt.Errorf("longer than %d bytes", maxValueLen)
	}
	switch p.Kind {
	case Time:
		return ParseTime(v)
	case Float, Int:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		if p.Kind == Int && f != math.Trunc(f) {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		if (p.Min != 0 || p.Max != 0) && (f < p.Min || f > p.Max) {
			return nil, fmt.Errorf("%v is outside %v to %v", f, p.Min, p.Max)
		}
		return f, nil
	case Bool:
		switch strings.ToLower(v) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%q is neither true nor false", v)
	case Enum:
		if l := strings.ToLower(v); slices.Contains(p.Options, l) {
			return l, nil
		}
		return nil, fmt.Errorf("%q is not one of %s", v, strings.Join(p.Options, ", "))
	case Codes:
		return ParsePatterns(p.Field, v)
	case Text:
		return strings.TrimSpace(v), nil
	}
	return nil, fmt.Errorf("parameter of unknown kind %d", p.Kind)
}

// value is the parameter's value in q, or its default.
func (q *Query) value(name string) (any, bool) {
	if v, ok := q.values[name]; ok {
		return v, true
	}
	p, ok := q.spec.lookup(name)
	if !ok || p.Default == "" {
		return nil, false
	}
	v, err := p.parse(p.Default)
	return v, err == nil
}

// Time returns a Time parameter.
func (q *Query) Time(name string) (time.Time, bool) {
	v, ok := q.value(name)
	t, _ := v.(time.Time)
	return t, ok
}

// Float returns a Float or Int parameter.
func (q *Query) Float(name string) (float64, bool) {
	v, ok := q.value(name)
	f, _ := v.(float64)
	return f, ok
}

// Bool returns a Bool parameter; false when absent without a default.
func (q *Query) Bool(name string) bool {
	v, _ := q.value(name)
	b, _ := v.(bool)
	return b
}

// Enum returns an Enum parameter, lower case.
func (q *Query) Enum(name string) string {
	v, _ := q.value(name)
	s, _ := v.(string)
	return s
}

// Text returns a Text parameter; "" when absent.
func (q *Query) Text(name string) string {
	v, _ := q.value(name)
	s, _ := v.(string)
	return s
}

// Patterns returns a Codes parameter; nil (anything) when absent.
func (q *Query) Patterns(name string) []string {
	v, _ := q.value(name)
	p, _ := v.([]string)
	return p
}

// Has reports whether the request gave the parameter.
func (q *Query) Has(name string) bool {
	_, ok := q.values[name]
	return ok
}

// NoData is the status of an answer without data: 204, or 404 when the
// request asked for it.
func (q *Query) NoData() int {
	if q.Enum("nodata") == "404" {
		return 404
	}
	return 204
}

// Selection is one stream selection: code patterns and a time window
// (zero: open).
type Selection struct {
	Network, Station, Location, Channel []string // nil: anything
	Start, End                          time.Time
}

// Selection is the request's selection, from its parameters.
func (q *Query) Selection() Selection {
	s := Selection{Network: q.Patterns("network"), Station: q.Patterns("station"),
		Location: q.Patterns("location"), Channel: q.Patterns("channel")}
	s.Start, _ = q.Time("starttime")
	s.End, _ = q.Time("endtime")
	return s
}

// Matches reports whether a stream's codes are selected.
func (s Selection) Matches(net, sta, loc, cha string) bool {
	return MatchAny(s.Network, net) && MatchAny(s.Station, sta) && MatchAny(s.Location, loc) && MatchAny(s.Channel, cha)
}

// Overlaps reports whether [from, to) meets the selection's window (a
// zero to: open).
func (s Selection) Overlaps(from, to time.Time) bool {
	return (s.End.IsZero() || !from.After(s.End)) && (s.Start.IsZero() || to.IsZero() || to.After(s.Start))
}

// ParsePatterns parses a comma-separated list of code patterns of field:
// letters and digits with the wildcards * (any run) and ? (any one), upper
// case (codes are; lower case is taken as upper), and for the location
// "--" for the empty code. "*" alone selects anything (nil).
func ParsePatterns(field Field, v string) ([]string, error) {
	items := strings.Split(v, ",")
	if len(items) > maxPatterns {
		return nil, fmt.Errorf("more than %d codes", maxPatterns)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		it = strings.ToUpper(strings.TrimSpace(it))
		switch {
		case it == "*":
			return nil, nil
		case field == Location && (it == "--" || it == ""):
			out = append(out, "")
			continue
		case it == "":
			return nil, fmt.Errorf("empty code in %q", v)
		case len(it) > maxPatternLen:
			return nil, fmt.Errorf("code %.16q… too long", it)
		}
		literal := 0
		for i := 0; i < len(it); i++ {
			switch c := it[i]; {
			case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
				literal++
			case c == '?':
				literal++
			case c == '*':
			default:
				return nil, fmt.Errorf("code %q: only letters, digits, * and ? (and -- for an empty location)", it)
			}
		}
		if literal > maxLen[field] {
			return nil, fmt.Errorf("code %q: longer than %d characters", it, maxLen[field])
		}
		out = append(out, it)
	}
	return out, nil
}

// MatchAny reports whether code matches one of patterns; nil matches
// anything.
func MatchAny(patterns []string, code string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if Match(p, code) {
			return true
		}
	}
	return false
}

// Match reports whether code matches pattern: * any run of characters, ?
// any one. Iterative, with one backtrack point: linear in practice and
// never exponential, whatever the pattern.
func Match(pattern, code string) bool {
	p, c := 0, 0
	star, mark := -1, 0
	for c < len(code) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == code[c]):
			p++
			c++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, c
			p++
		case star >= 0:
			p = star + 1
			mark++
			c = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Time layouts the specifications allow, and what clients send besides:
// ObsPy six fractional digits, seisplotjs three, and some a trailing Z or
// an offset.
var timeLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02"}

// ParseTime parses a time of a request: YYYY-MM-DD, YYYY-MM-DDThh:mm:ss
// with up to nine fractional digits, UTC, or with a trailing Z or an
// offset (then converted to UTC). Years outside 1900–2599 are refused.
func ParseTime(v string) (time.Time, error) {
	s := strings.TrimSuffix(strings.TrimSpace(v), "Z")
	var t time.Time
	var err error
	for _, layout := range timeLayouts {
		if t, err = time.ParseInLocation(layout, s, time.UTC); err == nil {
			break
		}
	}
	if err != nil {
		if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return time.Time{}, fmt.Errorf("%q is not a time (YYYY-MM-DDThh:mm:ss.ssssss, UTC)", v)
		}
	}
	if y := t.Year(); y < 1900 || y > 2599 {
		return time.Time{}, fmt.Errorf("%q: year outside 1900 to 2599", v)
	}
	return t.UTC(), nil
}

// FormatTime writes a time as the services do: YYYY-MM-DDThh:mm:ss, with
// the fraction of a second (microseconds) only when there is one.
func FormatTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 != 0 {
		return t.Format("2006-01-02T15:04:05.000000")
	}
	return t.Format("2006-01-02T15:04:05")
}

// DistanceDeg is the great-circle distance in degrees (haversine), which
// the radius parameters are in.
func DistanceDeg(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	dlat, dlon := (lat2-lat1)*rad, (lon2-lon1)*rad
	a := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * math.Asin(math.Min(1, math.Sqrt(a))) / rad
}

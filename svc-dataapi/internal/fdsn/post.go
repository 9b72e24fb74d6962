package fdsn

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Bounds of a POST body: a request of a few hundred channels is large;
// these keep a hostile one cheap to refuse.
const (
	MaxPostLines   = 1000 // selection lines
	maxPostLineLen = 1024 // bytes of one line
)

// ErrTooLarge is a POST body beyond the bounds (413).
var ErrTooLarge = errors.New("request body too large")

// ParsePost parses a POST body (FDSN dataselect and station 1.1, "POST
// usage"): key=value lines — any parameter but the selection's — then one
// selection per line, "NET STA LOC CHA START [END]", each code field a
// pattern list as in a query (-- for an empty location) and each time a
// time as in a query or * for an open end. Blank lines and # comments are
// skipped. At least one selection line is required.
func (s *Spec) ParsePost(r io.Reader) (*Query, []Selection, error) {
	q := &Query{spec: s, values: map[string]any{}}
	var sels []Selection
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPostLineLen)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if key, v, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(key, " \t") {
			key = strings.ToLower(strings.TrimSpace(key))
			if len(sels) > 0 {
				return nil, nil, badRequest("line %d: %s= after the selection lines; parameters come first", n, key)
			}
			if p, ok := s.lookup(key); ok && slices.Contains(selection, p.Name) {
				return nil, nil, badRequest("line %d: %s goes on the selection lines, not as a parameter", n, key)
			}
			if err := q.set(key, []string{strings.TrimSpace(v)}); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(sels) == MaxPostLines {
			return nil, nil, tooLarge("more than %d selection lines", MaxPostLines)
		}
		sel, err := parseSelection(line)
		if err != nil {
			return nil, nil, badRequest("line %d: %v", n, err)
		}
		sels = append(sels, sel)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, nil, tooLarge("a line longer than %d bytes", maxPostLineLen)
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok || errors.Is(err, ErrTooLarge) {
			return nil, nil, tooLarge("%v", err)
		}
		return nil, nil, badRequest("reading the request: %v", err)
	}
	if len(sels) == 0 {
		return nil, nil, badRequest("no selection line (NET STA LOC CHA START END)")
	}
	return q, sels, nil
}

func parseSelection(line string) (Selection, error) {
	f := strings.Fields(line)
	if len(f) != 5 && len(f) != 6 {
		return Selection{}, errors.New("want NET STA LOC CHA START [END]")
	}
	var sel Selection
	var err error
	for i, p := range []*[]string{&sel.Network, &sel.Station, &sel.Location, &sel.Channel} {
		if *p, err = ParsePatterns(Field(i), f[i]); err != nil {
			return Selection{}, err
		}
	}
	for i, t := range []*time.Time{&sel.Start, &sel.End} {
		if 4+i >= len(f) || f[4+i] == "*" {
			continue
		}
		if *t, err = ParseTime(f[4+i]); err != nil {
			return Selection{}, err
		}
	}
	if !sel.End.IsZero() && sel.End.Before(sel.Start) {
		return Selection{}, errors.New("the end is before the start")
	}
	return sel, nil
}

// ParseRequest reads a GET request's query, or a POST request's body
// (ParsePost); a body beyond the bounds is a 413.
func (s *Spec) ParseRequest(r *http.Request) (*Query, []Selection, error) {
	if r.Method == http.MethodPost {
		q, sels, err := s.ParsePost(r.Body)
		if errors.Is(err, ErrTooLarge) {
			return nil, nil, &Error{Status: http.StatusRequestEntityTooLarge, Detail: err.Error()}
		}
		return q, sels, err
	}
	q, err := s.ParseQuery(r.URL.Query())
	if err != nil {
		return nil, nil, err
	}
	return q, []Selection{q.Selection()}, nil
}

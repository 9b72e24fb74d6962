package accelcsv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Errors wrapped by ParseError (and returned directly for bad arguments).
var (
	ErrNoRate    = errors.New("unknown sample rate")
	ErrUnit      = errors.New("unknown unit")
	ErrRagged    = errors.New("ragged row")
	ErrNumber    = errors.New("not a finite number")
	ErrNoHeader  = errors.New("missing NS,EW,UD column header")
	ErrNoSamples = errors.New("no samples")
	ErrLineLong  = errors.New("line too long")
)

// maxLine bounds one line of input; a real row is a few dozen bytes.
const maxLine = 64 << 10

// Unit is the unit of the numbers in a plain file.
type Unit int

const (
	Gal Unit = iota // cm/s²
	MS2             // m/s², converted to gal on reading
)

// ParseUnit accepts "gal" and "ms2" (also "m/s2" and "m/s/s").
func ParseUnit(s string) (Unit, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "gal", "cm/s2", "cm/s/s":
		return Gal, nil
	case "ms2", "m/s2", "m/s/s":
		return MS2, nil
	}
	return 0, fmt.Errorf("%w %q (want gal or ms2)", ErrUnit, s)
}

func (u Unit) String() string {
	if u == MS2 {
		return "ms2"
	}
	return "gal"
}

func (u Unit) toGal() float64 {
	if u == MS2 {
		return 100
	}
	return 1
}

// Format names the layout a record was read from.
type Format string

const (
	FormatJMA   Format = "jma"
	FormatPlain Format = "plain"
)

// Record is a three-component acceleration record in gal.
type Record struct {
	Format     Format
	RateHz     float64
	NS, EW, UD []float64
	// Start is the time of the first sample when the file gives it (JMA's
	// INITIAL TIME, Japan Standard Time), else the zero time.
	Start time.Time
}

// Len is the number of samples per component.
func (r *Record) Len() int { return len(r.NS) }

// ParseError locates a problem in the input.
type ParseError struct {
	Line int // 1-based; 0 when the problem is not on one line
	Err  error
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// PlainOptions describes a plain file, which carries neither rate nor unit.
type PlainOptions struct {
	RateHz float64
	Unit   Unit
}

// Read detects the format from the start of the input and reads the record.
// opts applies only to plain files; a JMA header states its own rate and unit.
func Read(r io.Reader, opts PlainOptions) (*Record, error) {
	br := bufio.NewReaderSize(r, 8192)
	head, _ := br.Peek(4096) // a short read just means a short file
	if IsJMA(head) {
		return ReadJMA(br)
	}
	return ReadPlain(br, opts)
}

// IsJMA reports whether the start of a file looks like JMA's format.
func IsJMA(head []byte) bool {
	return bytes.Contains(bytes.ToUpper(head), []byte("SAMPLING RATE"))
}

// lines yields the lines of r without their line terminators, numbered from 1.
type lines struct {
	sc   *bufio.Scanner
	num  int
	text []byte
}

func newLines(r io.Reader) *lines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	return &lines{sc: sc}
}

func (l *lines) next() bool {
	if !l.sc.Scan() {
		return false
	}
	l.num++
	l.text = bytes.TrimRight(l.sc.Bytes(), "\r")
	return true
}

func (l *lines) err() error {
	err := l.sc.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return &ParseError{Line: l.num + 1, Err: ErrLineLong}
	}
	return fmt.Errorf("read: %w", err)
}

// ReadJMA reads JMA's strong-motion CSV format.
func ReadJMA(r io.Reader) (*Record, error) {
	ls := newLines(r)
	rec := &Record{Format: FormatJMA}
	unit := Gal
	sawColumns := false
	for !sawColumns && ls.next() {
		key, value, hasValue := bytes.Cut(ls.text, []byte("="))
		k := strings.ToUpper(strings.TrimSpace(string(key)))
		switch {
		case !hasValue && isColumnHeader(ls.text):
			sawColumns = true
		case hasValue && k == "SAMPLING RATE":
			rate, err := parseRate(string(value))
			if err != nil {
				return nil, &ParseError{Line: ls.num, Err: err}
			}
			rec.RateHz = rate
		case hasValue && k == "UNIT":
			u, err := parseJMAUnit(string(value))
			if err != nil {
				return nil, &ParseError{Line: ls.num, Err: err}
			}
			unit = u
		case hasValue && k == "INITIAL TIME":
			// Informational only: a malformed time does not stop the intensity.
			rec.Start = parseInitialTime(string(value))
		}
	}
	if err := ls.err(); err != nil {
		return nil, err
	}
	if !sawColumns {
		return nil, &ParseError{Err: ErrNoHeader}
	}
	if rec.RateHz == 0 {
		return nil, &ParseError{Err: fmt.Errorf("%w: no SAMPLING RATE line", ErrNoRate)}
	}
	if err := readRows(ls, rec, unit.toGal(), splitComma, false); err != nil {
		return nil, err
	}
	return rec, nil
}

// ReadPlain reads three numeric columns; opts gives the rate and unit.
func ReadPlain(r io.Reader, opts PlainOptions) (*Record, error) {
	if !(opts.RateHz > 0) || math.IsInf(opts.RateHz, 0) {
		return nil, &ParseError{Err: fmt.Errorf("%w: give the rate of a plain file (--rate)", ErrNoRate)}
	}
	if opts.Unit != Gal && opts.Unit != MS2 {
		return nil, &ParseError{Err: fmt.Errorf("%w %d", ErrUnit, opts.Unit)}
	}
	rec := &Record{Format: FormatPlain, RateHz: opts.RateHz}
	if err := readRows(newLines(r), rec, opts.Unit.toGal(), splitAny, true); err != nil {
		return nil, err
	}
	return rec, nil
}

func readRows(ls *lines, rec *Record, scale float64, split func([]byte, *[3][]byte) int, allowHeader bool) error {
	var fields [3][]byte
	first := true
	for ls.next() {
		t := bytes.TrimSpace(ls.text)
		if len(t) == 0 || (allowHeader && t[0] == '#') {
			continue
		}
		n := split(t, &fields)
		if n != 3 {
			if first && allowHeader && !anyNumber(t) {
				first = false
				continue
			}
			return &ParseError{Line: ls.num, Err: fmt.Errorf("%w: %d columns, want 3", ErrRagged, n)}
		}
		var v [3]float64
		for i, f := range fields {
			x, err := strconv.ParseFloat(string(bytes.TrimSpace(f)), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				if first && allowHeader && !anyNumber(t) {
					break
				}
				return &ParseError{Line: ls.num, Err: fmt.Errorf("%w in column %d: %q", ErrNumber, i+1, truncate(f))}
			}
			v[i] = x * scale
			if i == 2 {
				rec.NS = append(rec.NS, v[0])
				rec.EW = append(rec.EW, v[1])
				rec.UD = append(rec.UD, v[2])
			}
		}
		first = false
	}
	if err := ls.err(); err != nil {
		return err
	}
	if len(rec.NS) == 0 {
		return &ParseError{Line: ls.num, Err: ErrNoSamples}
	}
	return nil
}

// splitComma splits a JMA data row; it returns the number of fields found
// (counting on past three so ragged rows are reported with their width).
func splitComma(t []byte, out *[3][]byte) int {
	n := 0
	for {
		f, rest, more := bytes.Cut(t, []byte(","))
		if n < 3 {
			out[n] = f
		}
		n++
		if !more {
			return n
		}
		t = rest
	}
}

// splitAny splits on commas if the row has any, else on tabs, else on runs of
// spaces.
func splitAny(t []byte, out *[3][]byte) int {
	switch {
	case bytes.IndexByte(t, ',') >= 0:
		return splitComma(t, out)
	case bytes.IndexByte(t, ';') >= 0:
		return splitOn(t, ';', out)
	case bytes.IndexByte(t, '\t') >= 0:
		return splitOn(t, '\t', out)
	}
	n := 0
	for f := range bytes.FieldsSeq(t) {
		if n < 3 {
			out[n] = f
		}
		n++
	}
	return n
}

func splitOn(t []byte, sep byte, out *[3][]byte) int {
	n := 0
	for {
		i := bytes.IndexByte(t, sep)
		f := t
		if i >= 0 {
			f = t[:i]
		}
		if n < 3 {
			out[n] = f
		}
		n++
		if i < 0 {
			return n
		}
		t = t[i+1:]
	}
}

// anyNumber reports whether a line holds something that parses as a number,
// which rules it out as a column header.
func anyNumber(t []byte) bool {
	for f := range bytes.FieldsFuncSeq(t, func(r rune) bool { return r == ',' || r == ';' || r == '\t' || r == ' ' }) {
		if _, err := strconv.ParseFloat(string(f), 64); err == nil {
			return true
		}
	}
	return false
}

func isColumnHeader(t []byte) bool {
	s := strings.ToUpper(strings.Join(strings.Fields(string(t)), ""))
	return s == "NS,EW,UD"
}

// parseRate reads "100Hz" (spaces and case aside).
func parseRate(v string) (float64, error) {
	s := strings.TrimSpace(v)
	if len(s) >= 2 && strings.EqualFold(s[len(s)-2:], "hz") {
		s = strings.TrimSpace(s[:len(s)-2])
	}
	rate, err := strconv.ParseFloat(s, 64)
	if err != nil || !(rate > 0) || math.IsInf(rate, 0) {
		return 0, fmt.Errorf("%w: SAMPLING RATE %q", ErrNoRate, truncate([]byte(strings.TrimSpace(v))))
	}
	return rate, nil
}

// parseJMAUnit reads "gal(cm/s/s)"; JMA's files are in gal, and m/s² is
// accepted for completeness.
func parseJMAUnit(v string) (Unit, error) {
	s := strings.ToLower(strings.Join(strings.Fields(v), ""))
	switch {
	case strings.HasPrefix(s, "gal"), strings.HasPrefix(s, "cm/s/s"), strings.HasPrefix(s, "cm/s2"):
		return Gal, nil
	case strings.HasPrefix(s, "m/s/s"), strings.HasPrefix(s, "m/s2"):
		return MS2, nil
	}
	return 0, fmt.Errorf("%w %q", ErrUnit, truncate([]byte(strings.TrimSpace(v))))
}

var jst = time.FixedZone("JST", 9*60*60)

func parseInitialTime(v string) time.Time {
	f := strings.Fields(v)
	if len(f) != 6 {
		return time.Time{}
	}
	var n [6]int
	for i, s := range f {
		x, err := strconv.Atoi(s)
		if err != nil {
			return time.Time{}
		}
		n[i] = x
	}
	t := time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], 0, jst)
	if t.Year() != n[0] || int(t.Month()) != n[1] || t.Day() != n[2] {
		return time.Time{} // out-of-range fields were normalised: reject
	}
	return t
}

// truncate keeps error messages short when a field is huge.
func truncate(b []byte) string {
	const limit = 40
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}

package seedlink

import (
	"errors"
	"path"
	"strconv"
	"strings"
	"time"
)

// Limits of what a client may ask.
const (
	// MaxLine is the longest command line; longer ones end the connection.
	MaxLine = 512
	// maxArgs is the most words of a command.
	maxArgs = 16
	// maxStations is the most STATION commands of one connection.
	maxStations = 2000
	// maxSelectors is the most SELECT patterns of one station (or of the
	// connection without STATION).
	maxSelectors = 64
	// maxPattern is the longest station or selector pattern.
	maxPattern = 32
)

// validPatternChars are what station IDs and selectors may hold, as
// ringserver accepts them (its VALIDSTAIDCHARS and VALIDSELECTCHARS).
const (
	stationChars  = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789?*_"
	selectorChars = stationChars + "-!"
)

// fields splits a command line into words, at most maxArgs.
func fields(line string) ([]string, bool) {
	w := strings.Fields(line)
	if len(w) > maxArgs {
		return w[:maxArgs], false
	}
	return w, true
}

func onlyChars(s, chars string) bool {
	for _, c := range s {
		if !strings.ContainsRune(chars, c) {
			return false
		}
	}
	return true
}

// stationPattern parses a STATION command's arguments into a NET_STA
// pattern: protocol 4 gives one ID (NET_STA, with wildcards), protocol 3
// the station and an optional network.
func stationPattern(proto int, args []string) (string, error) {
	var p string
	switch {
	case proto == 4 && len(args) == 1:
		p = args[0]
	case proto == 3 && len(args) == 1:
		p = "*_" + args[0]
	case proto == 3 && len(args) == 2:
		p = args[1] + "_" + args[0]
	case proto == 4:
		return "", errors.New("STATION requires 1 argument")
	default:
		return "", errors.New("STATION requires 1 or 2 arguments")
	}
	if len(p) > maxPattern || !onlyChars(p, stationChars) {
		return "", errors.New("invalid characters in station ID")
	}
	if proto == 4 && !strings.Contains(p, "_") {
		// A bare pattern names stations of any network.
		p = "*_" + p
	}
	return strings.ToUpper(p), nil
}

// matchStation reports whether pattern (NET_STA with * and ?) names key.
func matchStation(pattern string, key StationKey) bool {
	ok, err := path.Match(pattern, key.ID())
	return err == nil && ok
}

// selector is one SELECT pattern: a glob over the stream's LOC_B_S_SS,
// negated with a leading '!'; mseed3 asks for the streams it selects in
// miniSEED 3 (protocol 4's ":3" filter).
type selector struct {
	glob   string
	negate bool
	mseed3 bool
}

// parseSelector reads one SELECT pattern. Protocol 3 patterns are LLCCC or
// CCC (with ? wildcards), mapped to the source-ID form as ringserver does;
// a ".T" type suffix is accepted and ignored (every record is data), and
// so is protocol 4's ":native" filter; ":3" asks for miniSEED 3, as
// ringserver's SELECT reads it (src/slclient.c, "parse filter").
func parseSelector(proto int, s string) (selector, error) {
	if len(s) > maxPattern {
		return selector{}, errors.New("selector pattern too long")
	}
	var sel selector
	if proto == 4 {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			switch s[i+1:] {
			case "native":
			case "3":
				sel.mseed3 = true
			default:
				return selector{}, errors.New("filter not supported")
			}
			s = s[:i]
		}
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[:i]
	}
	if strings.HasPrefix(s, "!") {
		sel.negate, s = true, s[1:]
	}
	if proto == 3 {
		switch len(s) {
		case 5:
			s = s[0:2] + "_" + s[2:3] + "_" + s[3:4] + "_" + s[4:5]
		case 3:
			s = "*_" + s[0:1] + "_" + s[1:2] + "_" + s[2:3]
		default:
			return selector{}, errors.New("invalid selector pattern")
		}
		// SeedLink 3 writes an empty location as "--" or spaces.
		s = strings.ReplaceAll(s, "-", "")
	}
	if s == "" || !onlyChars(s, selectorChars) || strings.Contains(s, "!") {
		return selector{}, errors.New("selector contains illegal characters")
	}
	sel.glob = strings.ToUpper(s)
	if _, err := path.Match(sel.glob, ""); err != nil {
		return selector{}, errors.New("invalid selector pattern")
	}
	return sel, nil
}

// keeps applies a list of selectors to a stream: with none, every stream;
// otherwise a stream some positive selector matches (or every stream when
// all are negations) and no negation matches.
func keeps(sels []selector, s Stream) bool {
	if len(sels) == 0 {
		return true
	}
	id := s.sourceID()
	positive, matched := false, false
	for _, sel := range sels {
		ok, _ := path.Match(sel.glob, id)
		if sel.negate {
			if ok {
				return false
			}
			continue
		}
		positive = true
		matched = matched || ok
	}
	return matched || !positive
}

// formatOf is the payload format of a stream: miniSEED 3 when the first
// positive selector that matches it has the ":3" filter, as ringserver
// takes the first match's conversion (src/slclient.c, SLFindFilter).
func formatOf(sels []selector, s Stream) byte {
	id := s.sourceID()
	for _, sel := range sels {
		if sel.negate {
			continue
		}
		if ok, _ := path.Match(sel.glob, id); ok {
			if sel.mseed3 {
				return mseed3
			}
			return mseed2
		}
	}
	return mseed2
}

// parseTime reads a SeedLink time: protocol 3's YYYY,MM,DD,hh,mm,ss or
// an ISO 8601 time (YYYY-MM-DDThh:mm:ss[.ffffff][Z]), as libmseed reads
// both.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSuffix(s, "Z")
	parts := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("-,:T/ ", r) })
	if len(parts) < 1 || len(parts) > 6 {
		return time.Time{}, errors.New("bad time")
	}
	var v [6]int
	v[1], v[2] = 1, 1
	var frac time.Duration
	for i, p := range parts {
		if i == len(parts)-1 {
			if whole, f, ok := strings.Cut(p, "."); ok {
				if i < 5 || len(f) == 0 || len(f) > 9 {
					return time.Time{}, errors.New("bad time")
				}
				n, err := strconv.Atoi(f)
				if err != nil || n < 0 {
					return time.Time{}, errors.New("bad time")
				}
				for range 9 - len(f) {
					n *= 10
				}
				frac, p = time.Duration(n), whole
			}
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return time.Time{}, errors.New("bad time")
		}
		v[i] = n
	}
	if v[0] < 1900 || v[0] > 2100 || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return time.Time{}, errors.New("bad time")
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], 0, time.UTC).Add(frac), nil
}

// Package seedcode holds the rules for the codes that name a stream of
// seismic data — network, station, location and channel, as SEED 2.4
// defines them (the fixed section of a data record's header, chapter 8 of
// the SEED Reference Manual) — and how a station whose registry id is not
// such a code gets one.
//
// The registry owns a station's codes: they are chosen once, when it is
// provisioned, and every writer of data (the archive, exports, station
// metadata) uses them as stored, so a station has one name everywhere.
package seedcode

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
)

// Codes name a station's streams: its network, station and location
// codes; a stream adds a channel code.
type Codes struct {
	Network  string `json:"net"`
	Station  string `json:"sta"`
	Location string `json:"loc"`
}

// DefaultNetwork is the network code of stations provisioned without one.
const DefaultNetwork = "SH"

// DefaultLocation is the location code of stations provisioned without
// one: every sensor of a station is at its one site.
const DefaultLocation = "00"

// Lengths of the codes (SEED 2.4: network 2, station 5, location 2 and
// channel 3 characters, left-justified and space-padded in a record's
// header; padding is not part of a code).
const (
	MaxNetwork  = 2
	MaxStation  = 5
	MaxLocation = 2
	LenChannel  = 3
)

// IsCode reports whether s is minLen to maxLen upper-case ASCII letters
// and digits: what the header's fields can carry and every code here is
// made of. SEED allows lower case too, but FDSN's services match codes
// case-insensitively; one case keeps two spellings from naming two
// stations.
func IsCode(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Check reports what is wrong with c, or nil.
func (c Codes) Check() error {
	switch {
	case !IsCode(c.Network, 1, MaxNetwork):
		return fmt.Errorf("network code %q: want 1 to %d upper-case letters or digits", c.Network, MaxNetwork)
	case !IsCode(c.Station, 1, MaxStation):
		return fmt.Errorf("station code %q: want 1 to %d upper-case letters or digits", c.Station, MaxStation)
	case !IsCode(c.Location, 0, MaxLocation):
		return fmt.Errorf("location code %q: want 0 to %d upper-case letters or digits", c.Location, MaxLocation)
	}
	return nil
}

// IsZero reports whether no code is set.
func (c Codes) IsZero() bool { return c == Codes{} }

// Key is what must be unique among stations: network and station. Two
// locations of one station code are one station's two sites.
func (c Codes) Key() string { return c.Network + "." + c.Station }

// String is NET.STA.LOC.
func (c Codes) String() string { return c.Network + "." + c.Station + "." + c.Location }

// Station chooses the station code (at most five upper-case letters and
// digits) of a station whose registry id is id, given which codes are
// taken in its network:
//
//  1. an id that already is such a code keeps it ("TAP01" → "TAP01");
//  2. otherwise the last five letters and digits of the upper-cased id
//     ("SIM00042" → "00042", "tw-hl-0007" → "L0007");
//  3. if that is empty or taken by another station, a code derived from
//     SHA-256 of the id: five base-36 digits, re-hashed with a counter
//     until one is free.
//
// The registry stores the choice when the station is provisioned and it
// never changes, so the rule only has to be deterministic, not injective.
// lib/metadb's migration 0007 is this rule in SQL, for stations
// provisioned before the registry held codes; the two must agree.
func Station(id string, taken func(string) bool) string {
	up := strings.ToUpper(id)
	var cand string
	if IsCode(up, 1, MaxStation) {
		cand = up
	} else {
		var alnum []byte
		for i := 0; i < len(up); i++ {
			if c := up[i]; c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				alnum = append(alnum, c)
			}
		}
		cand = string(alnum[max(0, len(alnum)-MaxStation):])
	}
	if cand != "" && !taken(cand) {
		return cand
	}
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for i := uint64(0); ; i++ {
		var salt [8]byte
		binary.BigEndian.PutUint64(salt[:], i)
		sum := sha256.Sum256(append([]byte(id), salt[:]...))
		v := binary.BigEndian.Uint64(sum[:8])
		var code [MaxStation]byte
		for j := range code {
			code[j] = digits[v%36]
			v /= 36
		}
		if c := string(code[:]); !taken(c) {
			return c
		}
	}
}

package archive

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"shindo.dev/seismo/mseed"
)

// Location is the SEED location code of every archived channel.
const Location = "00"

// chanKind describes one archived channel of a station.
type chanKind struct {
	code     string         // SEED channel code
	periodMs int64          // time between samples
	rate     float64        // Hz
	enc      mseed.Encoding // Steim2 for counts, Float32 for the intensity series
	maxPer   int            // most samples a record can hold
}

// The channels of a station, in the order of the per-station arrays.
//
// Acceleration: band B (SEED 2.4 appendix A: sample rate ≥ 10 to < 80 Hz
// with a corner period ≥ 10 s — a MEMS accelerometer is flat down to DC),
// instrument N (accelerometer), orientation Z, N, E.
//
// Intensity series, one sample per 500 ms frame at its window end: band M
// (> 1 to < 10 Hz), instrument X ("derived or generated channel", the FDSN
// addendum of 2010), subsource I (real-time intensity), A (PGA, gal) and
// V (PGV, cm/s), as IEEE 32-bit floats exactly as the station sent them.
var kinds = [numChannels]chanKind{
	{"BNZ", 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{"BNN", 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{"BNE", 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{"MXI", 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
	{"MXA", 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
	{"MXV", 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
}

// Indexes into a station's channels.
const (
	chZ, chN, chE, chI, chA, chV = 0, 1, 2, 3, 4, 5
	numChannels                  = 6
	// recordLen is the length of every record in the archive.
	recordLen = 1024
	dayMs     = 24 * 60 * 60 * 1000
)

// isCode reports whether s is 1 to max upper-case letters and digits.
func isCode(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// stationCode chooses the SEED station code (at most five upper-case
// letters and digits) of station id, given which codes are taken:
//
//  1. an ID that already is such a code keeps it ("TAP01" → "TAP01");
//  2. otherwise the last five letters and digits of the upper-cased ID
//     ("SIM00042" → "00042", "tw-hl-0007" → "L0007");
//  3. if that is empty or taken by another station, a code derived from
//     SHA-256 of the ID: five base-36 digits, re-hashed with a counter
//     until one is free.
//
// The choice is recorded the first time a station is seen and never
// changes, so the rule only has to be deterministic, not injective: two
// cores that see stations in the same order name them the same, and a
// collision (SIM00042 and TST00042) can never merge two stations.
func stationCode(id string, taken func(string) bool) string {
	up := strings.ToUpper(id)
	var cand string
	if isCode(up, 5) {
		cand = up
	} else {
		var alnum []byte
		for i := 0; i < len(up); i++ {
			if c := up[i]; c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				alnum = append(alnum, c)
			}
		}
		cand = string(alnum[max(0, len(alnum)-5):])
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
		var code [5]byte
		for j := range code {
			code[j] = digits[v%36]
			v /= 36
		}
		if c := string(code[:]); !taken(c) {
			return c
		}
	}
}

// dayOf is the UTC day number (days since the Unix epoch) of a time in ms.
func dayOf(ms int64) int64 {
	d := ms / dayMs
	if ms < 0 && ms%dayMs != 0 {
		d--
	}
	return d
}

// sdsPath is the file of one channel-day relative to the SDS root:
// YEAR/NET/STA/CHAN.D/NET.STA.LOC.CHAN.D.YEAR.DOY.
func sdsPath(net, sta, chanCode string, day int64) string {
	t := time.UnixMilli(day * dayMs).UTC()
	year := fmt.Sprintf("%04d", t.Year())
	name := fmt.Sprintf("%s.%s.%s.%s.D.%s.%03d", net, sta, Location, chanCode, year, t.YearDay())
	return filepath.Join(year, net, sta, chanCode+".D", name)
}

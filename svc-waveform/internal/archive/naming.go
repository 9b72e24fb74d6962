package archive

import (
	"fmt"
	"path/filepath"
	"time"

	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
)

// Location is the SEED location code of stations whose record carries no
// codes, and of those archived before stations had their own.
const Location = seedcode.DefaultLocation

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
func sdsPath(net, sta, loc, chanCode string, day int64) string {
	t := time.UnixMilli(day * dayMs).UTC()
	year := fmt.Sprintf("%04d", t.Year())
	name := fmt.Sprintf("%s.%s.%s.%s.D.%s.%03d", net, sta, loc, chanCode, year, t.YearDay())
	return filepath.Join(year, net, sta, chanCode+".D", name)
}

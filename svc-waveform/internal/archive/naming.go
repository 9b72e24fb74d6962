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

// The channels of a station, in the order of the per-station arrays: the
// registry's table (seedcode.Channels), which station metadata describes.
var kinds = [numChannels]chanKind{
	{seedcode.Channels[0].Code, 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{seedcode.Channels[1].Code, 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{seedcode.Channels[2].Code, 20, 50, mseed.Steim2, mseed.MaxSamples(recordLen, mseed.Steim2)},
	{seedcode.Channels[3].Code, 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
	{seedcode.Channels[4].Code, 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
	{seedcode.Channels[5].Code, 500, 2, mseed.Float32, mseed.MaxSamples(recordLen, mseed.Float32)},
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

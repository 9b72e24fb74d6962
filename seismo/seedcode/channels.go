package seedcode

// Channel is one stream every station is archived and described as: the
// archive writes it under Code, and station metadata (StationXML) gives
// its rate, orientation and units. One table, so the two cannot name a
// station's data differently.
type Channel struct {
	Code   string  // SEED channel code
	RateHz float64 // samples per second
	// Azimuth (degrees east of north) and Dip (degrees down from
	// horizontal; −90 is up), SEED's convention.
	Azimuth, Dip float64
	// Counts are integers a station's scale turns into acceleration;
	// otherwise samples are the physical value itself, as floats.
	Counts bool
	// Units are what a sample measures (after the scale, for Counts),
	// as StationXML names units, with a description.
	Units, UnitsDescription string
	// Description says what the channel is, for people.
	Description string
}

// Channels are a station's channels, in the archive's order.
//
// Acceleration: band B (SEED 2.4 appendix A: sample rate ≥ 10 to < 80 Hz
// with a corner period ≥ 10 s — a MEMS accelerometer is flat down to DC),
// instrument N (accelerometer), orientation Z, N, E.
//
// Intensity series, one sample per 500 ms frame at its window end: band M
// (> 1 to < 10 Hz), instrument X ("derived or generated channel", the FDSN
// addendum of 2010), subsource I (real-time intensity), A (PGA, gal) and
// V (PGV, cm/s), as IEEE 32-bit floats exactly as the station sent them.
var Channels = [...]Channel{
	{Code: "BNZ", RateHz: 50, Azimuth: 0, Dip: -90, Counts: true, Units: "m/s**2", UnitsDescription: "acceleration",
		Description: "acceleration, vertical (up)"},
	{Code: "BNN", RateHz: 50, Azimuth: 0, Dip: 0, Counts: true, Units: "m/s**2", UnitsDescription: "acceleration",
		Description: "acceleration, north"},
	{Code: "BNE", RateHz: 50, Azimuth: 90, Dip: 0, Counts: true, Units: "m/s**2", UnitsDescription: "acceleration",
		Description: "acceleration, east"},
	{Code: "MXI", RateHz: 2, Units: "1", UnitsDescription: "JMA seismic intensity, real-time (dimensionless)",
		Description: "real-time JMA seismic intensity of each 500 ms frame, computed at the station"},
	{Code: "MXA", RateHz: 2, Units: "cm/s**2", UnitsDescription: "peak ground acceleration (gal)",
		Description: "peak of the three-component acceleration vector in each 500 ms frame"},
	{Code: "MXV", RateHz: 2, Units: "cm/s", UnitsDescription: "peak ground velocity",
		Description: "peak of the three-component velocity vector in each 500 ms frame"},
}

// CountsPerMS2 is the sensitivity of a Counts channel whose counts times
// scaleGal are gal: counts per m/s² (1 gal = 0.01 m/s²).
func CountsPerMS2(scaleGal float64) float64 { return 100 / scaleGal }

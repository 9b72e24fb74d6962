// Package accelcsv reads three-component acceleration records from text.
//
// Two formats are understood:
//
//   - JMA's strong-motion CSV: header lines (Shift_JIS site name, latitude,
//     longitude, `SAMPLING RATE= 100Hz`, `UNIT = gal(cm/s/s)`,
//     `INITIAL TIME = 2000 10 06 13 30 10`, ` NS,EW,UD`), then three
//     comma-separated columns. Only the ASCII keys of the header are
//     interpreted, so the Shift_JIS text needs no decoding.
//   - Plain columns: three numbers per line separated by commas, tabs or
//     spaces, with the rate and unit given by the caller. Blank lines and lines
//     starting with '#' are skipped, and a first line without any number is
//     taken as a column header.
//
// Values are returned in gal (cm/s²), columns in the order NS, EW, UD (for a
// plain file: the first, second and third column). Problems in the input are
// reported as *ParseError carrying the 1-based line number, wrapping one of
// the sentinel errors below, so callers can point at the offending line.
package accelcsv

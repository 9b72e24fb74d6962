// Package mseed reads and writes miniSEED 2.4 data records, the archive
// format of seismology (SEED Reference Manual v2.4, chapter 8 and
// appendix B; FDSN).
//
// A record is a 48-byte fixed header, a chain of blockettes and a data
// section. This package writes records of a power-of-two length (1024 bytes
// in shindo's archive) with one blockette 1000 (encoding, word order,
// record length), big-endian, data from byte 64; integer samples are
// compressed with Steim-2, floats are stored as IEEE 32-bit. It reads
// records of any byte order and length from 128 bytes to 64 KiB, following
// the blockette chain (1000, 100 for an exact sample rate, 1001 for
// microseconds), and decodes INT16, INT32, FLOAT32, FLOAT64, Steim-1 and
// Steim-2 data.
//
// Steim-2 packs the differences between consecutive samples into 32-bit
// words of 7×4, 6×5, 5×6, 4×8, 3×10, 2×15 or 1×30 bits, sixteen words to a
// 64-byte frame. The first frame also holds the first sample (X0, the
// forward integration constant) and the last (Xn, the reverse one), which a
// decoder checks. A difference that needs more than 30 bits cannot be
// packed: the encoder ends the record before it, and the next record starts
// at that sample, so any int32 sequence can be written.
//
// It also writes and reads miniSEED 3 (FDSN miniSEED 3.0) records, which
// SeedLink 4 clients may ask for: a little-endian 40-byte header, the FDSN
// source identifier, no padding (a record holds exactly its samples, in as
// many Steim-2 frames as they need) and a CRC-32C over the whole record,
// which Parse3 checks.
//
// Every decoder here takes outside input: lengths, counts and offsets are
// checked against the buffer, and bad input is an error, never a panic.
package mseed

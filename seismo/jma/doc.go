// Package jma measures seismic intensity the way the Japan Meteorological
// Agency defines it, plus the peak motions reported beside it.
//
// # Official instrumental intensity
//
// Instrumental computes JMA's 計測震度 from three orthogonal components (NS, EW,
// UD) in gal at any sample rate: each component is Fourier transformed,
// multiplied by the real zero-phase weight H(f) = F1·F2·F3 (period effect,
// high cut, low cut; H(0) = 0), transformed back, and the three are composed
// into v(t) = sqrt(x² + y² + z²). a0 is the k-th largest v with
// k = ceil(0.3 s · rate), computed in integer millihertz so that 0.3/0.05 is 6,
// not 5.999…; I = 2·log10(a0) + 0.94.
//
// JMA names no window, taper or padding. By default the record is zero-padded
// to the next power of two (so the circular transform does not wrap the end
// onto the start) and nothing else is done, which is how the reference values
// of the real records were produced. Options selects no padding (for exact
// on-bin synthetic checks) and mean removal.
//
// Reporting follows JMA exactly: n = floor(100·I + 0.5) (rounding at the third
// decimal) and reported = floor(n/10)/10 (truncation to one decimal), so 5.195
// reports 5.2, 5.194 reports 5.1 and 4.991 reports 4.9. The class (震度階級)
// comes from the reported value; Class also is the 0–9 level index that
// shindo's real-time snapshots use (0, 1, 2, 3, 4, 5-, 5+, 6-, 6+, 7).
//
// When a0 is zero (a silent or all-zero record) the logarithm is undefined;
// a0 is floored at MinA0 so I stays finite (MinIntensity).
//
// # Real-time intensity
//
// Realtime reports, at every Update (every 500 ms on a station), the
// intensity of the last Window (60 s) of a continuous stream, and keeps the
// running maximum, which converges to the official value of the whole event.
// It does not use the NIED recursive-filter approximation (patented,
// JP 5946067); it uses the official method itself on a sliding span.
//
// Each update filters the most recent Span (16 s) of samples. The span has
// two artificial edges: its oldest samples are cut out of a continuous
// record, and its newest have no future for the zero-phase filter. So the
// span's mean is removed (a sensor offset would be a step at each cut), both
// ends get a 0.5 s raised-cosine taper, the span is zero-padded to a power of
// two at least 1.25 times its length (so the filter's response to one end
// does not wrap onto the other), and only the samples that have just become
// HoldBack (1 s) old are kept: they have a second of future, clear of the
// newest taper, and sit far from the oldest cut. Each sample's filtered
// composite is computed once and remembered for Window; a0 is the k-th
// largest of those. One short transform per update instead of one over the
// whole window makes an update cost about 30 µs at 50 Hz.
//
// The effect of each choice on the JMA records (running maximum minus the
// official intensity of the 100 Hz record, worst of four records; the 50 Hz
// rows include the 0.005 that decimation alone causes):
//
//	no taper, no hold-back          0.034 (100 Hz)  0.035 (50 Hz)
//	taper 0.5 s, no hold-back       0.436           0.444  (ranks tapered samples)
//	no taper, hold-back 1 s         0.008           0.010
//	taper 0.5 s, hold-back 1 s      0.008           0.008  (default; 1 s latency)
//	taper 1 s, hold-back 2 s        0.001           0.005  (2 s latency)
//
// TestRealtimeEdgeTreatment prints the full table. The Window only sets how
// long the value stays up after the shaking: with 60 s the real-time
// intensity holds its peak for a minute; 10 s or 20 s windows give the same
// running maximum on these records and fall back sooner. Flush settles the last
// HoldBack at the true end of a record (as the official method, with no
// future), for offline use.
//
// # Peak motion
//
// PGA is the peak of the unfiltered three-component vector sum. PGV is the
// peak of the three-component vector velocity, where each component is
// integrated from acceleration by the causal filter s²/B3(s): a trapezoidal
// (bilinear) integrator combined with a 3rd-order Butterworth high-pass at
// 0.2 Hz, as JMA does, so offsets and drift do not accumulate. VelocityFilter
// runs it sample by sample with state; PGV runs it over a whole record from
// rest. Units: acceleration in gal (cm/s²), velocity in cm/s.
package jma

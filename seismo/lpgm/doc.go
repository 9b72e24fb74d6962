// Package lpgm measures JMA's long-period ground motion (長周期地震動): the
// absolute velocity response spectrum of the two horizontal components and
// the class (長周期地震動階級) it gives, offline from a record and in real
// time on a station's stream. Units: acceleration in gal, velocity in cm/s.
//
// # Definition
//
// For each horizontal component a(t), Sva(T) is the largest |ẋ + v_g| over
// time, where ẍ + 2hωẋ + ω²x = −a(t), ω = 2π/T, h = Damping (5 %), and v_g
// is the ground velocity, the integral of a. T runs over Period(0) …
// Period(NumPeriods−1): 1.6, 1.8, …, 7.8 s. A station's Sva is the largest
// over the periods and both components, and Class maps it to 0 (below
// 5 cm/s), 1 (from 5), 2 (from 15), 3 (from 50) and 4 (from 100).
//
// # Integration
//
// The record is taken as linear between samples, and each oscillator is
// advanced by the exact solution for a linear piece (Nigam & Jennings 1969):
// two 2×2 step matrices per period, computed once per sample rate, so the
// result does not depend on a time step being small. The ground velocity is
// the trapezoidal rule, which is the exact integral of a linear piece. Both
// start at rest. The same recursion serves Spectrum, Station and Tracker.
//
// # Offline
//
// Spectrum and Station remove the record's mean first, as JMA does; on the
// four JMA records of shared/testdata they reproduce JMA.md §6 to the
// table's 0.1 cm/s (AA06EA01 42.17 cm/s at 3.8 s, Q4149CF2 67.38 at 1.6 s,
// Q4169D2004 4.39, Q416EED018 7.34).
//
// # Real time, and drift
//
// A station cannot remove the mean of a record it has not finished. An
// offset left in the acceleration makes v_g grow without bound (and with it
// the response at every period, because absolute velocity follows the
// ground at long periods), and so does noise: an hour of 0.1 gal sensor
// noise integrates to a random walk that reads 331 cm/s, class 4, on a
// quiet station. So Tracker passes each component through a 2nd-order
// Butterworth high-pass at DefaultHighPassHz (0.02 Hz, 50 s) before both
// the ground velocity and the oscillators. Second order is the least that
// works: the integral of a 1st-order high-pass (a slowly updated mean) still
// leaves a permanent velocity offset of d/ωc after an offset step d; after
// a 2nd-order one the velocity returns to zero. The filter is primed on the
// first sample as if the input had always been that, so a sensor's standing
// offset does not ring through it. Applying the same filter to v_g and to
// the oscillators keeps their low-frequency cancellation intact; filtering
// v_g alone measured worse on three records of four (AA06EA01 −8.5 %).
//
// The corner is a trade. At 0.02 Hz the filter passes the longest period,
// 7.8 s, with gain 0.9997, and a 1 gal offset step (a 0.06° tilt) peaks at
// 0.456·d/ωc = 3.6 cm/s, below class 1. A lower corner lets steps and noise
// through; a higher one starts to eat the band. Measured on the JMA records
// decimated to 50 Hz, frame by frame (real-time Sva over the offline Sva of
// the 100 Hz record, minus one, in %; "step" and "drift" are the worst
// record with +1 gal added from halfway, or +1 mgal/s from the start;
// TestTrackerDriftTreatment prints the full table):
//
//	                           AA06EA01 Q4149CF2 Q4169D2004 Q416EED018  step   drift  1 h noise
//	none, pre-event mean (*)     −3.5     −0.4     +0.0       +0.4     +3318%  +890%  331 cm/s
//	none, first sample           −3.7     −0.4     +0.5     +208.4     +3409% +1015%  331 cm/s
//	high-pass 0.005 Hz           −5.0     −0.6     −3.6       +4.0      +238%   +16%  1.46 cm/s
//	high-pass 0.01 Hz            −6.1     −0.7     −2.1       +0.5       +77%  −5.8%  0.81 cm/s
//	high-pass 0.02 Hz (default)  −7.4     −1.1     −0.4       +0.9      −7.4%  −7.3%  0.41 cm/s
//	high-pass 0.03 Hz            −7.3     −1.4     −0.1       +1.2      −7.3%  −7.4%  0.33 cm/s
//	high-pass 0.05 Hz            −6.2     −2.0     −0.2       +1.6      −6.2%  −6.2%  0.22 cm/s
//
//	(*) baseline = mean of the first 10 s, known to be quiet only afterwards
//
// Three records land within 1.1 %. AA06EA01's EW component shifts its
// baseline during the shaking (its last four minutes average −0.07 gal, the
// first ten seconds +0.001), so the offline reference, which removes the
// whole record's mean, adds 1.5 cm/s of ground velocity at the moment of the
// peak; a causal method cannot know that (−3.5 % even with the ideal
// pre-event baseline), and the high-pass takes another 2 cm/s of the same
// slow velocity. Every class is exact in every row from 0.02 Hz up.
//
// # Bad samples
//
// A sample that is not finite or beyond ±MaxGal never reaches the state.
// Tracker holds the component's last good sample over it, because
// restarting from rest mid-event would take moving ground as the baseline
// and invent a transient of hundreds of cm/s; a 0.2 s gap just before the
// peak of AA06EA01 moves its Sva by +1 %. After a second without a good
// sample the stream is taken as broken and the tracker starts again from
// rest, primed on the next good sample (which may carry a new offset). The
// state is checked for non-finite values once a second and restarted if
// any, so nothing can keep it poisoned; peaks are never NaN.
//
// # Cost
//
// A Tracker allocates nothing after construction; one station-second at
// 50 Hz (50 samples of each component through its 32 oscillators, two frame
// peaks) takes about 10 µs on a 2-core Xeon VM, 10–17 µs across runs under
// load (BenchmarkTrackerStationSecond): some 100,000 stations per core.
package lpgm

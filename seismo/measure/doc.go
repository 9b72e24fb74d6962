// Package measure is a station's measurement pipeline: it turns a continuous
// 50 Hz three-axis acceleration stream (gal) into the two frames a station
// sends every 500 ms (SPEC §3): an intensity frame (real-time JMA intensity,
// PGA, PGV and the long-period response of the interval) and a sensor frame
// (the interval's 25 samples per axis as integer counts).
//
// The types mirror the station protocol's IntensityFrame and SensorFrame
// field for field (float32 where the wire has float) but are plain Go
// structs: this module does not import generated protobuf code, and the
// station agent maps them at its edge.
//
// Conventions:
//   - Sample i of the stream is at StartMs + 20·i ms. Frame j holds samples
//     25j … 25j+24: FirstSampleMs = StartMs + 500·j and WindowEndMs =
//     FirstSampleMs + 500 (the end of the interval, exclusive).
//   - Samples are quantised first (counts = round(gal / scale), scale as the
//     float32 the wire carries), and intensity, PGA and PGV are computed
//     from counts × scale, so a core recomputing them from the sensor frames
//     gets the same numbers.
//   - Intensity is the unrounded real-time intensity of jma.Realtime (the
//     last 60 s, settled with a 1 s hold-back) as of the end of the frame.
//     PGA is the peak three-component vector acceleration of the frame's
//     samples; PGV the peak three-component vector velocity of the frame's
//     samples, from jma.VelocityFilter run continuously over the stream.
//   - SvaCms is the peak absolute velocity response of the frame's samples
//     (h = 5 %, T = 1.6–7.8 s, NS and EW), from an lpgm.Tracker run
//     continuously over the stream; its running maximum is the station's
//     long-period Sva and lpgm.Class of it the long-period class.
//   - P is the pick and first-seconds measurement (Pd, τc) of a
//     pwave.Meter run continuously over the vertical component, as of the
//     end of the frame; it stays for a minute after the pick.
//
// A Pipeline reuses its buffers and allocates nothing per sample or frame;
// one update (25 samples and a frame) costs a few tens of microseconds. It is
// not safe for concurrent use; run one per station.
package measure

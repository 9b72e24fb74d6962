// Package synth generates synthetic three-component ground acceleration for a
// station during an earthquake, for simulating a station network.
//
// # Method
//
// The motion follows the stochastic point-source method of Boore (2003,
// "Simulation of ground motion using the stochastic method", Pure Appl.
// Geophys. 160, 635–676): windowed Gaussian noise is given the Fourier
// amplitude spectrum of a seismological model, so that on average its
// spectrum is the model's and its duration grows with magnitude and
// distance. The model (Model, DefaultModel) is the classic western-North-
// America one, each parameter cited where it is defined:
//
//   - source: Brune ω² spectrum, stress parameter 100 bar (Boore 1983), M0
//     from Mw as in Boore (2003), ρ = 2.8 g/cm³, β = 3.5 km/s;
//   - path: geometric spreading 1/R to 40 km and R^-0.5 beyond, anelastic
//     Q(f) = 180·f^0.45 (Atkinson & Silva 2000; Raoof et al. 1999), duration
//     1/fc + 0.05·R (Atkinson & Silva 2000);
//   - site: generic-rock amplification and κ0 = 0.035 s (Boore & Joyner 1997);
//   - finite-fault saturation: the point source is seen at R = sqrt(Rhyp² +
//     h²) with h = 10^(−0.405 + 0.235·M) (Yenier & Atkinson 2015), so large
//     events do not blow up next to the epicentre;
//   - window: Saragoni & Hart (1974) with ε = 0.2, η = 0.05, lasting twice
//     the ground-motion duration (Boore 2003).
//
// S waves carry the model's horizontal spectrum on NS and EW (independent
// realisations) and half of it on UD. P waves use the same source with the P
// corner frequency 1.5·fc (Madariaga 1976), the P radiation and velocity
// (RθφP/RθφS from the focal-sphere averages 0.52/0.63 of Boore & Boatwright
// 1984; amplitude ∝ 1/α³), Q_P = 2.25·Q_S (losses in shear only), and arrive
// polarised along the ray: mostly vertical, the rest radial.
//
// Arrivals are computed for a constant-velocity crust (VP = 6.06 km/s,
// VS = 3.5 km/s): tP = Rhyp/VP, tS = Rhyp/VS, Rhyp the straight-line distance
// from the hypocentre.
//
// PredictPGA and PredictIntensity give the model's own random-vibration
// predictions (Boore 2003, with the Cartwright & Longuet-Higgins peak factor)
// that the tests hold the time series to; the tests also compare PGA with the
// empirical relation of Boore, Joyner & Fumal (1997).
//
// # An independent amplitude model
//
// The detector's magnitude table is fitted to PredictIntensity, so events
// played with this model test the detector against itself. An Event whose
// Motion is MotionLin2009 keeps the model's waveforms but scales each
// station's so that its PGA follows the relation of Lin (2009) for crustal
// earthquakes in Taiwan, fitted to Taiwan Strong Motion Instrumentation
// Program records, with its scatter (σ of ln PGA 0.54, one draw per
// station and event): amplitudes that owe nothing to the detector's
// tables (motion.go, where the relation is cited). Against the model it
// decays more slowly beyond 100 km (at 300 km its PGA is 2–5 times the
// model's), and it grows less with magnitude above M6.3 (for M7.4, a third
// lower within 30–100 km); docs/BENCHMARKS.md tabulates the detector's
// errors under both.
//
// # Streaming
//
// A Generator produces one station's 50 Hz samples in order, any number at a
// time, the same samples whatever the chunking. Background noise is white
// Gaussian noise of NoiseGal per axis (default 0.12 gal rms, the noise floor
// of a good MEMS accelerometer such as the ADXL355 over 25 Hz). An event's
// waveform at the station is computed once, when the stream first reaches
// the P arrival (four transforms of a few thousand points: about 2 ms for
// the M7.4 scenario at 100 km), then played back and dropped; a station far from an event costs nothing extra until
// the waves arrive, which also spreads the work of a network over the
// seconds the waves take to cross it.
//
// Everything is deterministic: the same Config.Seed, position, events and
// start time give identical samples. Seeds for many stations come from
// StationSeed.
//
// Built-in scenarios (Scenarios, Scenario) are modelled on damaging events
// in Hualien, Kaohsiung (Meinong) and Taitung (Chishang), with a moderate
// one offshore outside the network and a small felt one.
package synth

package synth

import (
	"testing"
	"time"
)

// networkStations is the land grid of TestHualienScenarioMap at 0.1°.
func networkStations() []Position {
	var ps []Position
	for lat := 21.9; lat < 25.35; lat += 0.1 {
		for lon := 120.0; lon < 122.05; lon += 0.1 {
			if p := (Position{Lat: lat, Lon: lon}); onLand(p) {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// benchmarkNetwork streams seconds of 50 Hz samples for every station of the
// grid in 500 ms reads, as a simulator does, and reports how many stations
// one core could keep up with in real time.
func benchmarkNetwork(b *testing.B, withEvent bool, seconds int) {
	stations := networkStations()
	ev, err := Scenario("hualien")
	if err != nil {
		b.Fatal(err)
	}
	start := ev.Origin.Add(-5 * time.Second)
	ns, ew, ud := make([]float64, RateHz/2), make([]float64, RateHz/2), make([]float64, RateHz/2)
	b.ReportAllocs()
	for b.Loop() {
		gens := make([]*Generator, len(stations))
		for i, p := range stations {
			gens[i] = New(p, start, Config{Seed: StationSeed(1, p.String())})
			if withEvent {
				gens[i].AddEvent(ev)
			}
		}
		for range seconds * 2 {
			for _, g := range gens {
				g.Read(ns, ew, ud)
			}
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(stations)*seconds)/perOp, "stations/core")
}

// BenchmarkNetworkHualien: 180 s around the M7.4 Hualien scenario (every
// station renders the event once, then streams it).
func BenchmarkNetworkHualien(b *testing.B) { benchmarkNetwork(b, true, 180) }

// BenchmarkNetworkQuiet: background noise only.
func BenchmarkNetworkQuiet(b *testing.B) { benchmarkNetwork(b, false, 180) }

// BenchmarkRender is the one-off cost of one event at one station 100 km
// away.
func BenchmarkRender(b *testing.B) {
	ev, err := Scenario("hualien")
	if err != nil {
		b.Fatal(err)
	}
	pos := Position{Lat: ev.Lat + 0.9, Lon: ev.Lon - 0.1}
	m := DefaultModel()
	b.ReportAllocs()
	for b.Loop() {
		m.render(ev, pos, 1, RateHz, 1)
	}
}

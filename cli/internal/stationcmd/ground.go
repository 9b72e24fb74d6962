package stationcmd

import (
	"fmt"
	"time"

	"shindo.dev/cli/internal/fleet"
	"shindo.dev/seismo/synth"
)

// groundConfig chooses the simulated ground motion.
type groundConfig struct {
	Scenario   string        `conf:"scenario" help:"built-in earthquake to play (hualien, hualien-m6, yilan-m4); empty for a quiet network"`
	ScenarioIn time.Duration `conf:"scenario-in" default:"20s" help:"origin time of the scenario, after the start"`
	Seed       uint64        `conf:"seed" default:"1" help:"seed of the simulated noise and motion"`
}

func (c *groundConfig) validate() error {
	if c.Scenario == "" {
		return nil
	}
	if _, err := synth.Scenario(c.Scenario); err != nil {
		return err
	}
	if c.ScenarioIn < 0 {
		return fmt.Errorf("scenario-in must not be negative")
	}
	return nil
}

// synthGround adapts a synthetic generator to the fleet: background noise,
// plus the scenario's P and S waves at the station's distance.
type synthGround struct{ g *synth.Generator }

func (s synthGround) Fill(_ int64, ns, ew, ud []float64) { s.g.Read(ns, ew, ud) }
func (s synthGround) Skip(samples int)                   { s.g.Skip(samples) }

// grounds returns the fleet's ground factory for cfg.
func (c groundConfig) grounds(startedAt time.Time) (func(fleet.Station, time.Time) fleet.Ground, error) {
	var event *synth.Event
	if c.Scenario != "" {
		ev, err := synth.Scenario(c.Scenario)
		if err != nil {
			return nil, err
		}
		ev.Origin = startedAt.Add(c.ScenarioIn)
		event = &ev
	}
	return func(st fleet.Station, start time.Time) fleet.Ground {
		g := synth.New(synth.Position{Lat: st.Lat, Lon: st.Lon}, start, synth.Config{Seed: synth.StationSeed(c.Seed, st.ID)})
		if event != nil {
			g.AddEvent(*event)
		}
		return synthGround{g}
	}, nil
}

package stationcmd

import (
	"fmt"
	"time"

	"shindo.dev/cli/internal/fleet"
	"shindo.dev/seismo/synth"
)

// groundConfig chooses the simulated ground motion.
type groundConfig struct {
	Scenario   string        `conf:"scenario" help:"built-in earthquake to play (hualien, hualien-m6, meinong-m6, chishang-m7, taitung-offshore-m5, yilan-m4); empty for a quiet network"`
	ScenarioIn time.Duration `conf:"scenario-in" default:"20s" help:"origin time of the scenario, after the start"`
	Motion     string        `conf:"motion" default:"stochastic" help:"how the scenario's amplitudes fall off: stochastic (the synthetic model's own, which the detector's magnitude table is fitted to) or lin2009 (Lin (2009)'s PGA relation for Taiwan, with its scatter)"`
	Seed       uint64        `conf:"seed" default:"1" help:"seed of the simulated noise and motion"`
}

func (c *groundConfig) validate() error {
	if _, err := synth.ParseMotion(c.Motion); err != nil {
		return err
	}
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
		if ev.Motion, err = synth.ParseMotion(c.Motion); err != nil {
			return nil, err
		}
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

// Package rts is svc-rts: it receives a core's verified station stream from
// svc-ingest, computes a real-time shaking snapshot every 500 ms tick and
// streams the snapshots to the edges.
package rts

import (
	"context"
	"errors"
	"time"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationsource"
	"shindo.dev/svc-rts/internal/rtsgrpc"
	"shindo.dev/svc-rts/internal/shake"
)

// Name is the binary and service name.
const Name = "shindo-rts"

// Config is svc-rts's configuration (env prefix SHINDO_RTS_).
type Config struct {
	service.Common
	stationsource.Config
	TickMaxDelay   time.Duration `conf:"tick-max-delay" default:"150ms" help:"latest a tick is emitted after its time when some stations have not reported"`
	AlertIntensity float64       `conf:"alert-intensity" default:"1.5" help:"real-time intensity at which a station counts as triggered"`
	DisplayDecay   float64       `conf:"display-decay" default:"0.15" help:"decay of the display intensity after shaking, units per second"`
}

// DefaultConfig returns the configuration with svc-rts's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7202", AdminAddr: ":7209"}}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.ValidateCommon())
	errs = append(errs, c.Config.Validate())
	if c.TickMaxDelay <= 0 || c.TickMaxDelay >= shake.TickMs*time.Millisecond {
		errs = append(errs, errors.New("tick-max-delay must be between 0 and 500ms"))
	}

	if c.DisplayDecay <= 0 {
		errs = append(errs, errors.New("display-decay must be positive"))
	}
	return errors.Join(errs...)
}

// Run runs svc-rts until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		return wire(ctx, svc, cfg)
	})
}

func wire(ctx context.Context, svc *service.Service, cfg Config) error {
	reg, err := stationsource.Attach(ctx, svc, cfg.Config, cfg.DependencyWait)
	if err != nil {
		return err
	}
	engine := shake.New(shake.Config{
		AlertIntensity:     cfg.AlertIntensity,
		DisplayDecayPerSec: cfg.DisplayDecay,
		Locate: func(id string) (shake.Place, bool) {
			st, ok := reg.Source.Lookup(id)
			if !ok {
				return shake.Place{}, false
			}
			return shake.Place{Lat: st.Lat, Lon: st.Lon, Code: st.Code}, true
		},
	})
	srv := rtsgrpc.New(engine, cfg.Site, cfg.TickMaxDelay, svc.Stopping(), svc.Metrics(), svc.Logger())
	rtsv1.RegisterRTSServiceServer(svc.GRPC(), srv)
	svc.SetServingStatus(rtsv1.RTSService_ServiceDesc.ServiceName, true)
	svc.Go("tick loop", srv)
	return nil
}

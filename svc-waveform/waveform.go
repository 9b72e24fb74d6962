// Package waveform is svc-waveform: it receives a core's verified station
// stream from svc-ingest, keeps every station's samples and intensity
// series in the core's archive (internal/archive: miniSEED in the SDS
// layout, crash-safe, 7 days by default), streams live chunks to
// subscribers and serves the archive over gRPC (Query, Export). Its REST
// routes (JSON and miniSEED downloads) are the data API's, which reaches the
// archive over this gRPC service.
package waveform

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/cidr"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/service"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-waveform/internal/archive"
	"shindo.dev/svc-waveform/internal/seedlink"
	"shindo.dev/svc-waveform/internal/wavegrpc"
)

// Name is the binary and service name.
const Name = "shindo-waveform"

// Config is svc-waveform's configuration (env prefix SHINDO_WAVEFORM_).
type Config struct {
	service.Common
	DataDir   string        `conf:"data-dir" help:"archive directory (required; one process per directory): SDS tree, write-ahead log, station map"`
	Retention time.Duration `conf:"retention" default:"168h" help:"how long samples and intensity series are kept"`
	Network   string        `conf:"network" default:"SH" help:"SEED network code of stations whose records carry none from the registry (journaled before it held codes): 1 or 2 upper-case letters or digits"`
	FlushAge  time.Duration `conf:"flush-age" default:"60s" help:"longest a channel's buffer waits for more samples before it is written as a part-filled miniSEED record"`

	SeedLinkAddr    string        `conf:"seedlink-addr" help:"SeedLink listen address (protocol 3.1 and 4.0 on TCP, and WebSocket on the same port); empty: no SeedLink"`
	SeedLinkWindow  time.Duration `conf:"seedlink-window" default:"2m" help:"how much of each station SeedLink keeps in memory for clients that resume or ask from a time"`
	SeedLinkClients int           `conf:"seedlink-max-clients" default:"2000" help:"most SeedLink connections at once"`
	SeedLinkPerAddr int           `conf:"seedlink-max-per-ip" default:"64" help:"most SeedLink connections from one address other than a trusted proxy's"`
	TrustedProxies  []string      `conf:"trusted-proxies" help:"CIDRs or addresses of the edges, comma-separated: their SeedLink connections carry many clients and are not held to seedlink-max-per-ip (under mutual TLS every caller is an edge or an operator, and none is)"`
}

// DefaultConfig returns the configuration with svc-waveform's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7302", AdminAddr: "127.0.0.1:7309"}, SeedLinkAddr: ":18000"}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir is required"))
	}
	if c.Retention < time.Hour {
		errs = append(errs, errors.New("retention must be at least 1h"))
	}
	if !seedcode.IsCode(c.Network, 1, seedcode.MaxNetwork) {
		errs = append(errs, fmt.Errorf("network %q: want 1 or 2 upper-case letters or digits", c.Network))
	}
	if c.FlushAge < time.Second || c.FlushAge > time.Hour {
		errs = append(errs, errors.New("flush-age must be between 1s and 1h"))
	}
	if c.SeedLinkWindow < 10*time.Second || c.SeedLinkWindow > time.Hour {
		errs = append(errs, errors.New("seedlink-window must be between 10s and 1h"))
	}
	if c.SeedLinkClients < 1 || c.SeedLinkPerAddr < 1 {
		errs = append(errs, errors.New("seedlink-max-clients and seedlink-max-per-ip must be at least 1"))
	}
	if _, err := cidr.Parse(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("trusted-proxies %w", err))
	}
	return errors.Join(errs...)
}

// Run runs svc-waveform until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		return wire(ctx, svc, cfg)
	})
}

func wire(ctx context.Context, svc *service.Service, cfg Config) error {
	store, err := archive.Open(archive.Options{
		Dir: cfg.DataDir, Network: cfg.Network, Retention: cfg.Retention, FlushAge: cfg.FlushAge,
		Log: svc.Logger(), Metrics: svc.Metrics(),
	})
	if err != nil {
		return err
	}
	// Closers run after the servers and the commit loop have stopped: the
	// archive then writes its buffers as records and leaves no WAL.
	svc.OnShutdown("archive", store.Close)
	svc.Go("archive commit loop", store)
	svc.AddReadiness("archive", func(context.Context) error { return store.Err() })

	srv := wavegrpc.New(store, svc.Stopping(), svc.Metrics(), svc.Logger())
	waveformv1.RegisterWaveformServiceServer(svc.GRPC(), srv)
	// Fed by this core's ingest alone; read by the edges (live) and the
	// core's data API (the archive's REST routes).
	svc.Authorize(peerid.Policy{
		"/" + waveformv1.WaveformService_ServiceDesc.ServiceName + "/": peerid.Allow(peerid.Edge, peerid.DataAPI, peerid.Operator),
		waveformv1.WaveformService_Ingest_FullMethodName:               peerid.AllowSameSite(peerid.Ingest),
	})
	svc.SetServingStatus(waveformv1.WaveformService_ServiceDesc.ServiceName, true)
	if cfg.SeedLinkAddr != "" {
		return serveSeedLink(svc, cfg, store, srv)
	}
	return nil
}

// serveSeedLink starts the SeedLink server, fed with every record that
// brought new data to the archive, under the archive's SEED names. It is
// one of the network's internal hops, which clients reach through the
// edges: under mutual TLS only edges and operators may connect.
func serveSeedLink(svc *service.Service, cfg Config, store *archive.Store, srv *wavegrpc.Server) error {
	trusted, _ := cidr.Parse(cfg.TrustedProxies) // validated
	_, mutual := svc.Identity()
	sl := seedlink.New(seedlink.Options{
		Addr: cfg.SeedLinkAddr, Window: cfg.SeedLinkWindow, ClientBuffer: 4096,
		MaxClients: cfg.SeedLinkClients, MaxPerAddr: cfg.SeedLinkPerAddr,
		// The connection list shows clients' addresses: operators only,
		// by their certificate, or from this host when it runs no edge.
		Trusted: func(c net.Conn) bool {
			if mutual {
				tc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
				if !ok {
					return false
				}
				st := tc.ConnectionState()
				id, ok := peerid.FromTLS(&st)
				return ok && id.Role == peerid.Operator
			}
			a, ok := c.RemoteAddr().(*net.TCPAddr)
			return ok && a.IP.IsLoopback() && !cidr.Contains(trusted, a.AddrPort().Addr())
		},
		Proxy: func(c net.Conn) bool {
			if mutual {
				return true
			}
			a, ok := c.RemoteAddr().(*net.TCPAddr)
			return ok && cidr.Contains(trusted, a.AddrPort().Addr())
		},
		Negotiation: time.Minute, WriteTimeout: 10 * time.Second, SendBuffer: 256 << 10, Site: cfg.Site,
		Names: func(id string) (seedlink.StationKey, bool) {
			c, ok := store.Names(id)
			return seedlink.StationKey{Network: c.Network, Station: c.Station}, ok
		},
		Archive: func(id string, fromMs, toMs int64) ([]seedlink.Frame, error) {
			return archiveFrames(store, id, fromMs, toMs)
		},
	}, svc.Metrics(), svc.Logger())
	ln, err := sl.Listen()
	if err != nil {
		return fmt.Errorf("listen seedlink %s: %w", cfg.SeedLinkAddr, err)
	}
	ln = svc.InternalListener("seedlink", ln, peerid.Allow(peerid.Edge, peerid.Operator))
	svc.Logger().Info("seedlink listening", slog.String("addr", ln.Addr().String()))
	srv.OnStored(func(rec *ingestv1.Record) {
		p := rec.GetPacket()
		f := seedlink.Frame{Station: p.GetStationId()}
		if s := p.GetSensor(); s != nil {
			f.Sensor, f.FirstMs, f.UD, f.NS, f.EW = true, s.GetFirstSampleMs(), s.GetUd(), s.GetNs(), s.GetEw()
		} else if in := p.GetIntensity(); in != nil {
			f.FirstMs, f.Values = in.GetWindowEndMs(), [3]float32{in.GetIntensity(), in.GetPgaGal(), in.GetPgvCms()}
		} else {
			return
		}
		sl.Publish(f)
	})
	svc.Go("seedlink", service.ComponentFunc(func(ctx context.Context) error { return sl.Serve(ctx, ln) }))
	return nil
}

// archiveFrames reads a station's samples and intensity frames in [fromMs,
// toMs) from the archive as SeedLink frames: a contiguous run of samples
// is one frame.
func archiveFrames(store *archive.Store, id string, fromMs, toMs int64) ([]seedlink.Frame, error) {
	res, err := store.Query(id, fromMs, toMs, true)
	if errors.Is(err, archive.ErrUnknownStation) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []seedlink.Frame
	for _, c := range res.Chunks {
		// Only the samples inside the window: the ring has the rest.
		lo := max(0, (fromMs-c.FirstMs+19)/20)
		hi := min(int64(len(c.UD)), max(0, (toMs-c.FirstMs+19)/20))
		if lo >= hi {
			continue
		}
		out = append(out, seedlink.Frame{Station: id, Sensor: true, FirstMs: c.FirstMs + 20*lo,
			UD: c.UD[lo:hi], NS: c.NS[lo:hi], EW: c.EW[lo:hi]})
	}
	for _, in := range res.Intensity {
		if in.WindowEndMs >= fromMs && in.WindowEndMs < toMs {
			out = append(out, seedlink.Frame{Station: id, FirstMs: in.WindowEndMs, Values: [3]float32{in.Intensity, in.PGA, in.PGV}})
		}
	}
	return out, nil
}

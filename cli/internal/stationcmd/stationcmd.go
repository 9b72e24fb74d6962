// Package stationcmd implements `shindo station` (one station) and `shindo
// sim` (a simulated fleet from a registry file). Both measure 50 Hz ground
// motion every 500 ms and send signed packets on the primary and backup
// uplinks, and both report their uplinks on a local status endpoint.
package stationcmd

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"shindo.dev/cli/internal/fleet"
	"shindo.dev/cli/internal/uplink"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/logging"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/service"
)

// uplinkConfig is what a station and a fleet share.
type uplinkConfig struct {
	groundConfig
	Primary    string        `conf:"primary" help:"primary uplink (core TNN-1) UDP host:port"`
	Backup     string        `conf:"backup" help:"backup uplink (core TYO-1) UDP host:port; empty for none"`
	StatusAddr string        `conf:"status-addr" default:"127.0.0.1:0" help:"listen address of the local GET /status endpoint"`
	AckTimeout time.Duration `conf:"ack-timeout" default:"250ms" help:"how long a packet waits for its ack before the one retransmission"`
	Workers    int           `conf:"workers" default:"0" help:"measuring goroutines; 0 means one per CPU"`
	LogFormat  string        `conf:"log-format" default:"text" help:"log format: json or text"`
	LogLevel   string        `conf:"log-level" default:"info" help:"log level"`
}

func (c *uplinkConfig) validate() error {
	errs := []error{c.groundConfig.validate()}
	if c.Primary == "" {
		errs = append(errs, errors.New("primary is required"))
	}
	for name, addr := range map[string]string{"primary": c.Primary, "backup": c.Backup, "status-addr": c.StatusAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, addr))
		}
	}
	if c.AckTimeout <= 0 || c.AckTimeout >= 500*time.Millisecond {
		errs = append(errs, errors.New("ack-timeout must be between 0 and 500ms"))
	}
	if c.Workers < 0 {
		errs = append(errs, errors.New("workers must not be negative"))
	}
	return errors.Join(errs...)
}

type stationConfig struct {
	uplinkConfig
	ID     string  `conf:"id" help:"station ID as provisioned"`
	KeyHex string  `conf:"key-hex" secret:"true" help:"station signing key, hex"`
	KeyID  uint32  `conf:"key-id" default:"1" help:"ID of the signing key"`
	Lat    float64 `conf:"lat" default:"23.97" help:"station latitude (ground-motion simulation)"`
	Lon    float64 `conf:"lon" default:"121.6" help:"station longitude (ground-motion simulation)"`
}

func (c *stationConfig) Validate() error {
	errs := []error{c.validate()}
	if c.ID == "" {
		errs = append(errs, errors.New("id is required"))
	}
	if k, err := hex.DecodeString(c.KeyHex); err != nil || len(k) < 16 {
		errs = append(errs, errors.New("key-hex must be at least 16 bytes of hex"))
	}
	return errors.Join(errs...)
}

type simConfig struct {
	uplinkConfig
	StationsFile string `conf:"stations-file" help:"registry JSON of the stations to simulate (as shindo dev writes it)"`
	Count        int    `conf:"stations" default:"0" help:"simulate only the first N stations of the file; 0 means all"`
}

func (c *simConfig) Validate() error {
	errs := []error{c.validate()}
	if c.StationsFile == "" {
		errs = append(errs, errors.New("stations-file is required"))
	}
	if c.Count < 0 {
		errs = append(errs, errors.New("stations must not be negative"))
	}
	return errors.Join(errs...)
}

// StationMain runs `shindo station`.
func StationMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg stationConfig
	if err := conf.Load(&cfg, "STATION", args, conf.Options{Name: "shindo station", Help: stdout}); err != nil {
		return service.ExitCode(stderr, "shindo station", err)
	}
	key, _ := hex.DecodeString(cfg.KeyHex)
	st := fleet.Station{ID: cfg.ID, Key: key, KeyID: cfg.KeyID, Lat: cfg.Lat, Lon: cfg.Lon}
	return service.ExitCode(stderr, "shindo station", run(ctx, cfg.uplinkConfig, []fleet.Station{st}, stderr))
}

// SimMain runs `shindo sim`.
func SimMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg simConfig
	if err := conf.Load(&cfg, "SIM", args, conf.Options{Name: "shindo sim", Help: stdout}); err != nil {
		return service.ExitCode(stderr, "shindo sim", err)
	}
	stations, err := loadStations(cfg.StationsFile, cfg.Count)
	if err != nil {
		return service.ExitCode(stderr, "shindo sim", err)
	}
	return service.ExitCode(stderr, "shindo sim", run(ctx, cfg.uplinkConfig, stations, stderr))
}

func loadStations(path string, count int) ([]fleet.Station, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stations file: %w", err)
	}
	set, err := registry.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("stations file %s: %w", path, err)
	}
	var out []fleet.Station
	for _, s := range set.All() {
		if count > 0 && len(out) == count {
			break
		}
		key, _ := s.Key(s.KeyID)
		out = append(out, fleet.Station{ID: s.ID, Key: key, KeyID: s.KeyID, Lat: s.Lat, Lon: s.Lon})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("stations file %s lists no stations", path)
	}
	return out, nil
}

func run(ctx context.Context, cfg uplinkConfig, stations []fleet.Station, stderr io.Writer) error {
	log, err := logging.New(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return &conf.UsageError{Err: err}
	}
	var uplinks []*uplink.Uplink
	for _, u := range []struct{ name, addr string }{{"primary", cfg.Primary}, {"backup", cfg.Backup}} {
		if u.addr == "" {
			continue
		}
		up, err := uplink.Dial(u.name, u.addr, cfg.AckTimeout)
		if err != nil {
			return err
		}
		defer up.Close()
		uplinks = append(uplinks, up)
	}
	ln, err := net.Listen("tcp", cfg.StatusAddr)
	if err != nil {
		return fmt.Errorf("status listener: %w", err)
	}
	srv := &http.Server{Handler: statusHandler(len(stations), uplinks), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	log.Info("status endpoint", slog.String("url", "http://"+ln.Addr().String()+"/status"))

	ground, err := cfg.grounds(time.Now())
	if err != nil {
		return err
	}
	if cfg.Scenario != "" {
		log.Info("scenario scheduled", slog.String("scenario", cfg.Scenario), slog.Duration("in", cfg.ScenarioIn))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(uplinks)+1)
	for _, up := range uplinks {
		go func() { errs <- up.Run(ctx) }()
	}
	go func() {
		errs <- fleet.Run(ctx, fleet.Options{
			Stations: stations, Uplinks: uplinks, Ground: ground, Workers: cfg.Workers, Log: log,
		})
	}()
	err = <-errs
	cancel()
	return err
}

// uplinkStatus is one entry of GET /status.
type uplinkStatus struct {
	Name          string  `json:"name"`
	Transport     string  `json:"transport"`
	SRTTMillis    float64 `json:"srtt_ms"`
	Sent          uint64  `json:"sent"`
	Acked         uint64  `json:"acked"`
	Retransmitted uint64  `json:"retransmitted"`
	Lost          uint64  `json:"lost"`
	BadAcks       uint64  `json:"bad_acks"`
}

func statusHandler(stations int, uplinks []*uplink.Uplink) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		doc := struct {
			Stations int            `json:"stations"`
			Uplinks  []uplinkStatus `json:"uplinks"`
		}{Stations: stations, Uplinks: []uplinkStatus{}}
		for _, u := range uplinks {
			s := u.Stats()
			doc.Uplinks = append(doc.Uplinks, uplinkStatus{
				Name: u.Name, Transport: "udp", SRTTMillis: s.SRTTMillis, Sent: s.Sent, Acked: s.Acked,
				Retransmitted: s.Retransmitted, Lost: s.Lost, BadAcks: s.BadAcks,
			})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	return mux
}

// Package stationcmd implements `shindo station` (one station) and `shindo
// sim` (a simulated fleet from a registry file). Both measure 50 Hz ground
// motion every 500 ms and send signed packets on the primary and backup
// uplinks, and both report their uplinks on a local status endpoint.
package stationcmd

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"shindo.dev/cli/internal/fleet"
	"shindo.dev/lib/conf"
	"shindo.dev/lib/logging"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/service"
	"shindo.dev/lib/timesync"
	"shindo.dev/sdk/trust"
	"shindo.dev/sdk/uplink"
)

// uplinkConfig is what a station and a fleet share.
type uplinkConfig struct {
	groundConfig
	Primary       string        `conf:"primary" help:"primary uplink (core TNN-1) UDP host:port"`
	PrimaryWS     string        `conf:"primary-ws" help:"primary uplink WebSocket URL (ws://host:port/v1/station/ws); empty: no fallback"`
	Backup        string        `conf:"backup" help:"backup uplink (core TYO-1) UDP host:port; empty for none"`
	BackupWS      string        `conf:"backup-ws" help:"backup uplink WebSocket URL; empty: no fallback"`
	StatusAddr    string        `conf:"status-addr" default:"127.0.0.1:0" help:"listen address of the local GET /status and /metrics endpoint"`
	AckTimeout    time.Duration `conf:"ack-timeout" default:"250ms" help:"how long a packet waits for its ack before the one retransmission"`
	TimeoutsToWS  int           `conf:"timeouts-to-ws" default:"4" help:"consecutive ack timeouts before an uplink switches to WebSocket"`
	ProbeInterval time.Duration `conf:"probe-interval" default:"5s" help:"UDP probe period while an uplink is on WebSocket"`
	ProbesToUDP   int           `conf:"probes-to-udp" default:"3" help:"consecutive acked probes before an uplink returns to UDP"`
	TimeURLs      []string      `conf:"time-url" help:"time-sync endpoints of the edges (http://edge/ntp), comma-separated; empty: trust the host clock"`
	TimeInterval  time.Duration `conf:"time-interval" default:"60s" help:"how often to sync the clock"`
	CAFile        string        `conf:"ca-file" help:"CA certificates (PEM) a wss:// uplink's and an https:// time-url's server must chain to; empty: the system's, unless tls-pin"`
	TLSPin        string        `conf:"tls-pin" help:"SHA-256 pins of the servers' public keys (sha256//BASE64, comma-separated: the keys before and after a rotation); with no ca-file the pin alone is trusted"`
	Workers       int           `conf:"workers" default:"0" help:"measuring goroutines; 0 means one per CPU"`
	LogFormat     string        `conf:"log-format" default:"text" help:"log format: json or text"`
	LogLevel      string        `conf:"log-level" default:"info" help:"log level"`
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
	if c.TimeoutsToWS < 1 || c.ProbesToUDP < 1 || c.ProbeInterval <= 0 || c.TimeInterval <= 0 {
		errs = append(errs, errors.New("timeouts-to-ws and probes-to-udp must be at least 1, probe-interval and time-interval positive"))
	}
	for name, u := range map[string]string{"primary-ws": c.PrimaryWS, "backup-ws": c.BackupWS} {
		if u != "" && !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			errs = append(errs, fmt.Errorf("%s %q: want a ws:// or wss:// URL", name, u))
		}
	}
	if c.BackupWS != "" && c.Backup == "" {
		errs = append(errs, errors.New("backup-ws needs backup"))
	}
	for _, u := range c.TimeURLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("time-url %q: want an http:// or https:// URL", u))
		}
	}
	if c.Workers < 0 {
		errs = append(errs, errors.New("workers must not be negative"))
	}
	if _, err := c.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tlsConfig is whom the station trusts: ca-file and tls-pin, or nil (the
// system's CAs) when neither is given.
func (c *uplinkConfig) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.TLSPin == "" {
		return nil, nil
	}
	cfg, err := trust.ClientConfig(c.CAFile, c.TLSPin)
	if err != nil {
		return nil, fmt.Errorf("ca-file, tls-pin: %w", err)
	}
	return cfg, nil
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

// timeClient asks the edges for the time, trusting what the uplinks do.
func timeClient(tlsCfg *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: tr}
}

func run(ctx context.Context, cfg uplinkConfig, stations []fleet.Station, stderr io.Writer) error {
	log, err := logging.New(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return &conf.UsageError{Err: err}
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return &conf.UsageError{Err: err}
	}
	var uplinks []*uplink.Uplink
	for _, u := range []struct{ name, udp, ws string }{{"primary", cfg.Primary, cfg.PrimaryWS}, {"backup", cfg.Backup, cfg.BackupWS}} {
		if u.udp == "" {
			continue
		}
		up, err := uplink.Dial(uplink.Config{
			Name: u.name, UDP: u.udp, WS: u.ws, AckTimeout: cfg.AckTimeout, TimeoutsToWS: cfg.TimeoutsToWS,
			ProbeInterval: cfg.ProbeInterval, ProbesToUDP: cfg.ProbesToUDP, TLS: tlsCfg,
		}, log)
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
	var clock timesync.Clock
	srv := &http.Server{Handler: statusHandler(len(stations), uplinks, &clock), ReadHeaderTimeout: 5 * time.Second}
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
	errs := make(chan error, len(uplinks)+2)
	for _, up := range uplinks {
		go func() { errs <- up.Run(ctx) }()
	}
	go func() {
		errs <- nilUntilDone(ctx, clock.Run(ctx, timeClient(tlsCfg), cfg.TimeURLs, cfg.TimeInterval, log))
	}()
	go func() {
		errs <- fleet.Run(ctx, fleet.Options{
			Stations: stations, Uplinks: uplinks, Ground: ground, Workers: cfg.Workers, Log: log, Now: clock.Now,
		})
	}()
	err = <-errs
	cancel()
	return err
}

// nilUntilDone turns a component that finished early without error (the
// clock with nothing to sync against) into one that waits for ctx.
func nilUntilDone(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// uplinkStatus is one entry of GET /status. For a fleet the counters are
// sums over its stations, transport is "mixed" while some stations are on
// each, and consecutive_timeouts and probes_ok are the largest of any
// station.
type uplinkStatus struct {
	Name                string  `json:"name"`
	Transport           string  `json:"transport"`
	SRTTMillis          float64 `json:"srtt_ms"`
	ConsecutiveTimeouts int     `json:"consecutive_timeouts"`
	Sent                uint64  `json:"sent"`
	Acked               uint64  `json:"acked"`
	Retransmitted       uint64  `json:"retransmitted"`
	ProbesOK            int     `json:"probes_ok"`
	Lost                uint64  `json:"lost"`
	BadAcks             uint64  `json:"bad_acks"`
	Probes              uint64  `json:"probes"`
	StationsOnWS        int     `json:"stations_on_ws"`
	SwitchesToWS        uint64  `json:"switches_to_ws"`
	SwitchesToUDP       uint64  `json:"switches_to_udp"`
}

func status(u *uplink.Uplink) uplinkStatus {
	s := u.Stats()
	return uplinkStatus{
		Name: u.Name(), Transport: s.Transport(), SRTTMillis: float64(s.SRTT.Microseconds()) / 1000,
		ConsecutiveTimeouts: s.ConsecutiveTimeouts, Sent: s.Sent, Acked: s.Acked, Retransmitted: s.Retransmitted,
		ProbesOK: s.ProbesOK, Lost: s.Lost, BadAcks: s.BadAcks, Probes: s.Probes, StationsOnWS: s.OnWS,
		SwitchesToWS: s.ToWS, SwitchesToUDP: s.ToUDP,
	}
}

func statusHandler(stations int, uplinks []*uplink.Uplink, clock *timesync.Clock) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(uplinkCollector(uplinks))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		offset, synced := clock.Offset()
		doc := struct {
			Stations      int            `json:"stations"`
			ClockOffsetMs float64        `json:"clock_offset_ms"`
			ClockSynced   bool           `json:"clock_synced"`
			Uplinks       []uplinkStatus `json:"uplinks"`
		}{Stations: stations, ClockOffsetMs: float64(offset.Microseconds()) / 1000, ClockSynced: synced, Uplinks: []uplinkStatus{}}
		for _, u := range uplinks {
			doc.Uplinks = append(doc.Uplinks, status(u))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	return mux
}

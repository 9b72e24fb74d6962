package chaoscmd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"shindo.dev/cli/internal/witness"
)

// witnessRun is the run's own stations, sending through the same uplinks
// as the fleet — impaired when an uplink is — so that every packet a core
// acknowledged is known and can be looked for in both archives.
type witnessRun struct {
	w *witness.Witness
}

func startWitness(ctx context.Context, topo *topology, stations int, log *slog.Logger) (*witnessRun, error) {
	cfg := witness.Config{
		DataAPI:    topo.field("TNN-1", "dataapi", "http"),
		AdminToken: topo.adminToken,
		Prefix:     fmt.Sprintf("WIT%04d", time.Now().Unix()%10000),
		Stations:   stations,
		Primary:    topo.field("TNN-1", "ingest", "udp"),
		PrimaryWS:  topo.field("TNN-1", "ingest", "ws"),
		Backup:     topo.field("TYO-1", "ingest", "udp"),
		BackupWS:   topo.field("TYO-1", "ingest", "ws"),
		Waveform:   map[string]string{},
		TLS:        topo.tls,
		GRPC:       topo.grpc,
		Log:        log,
	}
	// Through the fleet's uplinks when shindo dev routes them through
	// impairable links.
	if a := topo.linkAddr("uplink-TNN-1", "udp"); a != "" {
		cfg.Primary, cfg.PrimaryWS = a, topo.linkAddr("uplink-TNN-1", "ws")
	}
	if a := topo.linkAddr("uplink-TYO-1", "udp"); a != "" {
		cfg.Backup, cfg.BackupWS = a, topo.linkAddr("uplink-TYO-1", "ws")
	}
	for _, site := range coreSites {
		cfg.Waveform[site] = topo.field(site, "waveform", "grpc")
	}
	w, err := witness.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("witness stations: %w", err)
	}
	return &witnessRun{w: w}, nil
}

func (r *witnessRun) Stop() { r.w.Stop() }

func (r *witnessRun) Verify(ctx context.Context, settle time.Duration) witnessReport {
	return witnessReport{stats: r.w.Stats(), rep: r.w.Verify(ctx, settle)}
}

type witnessReport struct {
	stats witness.Stats
	rep   witness.Report
}

func (w witnessReport) summary() string {
	s := fmt.Sprintf("%d packets acknowledged of %d sent", w.rep.Acked, w.stats.Sent)
	for _, site := range coreSites {
		c := w.rep.Cores[site]
		s += fmt.Sprintf("; %s: %d checked", site, c.Checked)
	}
	return s
}

func (w witnessReport) violations() []string { return w.rep.Violations() }

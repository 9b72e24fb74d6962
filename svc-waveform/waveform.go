// Package waveform is svc-waveform: it receives a core's verified sample
// stream from svc-ingest and streams live chunks to subscribers. The 7-day
// archive behind it is the subject of the two-core issue; until then the
// service keeps no history.
package waveform

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/batchrecv"
	"shindo.dev/lib/fanout"
	"shindo.dev/lib/replay"
	"shindo.dev/lib/service"
)

// Name is the binary and service name.
const Name = "shindo-waveform"

// maxLiveStations bounds one Live request.
const maxLiveStations = 100

// frameMs is the length of a sensor frame, and seenFrames how many of a
// station's frames (17 minutes) are remembered to drop duplicates.
const (
	frameMs    = 500
	seenFrames = 2048
)

// liveBuffer is how many chunks a Live subscriber may fall behind before
// it is dropped: 16 s of one station.
const liveBuffer = 32

// Config is svc-waveform's configuration (env prefix SHINDO_WAVEFORM_).
type Config struct {
	service.Common
}

// DefaultConfig returns the configuration with svc-waveform's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7302", AdminAddr: ":7309"}}
}

// Validate checks the configuration.
func (c *Config) Validate() error { return c.ValidateCommon() }

// Run runs svc-waveform until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(_ context.Context, svc *service.Service) error {
		srv := newServer(svc.Stopping(), svc.Metrics())
		waveformv1.RegisterWaveformServiceServer(svc.GRPC(), srv)
		svc.SetServingStatus(waveformv1.WaveformService_ServiceDesc.ServiceName, true)
		return nil
	})
}

type server struct {
	waveformv1.UnimplementedWaveformServiceServer
	live     *fanout.Hub[*waveformv1.Chunk]
	stopping <-chan struct{}

	// seen remembers, per station, which 500 ms frames were published, so
	// resent batches and duplicate deliveries are skipped while frames
	// that arrive late or out of order still go out.
	seen *replay.Set

	chunks *prometheus.CounterVec
}

func newServer(stopping <-chan struct{}, reg prometheus.Registerer) *server {
	s := &server{
		stopping: stopping,
		live:     fanout.New[*waveformv1.Chunk](0),
		seen:     replay.NewSet(seenFrames),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_waveform_chunks_total", Help: "Sensor chunks received, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(s.chunks, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shindo_waveform_live_subscribers", Help: "Live stream subscribers.",
	}, func() float64 { n, _ := s.live.Stats(); return float64(n) }))
	return s
}

// Ingest takes batches from svc-ingest and acks each.
func (s *server) Ingest(stream waveformv1.WaveformService_IngestServer) error {
	return service.EndOnStop(s.stopping, func() error { return s.ingest(stream) })
}

func (s *server) ingest(stream waveformv1.WaveformService_IngestServer) error {
	return batchrecv.Serve(stream, s.apply,
		func(id uint64) *waveformv1.IngestResponse { return &waveformv1.IngestResponse{AckedBatchId: id} })
}

func (s *server) apply(rec *ingestv1.Record) {
	p := rec.GetPacket()
	f := p.GetSensor()
	if f == nil {
		return // intensity series join the archive later
	}
	if !s.isNew(p.GetStationId(), f.GetFirstSampleMs()) {
		s.chunks.WithLabelValues("duplicate").Inc()
		return
	}
	s.chunks.WithLabelValues("accepted").Inc()
	s.live.Publish(&waveformv1.Chunk{
		StationId: p.GetStationId(), FirstSampleMs: f.GetFirstSampleMs(), RateHz: f.GetRateHz(),
		ScaleGal: f.GetScaleGal(), Ns: f.GetNs(), Ew: f.GetEw(), Ud: f.GetUd(),
	})
}

func (s *server) isNew(station string, first int64) bool {
	if first <= 0 {
		return false
	}
	return s.seen.For(station).Accept(uint64(first/frameMs)) == replay.New
}

// Live streams chunks of the requested stations.
func (s *server) Live(req *waveformv1.LiveRequest, stream waveformv1.WaveformService_LiveServer) error {
	ids := req.GetStationIds()
	if len(ids) == 0 || len(ids) > maxLiveStations {
		return status.Errorf(codes.InvalidArgument, "station_ids: give 1 to %d stations", maxLiveStations)
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	sub, _, _, _ := s.live.Subscribe(liveBuffer, func(c *waveformv1.Chunk) bool { return want[c.GetStationId()] })
	defer s.live.Unsubscribe(sub)
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-sub.Dropped:
			return status.Error(codes.ResourceExhausted, "subscriber fell behind")
		case <-s.stopping:
			return status.Error(codes.Unavailable, "server shutting down")
		case c := <-sub.C:
			if err := stream.Send(&waveformv1.LiveResponse{Chunk: c}); err != nil {
				return err
			}
		}
	}
}

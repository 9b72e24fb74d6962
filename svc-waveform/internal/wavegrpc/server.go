// Package wavegrpc is svc-waveform's gRPC surface: the Ingest stream from
// svc-ingest (acked once the archive has made each batch durable), Live
// chunks for subscribers, and Query and Export over the archive.
package wavegrpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/fanout"
	"shindo.dev/lib/service"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-waveform/internal/archive"
)

// maxLiveStations bounds one Live request.
const maxLiveStations = 100

// liveBuffer is how many chunks a Live subscriber may fall behind before
// it is dropped: 16 s of one station.
const liveBuffer = 32

// ackWindow is how many batches of one stream may wait for their WAL sync
// while later ones are applied: the group commit then covers them all.
const ackWindow = 256

// Server implements waveformv1.WaveformServiceServer.
type Server struct {
	waveformv1.UnimplementedWaveformServiceServer
	store    *archive.Store
	live     *fanout.Hub[*waveformv1.Chunk]
	stopping <-chan struct{}
	log      *slog.Logger
	// stored, when set, sees every record that brought new data, after
	// the archive took it (SeedLink's feed).
	stored func(*ingestv1.Record)

	chunks *prometheus.CounterVec
	// delay is receipt at an ingest → stored here (and handed to
	// SeedLink), for the frames that brought new data.
	delay prometheus.Histogram
}

// New returns a server over store. Streams end when stopping closes.
func New(store *archive.Store, stopping <-chan struct{}, reg prometheus.Registerer, log *slog.Logger) *Server {
	s := &Server{
		store:    store,
		stopping: stopping,
		live:     fanout.New[*waveformv1.Chunk](0),
		log:      log,
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_waveform_chunks_total", Help: "Sensor chunks received, by result (accepted, duplicate, expired, malformed).",
		}, []string{"result"}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shindo_waveform_store_delay_seconds",
			Help:    "From a frame's receipt at an ingest to its storing here and its hand-over to SeedLink, for the frames that brought new data (those filled in from the peer core later included).",
			Buckets: []float64{.002, .005, .01, .02, .03, .05, .075, .1, .15, .25, .5, 1, 2.5, 10},
		}),
	}
	reg.MustRegister(s.chunks, s.delay, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shindo_waveform_live_subscribers", Help: "Live stream subscribers.",
	}, func() float64 { n, _ := s.live.Stats(); return float64(n) }))
	return s
}

// OnStored makes fn see every record that brought new data to the
// archive, in the order of its batch, before the batch is acked. fn must
// not block.
func (s *Server) OnStored(fn func(*ingestv1.Record)) { s.stored = fn }

// LiveSubscribers is the number of open Live streams.
func (s *Server) LiveSubscribers() int {
	n, _ := s.live.Stats()
	return n
}

// Ingest takes batches from svc-ingest and acks each once it is durable.
func (s *Server) Ingest(stream waveformv1.WaveformService_IngestServer) error {
	return service.EndOnStop(s.stopping, func() error { return s.ingest(stream) })
}

type ack struct{ batch, lsn uint64 }

func (s *Server) ingest(stream waveformv1.WaveformService_IngestServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	// Batches are applied as they arrive; a second goroutine sends each
	// ack, in order, once the WAL holding the batch is synced, so one
	// fsync covers every batch that arrived meanwhile.
	acks := make(chan ack, ackWindow)
	ackDone := make(chan struct{})
	var ackErr error
	go func() {
		defer close(ackDone)
		for a := range acks {
			if err := s.store.WaitDurable(ctx, a.lsn); err != nil {
				ackErr = storeError(err)
				return
			}
			if err := stream.Send(&waveformv1.IngestResponse{AckedBatchId: a.batch}); err != nil {
				ackErr = err
				return
			}
		}
	}()
	finish := func(err error) error {
		close(acks)
		if err != nil {
			cancel()
		}
		<-ackDone
		if err == nil {
			err = ackErr
		}
		return err
	}
	var (
		frames []archive.Frame
		out    []archive.Outcome
	)
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				return finish(err)
			}
			if errors.Is(err, io.EOF) {
				return finish(nil)
			}
			return finish(err)
		}
		frames = frames[:0]
		recs := req.GetRecords()
		for _, rec := range recs {
			if f, ok := toFrame(rec); ok {
				frames = append(frames, f)
			}
		}
		out = append(out[:0], make([]archive.Outcome, len(frames))...)
		lsn, err := s.store.Apply(frames, out)
		if err != nil {
			return finish(storeError(err))
		}
		s.publish(recs, out)
		select {
		case acks <- ack{req.GetBatchId(), lsn}:
		case <-ackDone:
			return finish(nil)
		}
	}
}

// publish sends the sensor frames that brought new samples to Live
// subscribers, in the order of the batch; outcomes follow the frames that
// toFrame kept.
func (s *Server) publish(recs []*ingestv1.Record, out []archive.Outcome) {
	now := time.Now()
	i := 0
	for _, rec := range recs {
		p := rec.GetPacket()
		if p.GetSensor() == nil && p.GetIntensity() == nil {
			continue
		}
		o := out[i]
		i++
		if o == archive.Stored {
			s.delay.Observe(max(0, float64(now.UnixMilli()-rec.GetRecvAtMs())/1000))
			if s.stored != nil {
				s.stored(rec)
			}
		}
		f := p.GetSensor()
		if f == nil {
			continue
		}
		s.chunks.WithLabelValues(chunkResult[o]).Inc()
		if o != archive.Stored {
			continue
		}
		s.live.Publish(&waveformv1.Chunk{
			StationId: p.GetStationId(), FirstSampleMs: f.GetFirstSampleMs(), RateHz: f.GetRateHz(),
			ScaleGal: f.GetScaleGal(), Ns: f.GetNs(), Ew: f.GetEw(), Ud: f.GetUd(),
		})
	}
}

var chunkResult = map[archive.Outcome]string{
	archive.Stored: "accepted", archive.Duplicate: "duplicate", archive.Expired: "expired", archive.Malformed: "malformed",
}

// toFrame maps a record to the archive's frame; the sample slices are
// shared, not copied.
func toFrame(rec *ingestv1.Record) (archive.Frame, bool) {
	p := rec.GetPacket()
	seed := seedcode.Codes{Network: rec.GetNetworkCode(), Station: rec.GetStationCode(), Location: rec.GetLocationCode()}
	if f := p.GetSensor(); f != nil {
		return archive.Frame{
			Station: p.GetStationId(), SEED: seed, TimeMs: f.GetFirstSampleMs(), RateHz: f.GetRateHz(), ScaleGal: f.GetScaleGal(),
			NS: f.GetNs(), EW: f.GetEw(), UD: f.GetUd(),
		}, true
	}
	if f := p.GetIntensity(); f != nil {
		return archive.Frame{
			Station: p.GetStationId(), SEED: seed, Intensity: true, TimeMs: f.GetWindowEndMs(),
			Values: [3]float32{f.GetIntensity(), f.GetPgaGal(), f.GetPgvCms()},
		}, true
	}
	return archive.Frame{}, false
}

// storeError turns an archive failure into the status a client sees; the
// detail is in the server's log.
func storeError(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, archive.ErrUnknownStation):
		return status.Error(codes.NotFound, "no data for this station")
	case errors.Is(err, archive.ErrWindow), errors.Is(err, archive.ErrChannel):
		return status.Error(codes.InvalidArgument, err.Error())
	default:
		return status.Error(codes.Unavailable, "archive unavailable")
	}
}

// Live streams chunks of the requested stations.
func (s *Server) Live(req *waveformv1.LiveRequest, stream waveformv1.WaveformService_LiveServer) error {
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

// Query returns archived samples of one station.
func (s *Server) Query(_ context.Context, req *waveformv1.QueryRequest) (*waveformv1.QueryResponse, error) {
	if req.GetStationId() == "" {
		return nil, status.Error(codes.InvalidArgument, "station_id is required")
	}
	res, err := s.store.Query(req.GetStationId(), req.GetStartMs(), req.GetEndMs(), req.GetWithIntensity())
	if err != nil {
		s.logFailure("query failed", req.GetStationId(), err)
		return nil, storeError(err)
	}
	resp := &waveformv1.QueryResponse{NetworkCode: res.Network, StationCode: res.Station, LocationCode: res.Location}
	for _, c := range res.Chunks {
		resp.Chunks = append(resp.Chunks, &waveformv1.Chunk{
			StationId: req.GetStationId(), FirstSampleMs: c.FirstMs, RateHz: 50, ScaleGal: res.ScaleGal,
			Ns: c.NS, Ew: c.EW, Ud: c.UD,
		})
	}
	for _, in := range res.Intensity {
		resp.Intensity = append(resp.Intensity, &waveformv1.IntensitySample{
			WindowEndMs: in.WindowEndMs, Intensity: in.Intensity, PgaGal: in.PGA, PgvCms: in.PGV,
		})
	}
	return resp, nil
}

// Export streams archived samples of one station as miniSEED, the station's
// SEED codes in the first response.
func (s *Server) Export(req *waveformv1.ExportRequest, stream waveformv1.WaveformService_ExportServer) error {
	if req.GetStationId() == "" {
		return status.Error(codes.InvalidArgument, "station_id is required")
	}
	// The station first, then the window: a client asking for a station the
	// archive never saw learns that, whatever window it gave.
	names, ok := s.store.Names(req.GetStationId())
	if !ok {
		return storeError(archive.ErrUnknownStation)
	}
	chans, err := archive.ExportChannels(req.GetChannels(), req.GetWithIntensity())
	if err != nil {
		return storeError(err)
	}
	first := true
	_, err = s.store.ExportParts(req.GetStationId(), req.GetStartMs(), req.GetEndMs(), chans, req.GetFileSpans(), func(p archive.Part) error {
		resp := &waveformv1.ExportResponse{Data: p.Data}
		if p.Length > 0 {
			resp.Span = &waveformv1.FileSpan{Path: filepath.ToSlash(p.Path), Offset: p.Offset, Length: p.Length}
		}
		if first {
			// The codes name the file a client saves before it reads a record.
			resp.NetworkCode, resp.StationCode, resp.LocationCode = names.Network, names.Station, names.Location
			first = false
		}
		return stream.Send(resp)
	})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return err // from Send
		}
		s.logFailure("export failed", req.GetStationId(), err)
		return storeError(err)
	}
	return nil
}

// logFailure logs errors that are not the client's.
func (s *Server) logFailure(msg, station string, err error) {
	if errors.Is(err, archive.ErrUnknownStation) || errors.Is(err, archive.ErrWindow) {
		return
	}
	s.log.Error(msg, slog.String("station", station), slog.Any("error", err))
}

// MaxAvailabilityStations and MaxAvailabilitySpans bound one Availability
// call.
const (
	MaxAvailabilityStations = 1000
	MaxAvailabilitySpans    = 1_000_000
)

// Availability lists the stretches without a gap that the archive holds of
// the stations' channels in a window, from its index.
func (s *Server) Availability(_ context.Context, req *waveformv1.AvailabilityRequest) (*waveformv1.AvailabilityResponse, error) {
	if n := len(req.GetStationIds()); n == 0 || n > MaxAvailabilityStations {
		return nil, status.Errorf(codes.InvalidArgument, "give 1 to %d station_ids, not %d", MaxAvailabilityStations, n)
	}
	chans, err := archive.ExportChannels(req.GetChannels(), true)
	if err != nil {
		return nil, storeError(err)
	}
	budget := MaxAvailabilitySpans
	resp := &waveformv1.AvailabilityResponse{}
	for _, id := range req.GetStationIds() {
		seed, spans, err := s.store.Availability(id, chans, req.GetStartMs(), req.GetEndMs(), &budget)
		switch {
		case errors.Is(err, archive.ErrUnknownStation):
			continue
		case errors.Is(err, archive.ErrTooManySpans):
			return nil, status.Errorf(codes.ResourceExhausted, "more than %d spans: narrow the window or the stations", MaxAvailabilitySpans)
		case err != nil:
			return nil, storeError(err)
		}
		for _, c := range spans {
			ca := &waveformv1.ChannelAvailability{StationId: id, NetworkCode: seed.Network, StationCode: seed.Station,
				LocationCode: seed.Location, ChannelCode: c.Channel, SampleRateHz: c.RateHz}
			for _, sp := range c.Spans {
				ca.Spans = append(ca.Spans, &waveformv1.TimeSpan{StartMs: sp.StartMs, EndMs: sp.EndMs})
			}
			resp.Channels = append(resp.Channels, ca)
		}
	}
	return resp, nil
}

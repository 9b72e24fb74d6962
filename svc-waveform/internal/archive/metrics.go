package archive

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	frames            *prometheus.CounterVec
	byOutcome         [2][len(outcomeNames)]prometheus.Counter // [intensity][outcome]
	stations          prometheus.Counter
	namingConflicts   prometheus.Counter
	rescaled          prometheus.Counter
	samplesCut        prometheus.Counter
	records           prometheus.Counter
	syncs             prometheus.Counter
	syncSeconds       prometheus.Histogram
	walBytes          prometheus.Counter
	checkpoints       prometheus.Counter
	checkpointSeconds prometheus.Histogram
	expiredFiles      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_frames_total", Help: "Frames offered to the archive, by kind (sensor, intensity) and result (stored, duplicate, expired, malformed).",
		}, []string{"kind", "result"}),
		stations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_new_stations_total", Help: "Stations seen for the first time (given SEED codes).",
		}),
		namingConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_naming_conflicts_total",
			Help: "Stations whose registry SEED codes the archive could not use: archived under other codes before, or codes another station's files carry.",
		}),
		rescaled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_rescaled_frames_total", Help: "Sensor frames converted to their station's first count size.",
		}),
		samplesCut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_record_samples_total", Help: "Samples written into miniSEED records.",
		}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_records_total", Help: "miniSEED records written.",
		}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_wal_syncs_total", Help: "WAL fsyncs (group commits).",
		}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shindo_waveform_archive_wal_sync_seconds", Help: "Time to write and fsync one group commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		walBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_wal_bytes_total", Help: "Bytes appended to the WAL.",
		}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_checkpoints_total", Help: "Checkpoints taken.",
		}),
		checkpointSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shindo_waveform_archive_checkpoint_seconds", Help: "Time of one checkpoint (sync of the archive included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		expiredFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_waveform_archive_expired_files_total", Help: "Day files removed by the retention.",
		}),
	}
	for i, kind := range []string{"sensor", "intensity"} {
		for o, name := range outcomeNames {
			m.byOutcome[i][o] = m.frames.WithLabelValues(kind, name)
		}
	}
	if reg != nil {
		reg.MustRegister(m.frames, m.stations, m.namingConflicts, m.rescaled, m.samplesCut, m.records, m.syncs, m.syncSeconds,
			m.walBytes, m.checkpoints, m.checkpointSeconds, m.expiredFiles)
	}
	return m
}

// syncCount reads the fsync counter (for benchmarks).
func (m *metrics) syncCount() float64 {
	var pb dto.Metric
	if err := m.syncs.Write(&pb); err != nil {
		return 0
	}
	return pb.GetCounter().GetValue()
}

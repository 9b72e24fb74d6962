package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/atomicfile"
	"shindo.dev/svc-ingest/internal/checkpoint"
	"shindo.dev/svc-ingest/internal/journal"
	"shindo.dev/svc-ingest/internal/peersync"
	"shindo.dev/svc-ingest/internal/verify"
)

// checkpointName is the checkpoint's file in the journal's directory.
const checkpointName = "checkpoint.bin"

// checkpointEvery is how often the windows and the index are saved: a
// restart after a crash reads back at most this much of the journal (at
// 1,000 stations some 40,000 records, a few milliseconds).
const checkpointEvery = 10 * time.Second

// checkpointer saves the replay windows and the sync's index with the
// journal index they cover, and gives them back after a restart.
type checkpointer struct {
	path    string
	journal *journal.Journal
	gate    *verify.Gate
	syncer  *peersync.Syncer // nil without a sync
	guard   *checkpoint.Guard
	log     *slog.Logger
	saved   prometheus.Counter
	failed  prometheus.Counter
	// took is how long each snapshot took: the batches in flight synced
	// and in the windows, then the copy. Stations' packets go on
	// meanwhile; the peer sync's recording waits.
	took prometheus.Histogram
}

func newCheckpointer(dir string, j *journal.Journal, gate *verify.Gate, syncer *peersync.Syncer, guard *checkpoint.Guard,
	reg prometheus.Registerer, log *slog.Logger) *checkpointer {
	c := &checkpointer{path: filepath.Join(dir, checkpointName), journal: j, gate: gate, syncer: syncer, guard: guard, log: log,
		saved:  prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_ingest_checkpoints_total", Help: "Checkpoints of the replay windows and the sync's index written."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "shindo_ingest_checkpoint_failures_total", Help: "Checkpoints that could not be written (a restart then reads more of the journal back)."}),
	}
	c.took = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shindo_ingest_checkpoint_snapshot_seconds",
		Help:    "How long each checkpoint's snapshot took: the batches in flight synced and in the windows, then the copy (stations' packets go on meanwhile).",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25}})
	reg.MustRegister(c.saved, c.failed, c.took)
	return c
}

// Run saves a checkpoint every checkpointEvery until ctx ends. The last
// one, at shutdown, is saved by Save once the listeners have stopped.
func (c *checkpointer) Run(ctx context.Context) error {
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.Save(); err != nil {
				c.log.WarnContext(ctx, "checkpoint not written", slog.Any("error", err))
			}
		}
	}
}

// Save writes a checkpoint. The windows and the index are copied once
// every batch that was between the journal and them when the journal's end
// was read has left (checkpoint.Guard), so they hold every record below the
// journal index taken with them.
func (c *checkpointer) Save() error {
	s := c.snapshot()
	if s.Next > 0 {
		mark, err := c.mark(s.Next - 1)
		if err != nil {
			c.failed.Inc()
			return err
		}
		s.Mark = mark
	}
	if err := atomicfile.Write(c.path, checkpoint.Encode(s), 0o600); err != nil {
		c.failed.Inc()
		return fmt.Errorf("checkpoint: %w", err)
	}
	c.saved.Inc()
	return nil
}

// snapshot copies the windows and the index with the journal index they
// cover.
func (c *checkpointer) snapshot() checkpoint.State {
	var s checkpoint.State
	start := time.Now()
	defer func() { c.took.Observe(time.Since(start).Seconds()) }()
	c.guard.Quiesce(func() { s.Next = c.journal.Next() }, func() {
		s.Windows = c.gate.Windows()
		if c.syncer != nil {
			s.Index, s.Slots = c.syncer.Index()
		}
	})
	s.Words = c.gate.WindowWords()
	return s
}

// mark is the checksum of record index's payload.
func (c *checkpointer) mark(index uint64) (uint32, error) {
	es, err := c.journal.Read(index, 1)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: read record %d: %w", index, err)
	}
	if len(es) == 0 || es[0].Index != index || es[0].Payload == nil {
		return 0, fmt.Errorf("checkpoint: record %d is not in the journal", index)
	}
	return checkpoint.Sum(es[0].Payload), nil
}

// Load restores the windows and the index from the checkpoint and returns
// the journal index to read on from. It returns false, having changed
// nothing, when there is no checkpoint or it does not fit this journal
// and configuration; the caller then reads the journal back as before.
func (c *checkpointer) Load() (uint64, bool) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	var next uint64
	if err == nil {
		next, err = c.restore(b)
	}
	if err != nil {
		c.log.Warn("checkpoint not used: the journal is read back instead", slog.String("path", c.path), slog.Any("error", err))
		return 0, false
	}
	return next, true
}

func (c *checkpointer) restore(b []byte) (uint64, error) {
	s, err := checkpoint.Decode(b)
	if err != nil {
		return 0, err
	}
	first, next := c.journal.First(), c.journal.Next()
	switch {
	case s.Next > next:
		return 0, fmt.Errorf("covers the journal up to %d, which ends at %d", s.Next, next)
	case s.Next == 0 && first > 0, s.Next > 0 && s.Next-1 < first:
		// What was trimmed since would not be read back.
		return 0, fmt.Errorf("covers the journal up to %d, which starts at %d now", s.Next, first)
	case s.Words != c.gate.WindowWords():
		return 0, fmt.Errorf("replay windows of %d seqs, configured %d", s.Words*64, c.gate.WindowWords()*64)
	case c.syncer != nil && s.Slots == 0:
		return 0, errors.New("written without the sync's index")
	}
	if s.Next > 0 {
		mark, err := c.mark(s.Next - 1)
		if err != nil {
			return 0, err
		}
		if mark != s.Mark {
			return 0, fmt.Errorf("record %d is not the one the checkpoint was taken after (another journal?)", s.Next-1)
		}
	}
	if c.syncer != nil {
		if err := c.syncer.RestoreIndex(s.Index, s.Slots); err != nil {
			return 0, err
		}
	}
	if err := c.gate.RestoreWindows(s.Windows); err != nil {
		if c.syncer != nil {
			_ = c.syncer.RestoreIndex(nil, s.Slots) // back to empty, as it was; the size was taken just above
		}
		return 0, err
	}
	return s.Next, nil
}

package archive

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// benchFleet builds the frames of stations stations for one 500 ms round
// at t0 (a sensor and an intensity frame each), in batches of batchSize
// records, as svc-ingest forwards them.
func benchFleet(stations int, t0 int64, batchSize int) [][]Frame {
	var out [][]Frame
	var cur []Frame
	for st := range stations {
		cur = append(cur, sensorFrame(st, t0), intensityFrame(st, t0+500))
		if len(cur) >= batchSize {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// BenchmarkArchiveWrite is the ingest path through the store: 10,000
// stations at 50 Hz, batches of 512 records (256 sensor frames of 75
// samples and 256 intensity frames), records cut and written as they
// fill, checkpoints every 10 s, after a warm-up of 125 s of data (the
// creation of 60,000 day files and their directories is not steady
// state).
//
// serial: each batch is applied, then waited for until its WAL entry is
// fsynced, before the next (one fsync per batch, the slowest case).
// pipelined: as svc-waveform's Ingest handler does with svc-ingest's
// window of 64 unacked batches: batches are applied as they come and acked
// as their fsync completes, so one group commit covers several.
func BenchmarkArchiveWrite(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchWrite(b, 1) })
	b.Run("pipelined", func(b *testing.B) { benchWrite(b, 64) })
}

func benchWrite(b *testing.B, window int) {
	const stations = 10_000
	s, err := Open(Options{Dir: b.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close(context.Background())
	}()
	// Pre-build rounds of frames: generating them is not the store's work.
	t0 := time.Now().Add(-time.Hour).UnixMilli() / 500 * 500
	const rounds = 20
	var batches [][]Frame
	for r := range rounds {
		batches = append(batches, benchFleet(stations, t0+int64(r)*500, 512)...)
	}
	out := make([]Outcome, 512)
	// Acks: up to window batches wait for their fsync while later ones
	// are applied.
	acks := make(chan uint64, window)
	acked := make(chan error, 1)
	go func() {
		for lsn := range acks {
			if err := s.WaitDurable(ctx, lsn); err != nil {
				acked <- err
				return
			}
		}
		acked <- nil
	}()
	i := 0
	nextBatch := func() []Frame {
		batch := batches[i%len(batches)]
		if i > 0 && i%len(batches) == 0 {
			// Next 10 s of data: shift the frames' times.
			for _, bb := range batches {
				for j := range bb {
					bb[j].TimeMs += rounds * 500
				}
			}
		}
		i++
		return batch
	}
	// Warm up with 125 s of data: every channel, the intensity series too,
	// has cut its first record, so its day file and directories exist, as
	// in a running archive; then the checkpoint writes what is pending.
	for range 25 * len(batches) / 2 {
		lsn, err := s.Apply(nextBatch(), out)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.WaitDurable(ctx, lsn); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	syncs0 := s.m.syncCount()
	samples := 0
	cpu0 := cpuTime()
	for b.Loop() {
		batch := nextBatch()
		lsn, err := s.Apply(batch, out)
		if err != nil {
			b.Fatal(err)
		}
		if window == 1 {
			if err := s.WaitDurable(ctx, lsn); err != nil {
				b.Fatal(err)
			}
		} else {
			acks <- lsn
		}
		for j, f := range batch {
			if out[j] != Stored {
				b.Fatalf("frame %d: %v", j, out[j])
			}
			samples += 3 * len(f.UD)
			if f.Intensity {
				samples += 3
			}
		}
	}
	close(acks)
	if err := <-acked; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
	// What one core can do, whatever the disk: samples per second of CPU
	// time the process spent (all goroutines: apply, WAL, records,
	// checkpoints).
	b.ReportMetric(float64(samples)/(cpuTime()-cpu0).Seconds(), "samples/cpu-s")
	b.ReportMetric((s.m.syncCount()-syncs0)/float64(b.N), "fsyncs/batch")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQuery10Minutes reads 10 minutes of one station (three axes and
// the intensity series) from day files of 15 minutes of 20 stations.
func BenchmarkQuery10Minutes(b *testing.B) {
	dir := b.TempDir()
	now := time.Now()
	s, err := Open(Options{Dir: dir, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	t0 := now.Add(-time.Hour).UnixMilli() / 500 * 500
	out := make([]Outcome, 4096)
	for r := range int64(1800) {
		frames := benchFleet(20, t0+r*500, 4096)[0]
		if _, err := s.Apply(frames, out); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	s, err = Open(Options{Dir: dir, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	from := t0 + 2*60*1000
	for b.Loop() {
		res, err := s.Query(stationID(7), from, from+10*60*1000, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Chunks) != 10 || len(res.Intensity) != 1200 {
			b.Fatalf("%d chunks, %d intensity frames", len(res.Chunks), len(res.Intensity))
		}
	}
}

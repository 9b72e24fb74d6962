// Package fleet runs stations: for each one it draws 50 Hz ground motion
// from a source, measures it every 500 ms with the station pipeline, and
// sends the signed intensity and sensor packets on every uplink at once.
// One station (`shindo station`) and a simulated fleet (`shindo sim`) are
// the same code.
//
// Frames end on the 500 ms grid of the Unix epoch, as the cores' ticks do,
// and each is sent as soon as its interval ends. Sequence numbers start at
// the start time in Unix ms and grow by one per packet (four a second), so
// a restarted station always continues above where it stopped.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"shindo.dev/cli/internal/uplink"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/stationwire"
	"shindo.dev/seismo/measure"
)

// Station is one station's identity.
type Station struct {
	ID       string
	Key      []byte
	KeyID    uint32
	Lat, Lon float64
}

// Ground produces a station's acceleration in gal: Fill writes the samples
// starting at firstMs (20 ms apart) into ns, ew and ud.
type Ground interface {
	Fill(firstMs int64, ns, ew, ud []float64)
}

// Options configure a fleet.
type Options struct {
	Stations []Station
	// Uplinks carry every packet, each on all of them (primary, backup).
	Uplinks []*uplink.Uplink
	// Ground returns the motion source of a station whose first sample is
	// at start.
	Ground func(st Station, start time.Time) Ground
	// Workers measure and send in parallel; 0 means one per CPU.
	Workers int
	// Now is the (time-synced) clock; time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
}

type member struct {
	st     Station
	ground Ground
	pipe   *measure.Pipeline
	seq    uint64
	ns     [measure.FrameSamples]float64
	ew     [measure.FrameSamples]float64
	ud     [measure.FrameSamples]float64
}

// Run sends every station's packets each 500 ms until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.NumCPU()
	}
	start := (opts.Now().UnixMilli()/measure.FrameMs + 1) * measure.FrameMs
	members := make([]*member, len(opts.Stations))
	for i, st := range opts.Stations {
		p, err := measure.New(measure.Config{StartMs: start})
		if err != nil {
			return fmt.Errorf("station %s: %w", st.ID, err)
		}
		for _, u := range opts.Uplinks {
			u.Register(st.ID, st.Key)
		}
		members[i] = &member{st: st, ground: opts.Ground(st, time.UnixMilli(start)), pipe: p, seq: uint64(start)}
	}
	opts.Log.Info("fleet running", slog.Int("stations", len(members)), slog.Int("uplinks", len(opts.Uplinks)))

	// A round hands every station to the workers once; the next round
	// starts only when it is done, so no station is stepped twice at once.
	work := make(chan *member)
	var round, wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() {
			for m := range work {
				m.step(opts)
				round.Done()
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	next := start + measure.FrameMs
	for {
		wait := time.Until(time.UnixMilli(next))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		round.Add(len(members))
		for _, m := range members {
			work <- m
		}
		round.Wait()
		next += measure.FrameMs
		if behind := opts.Now().UnixMilli() - next; behind > 0 {
			opts.Log.Warn("fleet falling behind real time", slog.Int64("behind_ms", behind))
		}
	}
}

// step measures one 500 ms interval of a station and sends its packets.
func (m *member) step(opts Options) {
	first := m.pipe.NextSampleMs()
	m.ground.Fill(first, m.ns[:], m.ew[:], m.ud[:])
	done := false
	for i := range m.ns {
		done = m.pipe.Add(m.ns[i], m.ew[i], m.ud[i])
	}
	if !done {
		return // cannot happen: a frame is exactly FrameSamples samples
	}
	in, sf := m.pipe.Intensity(), m.pipe.Sensor()
	// Intensity first: it is what the cores' ticks wait for.
	m.send(opts, &stationv1.Packet{Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
		WindowEndMs: in.WindowEndMs, Intensity: in.Intensity, PgaGal: in.PGAGal, PgvCms: in.PGVCms,
	}}})
	m.send(opts, &stationv1.Packet{Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{
		FirstSampleMs: sf.FirstSampleMs, RateHz: sf.RateHz, ScaleGal: sf.ScaleGal,
		Ns: sf.NS, Ew: sf.EW, Ud: sf.UD,
	}}})
}

// send numbers, stamps, signs and transmits p on every uplink.
func (m *member) send(opts Options, p *stationv1.Packet) {
	m.seq++
	p.StationId, p.Seq, p.SentAtMs = m.st.ID, m.seq, opts.Now().UnixMilli()
	inner, err := proto.Marshal(p)
	if err != nil {
		opts.Log.Error("packet not encoded", slog.String("station", m.st.ID), slog.Any("error", err))
		return
	}
	d, err := stationwire.SealBytes(m.st.Key, m.st.KeyID, inner)
	if err != nil {
		opts.Log.Error("packet not sealed", slog.String("station", m.st.ID), slog.Any("error", err))
		return
	}
	for _, u := range opts.Uplinks {
		if err := u.Send(m.st.ID, m.seq, d); err != nil {
			opts.Log.Debug("send failed", slog.String("uplink", u.Name), slog.Any("error", err))
		}
	}
}

// Package fleet runs stations: for each one it draws 50 Hz ground motion
// from a source, measures it every 500 ms with the station pipeline, and
// sends the signed intensity and sensor packets on every uplink at once.
// One station (`shindo station`) and a simulated fleet (`shindo sim`) are
// the same code.
//
// Frames end on the 500 ms grid of the Unix epoch, as the cores' ticks do,
// and each is sent the moment its interval ends. The ground motion is
// synthetic and so known ahead: each round is measured and signed Lead
// before its interval ends and only the sending waits for the boundary, so
// a fleet of thousands on one machine sends on time, as real stations each
// on its own hardware would, and latency measured through the network is
// not the simulator's own CPU time. Sequence numbers start at the start
// time in Unix ms and grow by one per packet (four a second), so a
// restarted station always continues above where it stopped.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/sdk/uplink"
	"shindo.dev/seismo/measure"
	"shindo.dev/seismo/pwave"
)

// Station is one station's identity.
type Station struct {
	ID       string
	Key      []byte
	KeyID    uint32
	Lat, Lon float64
}

// Ground produces a station's acceleration in gal: Fill writes the samples
// starting at firstMs (20 ms apart) into ns, ew and ud; Skip passes over
// samples the station lost.
type Ground interface {
	Fill(firstMs int64, ns, ew, ud []float64)
	Skip(samples int)
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
	// Lead is how long before an interval ends its frames are prepared;
	// 0 means 250 ms.
	Lead time.Duration
	// MaxBehind is how far behind real time the fleet may run before it
	// skips to the present, dropping the intervals it could not send in
	// time; 0 means 2 s. Frames sent later than that are stale to the
	// cores (and past 30 s refused), and sending them anyway only adds the
	// load that put the fleet behind: on a machine too busy for all its
	// stations the fleet would never catch up, and the cores would get
	// nothing current.
	MaxBehind time.Duration
	// Now is the (time-synced) clock; time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
}

type member struct {
	st     Station
	ground Ground
	pipe   *measure.Pipeline
	links  []*uplink.Link
	seq    atomic.Uint64
	ns     [measure.FrameSamples]float64
	ew     [measure.FrameSamples]float64
	ud     [measure.FrameSamples]float64
	outbox []outgoing // prepared datagrams of the current round
	sensor int        // where its sensor frames start (after the intensity frames)
}

type outgoing struct {
	link     *uplink.Link
	seq      uint64
	datagram []byte
}

// Run sends every station's packets each 500 ms until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.NumCPU()
	}
	if opts.Lead <= 0 {
		opts.Lead = 250 * time.Millisecond
	}
	if opts.MaxBehind <= 0 {
		opts.MaxBehind = 2 * time.Second
	}
	start := (opts.Now().UnixMilli()/measure.FrameMs + 1) * measure.FrameMs
	members := make([]*member, len(opts.Stations))
	for i, st := range opts.Stations {
		p, err := measure.New(measure.Config{StartMs: start})
		if err != nil {
			return fmt.Errorf("station %s: %w", st.ID, err)
		}
		m := &member{st: st, ground: opts.Ground(st, time.UnixMilli(start)), pipe: p}
		m.seq.Store(uint64(start))
		for _, u := range opts.Uplinks {
			m.links = append(m.links, u.Link(st.ID, st.Key, st.KeyID, func() uint64 { return m.seq.Add(1) }))
		}
		members[i] = m
	}
	opts.Log.Info("fleet running", slog.Int("stations", len(members)), slog.Int("uplinks", len(opts.Uplinks)))

	// A phase gives each worker its share of the stations and waits for
	// all, so no station is worked on twice at once. When sending, each
	// worker batches its datagrams per uplink into sendmmsg calls: first
	// every station's intensity frame, then the sensor frames. The cores'
	// ticks wait for the intensity frames alone; sent first, they are not
	// queued at the cores behind the larger sensor frames of the stations
	// before them.
	chunks := make([][]*member, opts.Workers)
	for i, m := range members {
		chunks[i%opts.Workers] = append(chunks[i%opts.Workers], m)
	}
	runPhase := func(send bool) {
		var wg sync.WaitGroup
		for _, chunk := range chunks {
			wg.Go(func() {
				if !send {
					for _, m := range chunk {
						m.prepare(opts)
					}
					return
				}
				batches := make(map[*uplink.Uplink]*uplink.Batch, len(opts.Uplinks))
				for _, u := range opts.Uplinks {
					batches[u] = u.NewBatch()
				}
				transmit(chunk, batches)
			})
		}
		wg.Wait()
	}
	sleepUntil := func(t time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(t)):
			return true
		}
	}
	next := start + measure.FrameMs
	for {
		end := time.UnixMilli(next)
		if !sleepUntil(end.Add(-opts.Lead)) {
			return nil
		}
		if late := opts.Now().Sub(end); late > opts.MaxBehind {
			// Skip to the interval that ends next, as stations whose CPU
			// starved would lose the stretch.
			to := (opts.Now().UnixMilli()/measure.FrameMs + 1) * measure.FrameMs
			for _, m := range members {
				if err := m.skip(to - measure.FrameMs); err != nil {
					return err
				}
			}
			skipped := (to - next) / measure.FrameMs
			opts.Log.Warn("fleet fell behind real time: intervals skipped", slog.Duration("late", late), slog.Int64("intervals", skipped))
			next = to
			continue
		}
		runPhase(false)
		if late := opts.Now().Sub(end); late > 0 {
			opts.Log.Warn("fleet falling behind real time", slog.Duration("late", late))
		}
		if !sleepUntil(end) {
			return nil
		}
		runPhase(true)
		next += measure.FrameMs
	}
}

// skip drops the station's samples up to atMs: its ground moves on, and
// its measurement starts again at rest from there, as a station's does
// after it lost a stretch of its stream.
func (m *member) skip(atMs int64) error {
	first := m.pipe.NextSampleMs()
	if atMs <= first {
		return nil
	}
	m.ground.Skip(int((atMs - first) / (1000 / measure.RateHz)))
	p, err := measure.New(measure.Config{StartMs: atMs})
	if err != nil {
		return fmt.Errorf("station %s: %w", m.st.ID, err)
	}
	m.pipe = p
	return nil
}

// prepare measures the station's interval ending at its next boundary and
// signs its packets, stamped with that boundary as their send time.
func (m *member) prepare(opts Options) {
	m.outbox, m.sensor = m.outbox[:0], 0
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
	sendAt := in.WindowEndMs
	m.seal(opts, sendAt, &stationv1.Packet{Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
		WindowEndMs: in.WindowEndMs, Intensity: in.Intensity, PgaGal: in.PGAGal, PgvCms: in.PGVCms, SvaCms: in.SvaCms,
		PWave: pWave(in.P),
	}}})
	m.sensor = len(m.outbox)
	m.seal(opts, sendAt, &stationv1.Packet{Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{
		FirstSampleMs: sf.FirstSampleMs, RateHz: sf.RateHz, ScaleGal: sf.ScaleGal,
		Ns: sf.NS, Ew: sf.EW, Ud: sf.UD,
	}}})
}

// seal numbers and stamps p, and signs one copy per uplink into the
// outbox: the copies differ only in the RTT each uplink reports.
func (m *member) seal(opts Options, sendAtMs int64, p *stationv1.Packet) {
	seq := m.seq.Add(1)
	p.StationId, p.Seq, p.SentAtMs = m.st.ID, seq, sendAtMs
	for _, l := range m.links {
		d, err := l.Seal(p)
		if err != nil {
			opts.Log.Error("packet not sealed", slog.String("station", m.st.ID), slog.Any("error", err))
			continue
		}
		m.outbox = append(m.outbox, outgoing{l, seq, d})
	}
}

// transmit sends the members' prepared packets, each on its uplink, UDP
// datagrams into that uplink's batch: every intensity frame, then every
// sensor frame.
func transmit(members []*member, batches map[*uplink.Uplink]*uplink.Batch) {
	send := func(out []outgoing) {
		for _, o := range out {
			o.link.TransmitVia(batches[o.link.Uplink()], o.seq, o.datagram)
		}
	}
	for _, m := range members {
		send(m.outbox[:m.sensor])
	}
	for _, m := range members {
		send(m.outbox[m.sensor:])
	}
	for _, b := range batches {
		b.Flush()
	}
}

// pWave is the wire form of a P-wave measurement; nil when there is no
// pick.
func pWave(m pwave.Measurement) *stationv1.PWave {
	if !m.Picked() {
		return nil
	}
	return &stationv1.PWave{OnsetMs: m.OnsetMs, WindowMs: uint32(m.WindowMs), PdCm: float32(m.PdCm), TaucS: float32(m.TauCS)}
}

// Package witness proves, after faults, the invariant a chaos run is about:
// every packet a core acknowledged is in both cores' waveform archives,
// exactly once, with the values sent.
//
// A Witness is a few stations of its own, provisioned through the data
// API, sending what a station sends — an intensity and a sensor packet per
// 500 ms, with probes while an uplink is on WebSocket — on both uplinks with
// sdk/uplink, the code of the real station and of the simulated fleet. It
// records every packet and which uplinks acked it. The samples of each frame
// are a function of the station and the frame's time (frames.go), so Verify
// checks an archive's answer sample by sample and tells a frame missing,
// stored twice (overlapping chunks, an intensity frame listed twice, a
// frame's samples found again at another time) or corrupt (other values,
// or data where nothing was sent) — and for a copy or a misplacement names
// the frame the samples belong to.
//
// A packet counts as acknowledged once either core acked it on either
// uplink: the cores forward to each other and backfill after an outage or a
// partition, so an acked frame must reach both archives whatever path it
// took.
//
// What Verify can see is what the archive's Query returns; the archive
// answers from a dense view of each channel (one value per sample time), so
// a record stored twice on disk with the same samples reads back as one. A
// duplicate shows when the answer itself repeats a sample (overlapping
// chunks), repeats an intensity frame, or when a frame's samples stand at a
// time they were not sent for.
package witness

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/sdk/uplink"
)

// Defaults of Config.
const (
	DefaultPrefix       = "WIT"
	DefaultStations     = 3
	DefaultReadyTimeout = 30 * time.Second
	DefaultDrainTimeout = 15 * time.Second
)

// Uplink names, the keys of Stats.Uplinks and of the acks in Report
// examples.
const (
	Primary = "primary"
	Backup  = "backup"
)

// Config describes a witness.
type Config struct {
	// DataAPI is the base URL of a core's data API (http://host:port)
	// through which the stations are provisioned, with AdminToken.
	DataAPI    string
	AdminToken string
	// Prefix starts the station IDs (<prefix>00001…); default "WIT".
	// A run reusing a prefix takes the stations over (provision.go).
	Prefix string
	// Stations is how many stations to run; default 3, at most 100.
	Stations int
	// The two uplinks as a station uses them: UDP host:port and WebSocket
	// URL of the primary (TNN-1) and the backup (TYO-1) ingest, or of the
	// (possibly impaired) paths to them.
	Primary, PrimaryWS, Backup, BackupWS string
	// TLS is whom a wss:// uplink's server and an https:// data API must
	// be (nil: the system's CAs), with the client certificate a data API
	// under mutual TLS asks for.
	TLS *tls.Config
	// Waveform maps each core's site name ("TNN-1", "TYO-1") to its
	// waveform gRPC address (host:port); Verify checks every one.
	Waveform map[string]string
	// GRPC is the transport to the waveform services: mutual TLS with an
	// operator's certificate under shindo dev -tls; nil: plain.
	GRPC credentials.TransportCredentials
	// ReadyTimeout bounds Start's wait for every station to be acked on
	// both uplinks; default 30 s.
	ReadyTimeout time.Duration
	// DrainTimeout bounds Stop's wait for the last packets' acks; default
	// 15 s.
	DrainTimeout time.Duration
	// Now is the station clock; time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
}

func (c *Config) defaults() {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Stations == 0 {
		c.Stations = DefaultStations
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataAPI == "" || c.AdminToken == "" {
		errs = append(errs, errors.New("witness: data API and admin token are required"))
	}
	if c.Primary == "" || c.Backup == "" {
		errs = append(errs, errors.New("witness: both uplinks' UDP addresses are required"))
	}
	if c.Stations < 1 || c.Stations > 100 {
		errs = append(errs, errors.New("witness: stations must be between 1 and 100"))
	}
	if len(c.Prefix) > 32 {
		errs = append(errs, errors.New("witness: prefix must be at most 32 characters"))
	}
	return errors.Join(errs...)
}

// kind is what a packet carries.
type kind uint8

const (
	sensor kind = iota
	intensity
)

func (k kind) String() string {
	if k == intensity {
		return "intensity"
	}
	return "sensor"
}

// packet is one packet the witness sent: its frame's time (first_sample_ms
// of a sensor frame, window_end_ms of an intensity frame) and the uplinks
// that acked it (bit i: uplink i).
type packet struct {
	kind    kind
	ms      int64
	ackedBy uint8
}

// station is one witness station and what it sent.
type station struct {
	id    string
	links []*uplink.Link
	seq   uint64 // last seq handed out; under Witness.mu
	bySeq map[uint64]*packet
	sent  []*packet // in send order
}

// Witness runs the stations; see the package doc.
type Witness struct {
	cfg      Config
	uplinks  []*uplink.Uplink
	stations []*station
	byID     map[string]*station
	start    time.Time

	cancel  context.CancelFunc
	sending sync.WaitGroup // the sender
	reading sync.WaitGroup // the uplinks' ack readers
	stop    sync.Once

	mu      sync.Mutex
	skipped int // rounds not sent because the sender fell too far behind
}

// Start provisions the stations and sends one intensity and one sensor
// packet per 500 ms per station on both uplinks until Stop or ctx ends. It
// returns once every station has been acked on both uplinks — the witness
// can prove nothing of a path it never got through — or fails after
// ReadyTimeout.
func Start(ctx context.Context, cfg Config) (*Witness, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	regs, err := provisionStations(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w := &Witness{cfg: cfg, byID: map[string]*station{}, start: cfg.Now()}
	for i, u := range []uplink.Config{
		{Name: Primary, UDP: cfg.Primary, WS: cfg.PrimaryWS, TLS: cfg.TLS},
		{Name: Backup, UDP: cfg.Backup, WS: cfg.BackupWS, TLS: cfg.TLS},
	} {
		u.OnAck = func(id string, seq uint64) { w.acked(i, id, seq) }
		up, err := uplink.Dial(u, cfg.Log)
		if err != nil {
			w.closeUplinks()
			return nil, fmt.Errorf("witness: %w", err)
		}
		w.uplinks = append(w.uplinks, up)
	}
	for _, up := range w.uplinks {
		w.reading.Go(func() {
			if err := up.Run(context.Background()); err != nil {
				cfg.Log.Error("witness uplink stopped", slog.String("uplink", up.Name()), slog.Any("error", err))
			}
		})
	}
	for _, r := range regs {
		if err := w.addStation(r); err != nil {
			w.closeUplinks()
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.sending.Go(func() { w.send(runCtx) })
	cfg.Log.Info("witness sending", slog.Int("stations", len(w.stations)), slog.String("first", w.stations[0].id))
	if err := w.waitReady(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func (w *Witness) addStation(r *registry.Station) error {
	key, err := hex.DecodeString(r.KeyHex)
	if err != nil {
		return fmt.Errorf("witness station %s: key: %w", r.ID, err)
	}
	st := &station{id: r.ID, bySeq: map[uint64]*packet{}}
	// Seqs start at the clock in ms, as the fleet's do, so a run always
	// continues above an earlier run of the same station.
	st.seq = uint64(w.start.UnixMilli())
	for _, up := range w.uplinks {
		st.links = append(st.links, up.Link(r.ID, key, r.KeyID, func() uint64 { return w.nextSeq(st) }))
	}
	w.stations = append(w.stations, st)
	w.byID[r.ID] = st
	return nil
}

func (w *Witness) nextSeq(st *station) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.seq++
	return st.seq
}

// acked records uplink i's ack of a station's seq (probes are not in
// bySeq).
func (w *Witness) acked(i int, id string, seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.byID[id]; st != nil {
		if p := st.bySeq[seq]; p != nil {
			p.ackedBy |= 1 << i
		}
	}
}

// maxCatchUp is how many missed rounds the sender still sends late (each
// frame within ingest's 30 s of its send time); older ones are skipped.
const maxCatchUp = 20

// send runs the rounds: at each 500 ms boundary of the epoch, every
// station's frames of the interval that just ended. A round the sender
// wakes late for is sent late, up to maxCatchUp rounds behind.
func (w *Witness) send(ctx context.Context) {
	next := (w.cfg.Now().UnixMilli()/frameMs + 1) * frameMs
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(time.Duration(next-w.cfg.Now().UnixMilli()) * time.Millisecond)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := w.cfg.Now().UnixMilli()
		if behind := (now-next)/frameMs + 1; behind > maxCatchUp {
			w.mu.Lock()
			w.skipped += int(behind - maxCatchUp)
			w.mu.Unlock()
			w.cfg.Log.Warn("witness fell behind, rounds skipped", slog.Int64("rounds", behind-maxCatchUp))
			next += (behind - maxCatchUp) * frameMs
		}
		for ; next <= now; next += frameMs {
			w.round(next, now)
		}
	}
}

// round sends every station's frames of the interval ending at endMs,
// stamped with the send time nowMs.
func (w *Witness) round(endMs, nowMs int64) {
	var wg sync.WaitGroup
	for _, st := range w.stations {
		ns, ew, ud := sensorSamples(st.id, endMs-frameMs)
		in, pga, pgv := intensityValues(st.id, endMs)
		bodies := []struct {
			p    *packet
			body *stationv1.Packet
		}{
			{&packet{kind: intensity, ms: endMs}, &stationv1.Packet{Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
				WindowEndMs: endMs, Intensity: in, PgaGal: pga, PgvCms: pgv}}}},
			{&packet{kind: sensor, ms: endMs - frameMs}, &stationv1.Packet{Body: &stationv1.Packet_Sensor{Sensor: &stationv1.SensorFrame{
				FirstSampleMs: endMs - frameMs, RateHz: rateHz, ScaleGal: scaleGal, Ns: ns, Ew: ew, Ud: ud}}}},
		}
		// Sealed and recorded before any is sent, so no ack can come
		// before its packet is known; each uplink then sends its copies
		// on its own, as a WebSocket write may take an ack timeout.
		type sealed struct {
			seq      uint64
			datagram []byte
		}
		perLink := make([][]sealed, len(st.links))
		for _, b := range bodies {
			w.mu.Lock()
			st.seq++
			seq := st.seq
			st.bySeq[seq] = b.p
			st.sent = append(st.sent, b.p)
			w.mu.Unlock()
			b.body.StationId, b.body.Seq, b.body.SentAtMs = st.id, seq, nowMs
			for i, l := range st.links {
				d, err := l.Seal(b.body)
				if err != nil {
					w.cfg.Log.Error("witness packet not sealed", slog.String("station", st.id), slog.Any("error", err))
					continue
				}
				perLink[i] = append(perLink[i], sealed{seq, d})
			}
		}
		for i, l := range st.links {
			wg.Go(func() {
				for _, s := range perLink[i] {
					l.Transmit(s.seq, s.datagram)
				}
			})
		}
	}
	wg.Wait()
}

// waitReady waits until every station has had a packet acked on every
// uplink.
func (w *Witness) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(w.cfg.ReadyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		waiting := w.notReady()
		if len(waiting) == 0 {
			w.cfg.Log.Info("witness acked on both uplinks", slog.Duration("after", time.Since(w.start).Round(time.Millisecond)))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("witness: not acked within %s: %v (stats %+v)", w.cfg.ReadyTimeout, waiting, w.Stats())
		}
		if time.Since(lastLog) >= 5*time.Second {
			w.cfg.Log.Info("witness waiting for its first acks", slog.Any("waiting", waiting))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// notReady lists "station on uplink" for every pair without an ack yet.
func (w *Witness) notReady() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, st := range w.stations {
		var by uint8
		for _, p := range st.sent {
			by |= p.ackedBy
		}
		for i, up := range w.uplinks {
			if by&(1<<i) == 0 {
				out = append(out, st.id+" on "+up.Name())
			}
		}
	}
	return out
}

// Stop stops sending and waits, at most DrainTimeout, until every packet
// is acked or given up on each uplink (two ack timeouts at most while the
// uplink is healthy), then closes the uplinks. It may be called more than
// once.
func (w *Witness) Stop() {
	w.stop.Do(func() {
		w.cancel()
		w.sending.Wait()
		deadline := time.Now().Add(w.cfg.DrainTimeout)
		lastLog := time.Now()
		for w.inFlight() > 0 && time.Now().Before(deadline) {
			if time.Since(lastLog) >= 2*time.Second {
				w.cfg.Log.Info("witness waiting for its last acks", slog.Int("in_flight", w.inFlight()))
				lastLog = time.Now()
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := w.inFlight(); n > 0 {
			w.cfg.Log.Warn("witness stopped with packets in flight", slog.Int("in_flight", n), slog.Duration("waited", w.cfg.DrainTimeout))
		}
		w.closeUplinks()
		w.cfg.Log.Info("witness stopped", slog.Any("stats", w.Stats()))
	})
}

func (w *Witness) closeUplinks() {
	for _, up := range w.uplinks {
		up.Close()
	}
	w.reading.Wait()
}

// inFlight counts packet copies an uplink neither got an ack for nor gave
// up on yet.
func (w *Witness) inFlight() int {
	n := 0
	for _, st := range w.stations {
		for _, l := range st.links {
			s := l.Stats()
			n += int(s.Sent - s.Acked - s.Lost)
		}
	}
	return n
}

// Stats count what the witness sent and what came of it.
type Stats struct {
	Stations []string
	// Sent is the packets sent (each on both uplinks), Acked those acked
	// on at least one, Unacked the others: awaiting an ack, or — once Stop
	// has returned — given up on both uplinks.
	Sent, Acked, Unacked int
	// Uplinks holds each uplink's share, by name (Primary, Backup).
	Uplinks map[string]UplinkStats
	// Skipped counts rounds not sent because the sender was held up for
	// more than ten seconds.
	Skipped int
}

// UplinkStats are one uplink's counts over the stations.
type UplinkStats struct {
	Acked         int    // packets this uplink got an ack for
	Retransmitted uint64 // second transmissions
	GivenUp       uint64 // packets unacked after their retransmission
	OnWS          int    // stations on WebSocket now
	ToWS, ToUDP   uint64 // transport switches
}

// Stats returns the counts so far.
func (w *Witness) Stats() Stats {
	s := Stats{Uplinks: map[string]UplinkStats{}}
	w.mu.Lock()
	acked := make([]int, len(w.uplinks))
	for _, st := range w.stations {
		s.Stations = append(s.Stations, st.id)
		for _, p := range st.sent {
			s.Sent++
			if p.ackedBy != 0 {
				s.Acked++
			}
			for i := range w.uplinks {
				if p.ackedBy&(1<<i) != 0 {
					acked[i]++
				}
			}
		}
	}
	s.Skipped = w.skipped
	w.mu.Unlock()
	s.Unacked = s.Sent - s.Acked
	for i, up := range w.uplinks {
		us := UplinkStats{Acked: acked[i]}
		for _, st := range w.stations {
			ls := st.links[i].Stats()
			us.Retransmitted += ls.Retransmitted
			us.GivenUp += ls.Lost
			us.OnWS += ls.OnWS
			us.ToWS += ls.ToWS
			us.ToUDP += ls.ToUDP
		}
		s.Uplinks[up.Name()] = us
	}
	return s
}

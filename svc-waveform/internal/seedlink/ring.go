package seedlink

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Frame is one station packet as the core merged it: three axes of 50 Hz
// counts from FirstMs (Sensor), or the intensity, PGA and PGV of the 500 ms
// ending at FirstMs.
type Frame struct {
	Station string // the station's ID
	Sensor  bool
	FirstMs int64 // sensor: first sample; intensity: window end
	UD      []int32
	NS      []int32
	EW      []int32
	Values  [3]float32
}

// A record's sequence number is derived from its data, so both cores, and
// the archive, number the same record alike: the 50 Hz sample index of its
// first sample (for the intensity channels, of the start of its 500 ms
// window) times 8, plus the channel's slot. The intensity channels come
// first in a window, as stations send a window's intensity before its
// samples: numbers then grow in the order records are sent.
const (
	sampleMs     = 20
	slotsPerTick = 8
	intensityMs  = 500
)

// slot is the channel's place among a sample index's numbers, by its index
// in streams (BNZ, BNN, BNE, MXI, MXA, MXV).
func slot(stream int) uint64 {
	if stream < 3 {
		return uint64(3 + stream)
	}
	return uint64(stream - 3)
}

// seqAt is the number of a record of stream whose first sample (window
// start, for intensity) is at ms.
func seqAt(ms int64, stream int) uint64 {
	return uint64(ms/sampleMs)*slotsPerTick + slot(stream)
}

// timeOf is the time of the sample index a number belongs to.
func timeOf(seq uint64) int64 { return int64(seq/slotsPerTick) * sampleMs }

// entry is a frame kept in a station's ring.
type entry struct {
	Frame
	first, last uint64 // lowest and highest number of its records
	// enc are its records of every channel, miniSEED 2 and 3, each
	// encoded once for all the clients that take it live (nil until the
	// first needs it, and again once it is older than cacheMs: a client
	// resuming from further back encodes its own).
	enc [2]atomic.Pointer[[]record]
}

// cacheMs is how long an entry keeps its encoded records.
const cacheMs = 10_000

// encoded returns e's records of every channel in a format, encoding
// them once.
func (e *entry) encoded(key StationKey, format byte) ([]record, error) {
	c := &e.enc[0]
	if format == mseed3 {
		c = &e.enc[1]
	}
	if p := c.Load(); p != nil {
		return *p, nil
	}
	recs, err := records(key, e, func(Stream) bool { return true }, 0, format)
	if err != nil {
		return recs, err
	}
	c.Store(&recs)
	return recs, nil
}

func newEntry(f Frame) (*entry, bool) {
	e := &entry{Frame: f}
	switch {
	case f.Sensor && f.FirstMs > 0 && f.FirstMs%sampleMs == 0 && len(f.UD) > 0 && len(f.NS) == len(f.UD) && len(f.EW) == len(f.UD):
		e.first = seqAt(f.FirstMs, 0)
		e.last = seqAt(f.FirstMs+int64(len(f.UD)-1)*sampleMs, 2)
	case !f.Sensor && f.FirstMs > intensityMs && f.FirstMs%intensityMs == 0:
		e.first, e.last = seqAt(f.FirstMs-intensityMs, 3), seqAt(f.FirstMs-intensityMs, 5)
	default:
		return nil, false
	}
	return e, true
}

// station is one station's ring and the subscriptions that want it.
type station struct {
	key     StationKey
	id      string   // the station's ID, which the archive knows it by
	entries []*entry // arrival order
	cold    int      // entries before this index have dropped their encoded records
	newest  int64    // newest data time, ms
	subs    []*sub   // the subscriptions that want it
}

// StationKey names a station in SeedLink: its network and station codes.
type StationKey struct{ Network, Station string }

// ID is the station's SeedLink 4 ID, NET_STA.
func (k StationKey) ID() string { return k.Network + "_" + k.Station }

// Ring keeps the last Window of every station's frames in memory and hands
// new ones to subscribers. Older data come from the archive.
type Ring struct {
	window time.Duration

	mu       sync.Mutex
	stations map[StationKey]*station
	subs     map[*sub]struct{}
	dropped  uint64
}

// NewRing returns a ring keeping window of data per station.
func NewRing(window time.Duration) *Ring {
	return &Ring{window: window, stations: map[StationKey]*station{}, subs: map[*sub]struct{}{}}
}

// Add keeps f under key and sends it to the subscriptions that want the
// station. A frame that is not one (no samples, off the sample grid) is
// refused (false).
func (r *Ring) Add(key StationKey, f Frame) bool {
	e, ok := newEntry(f)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stations[key]
	if st == nil {
		st = &station{key: key, id: f.Station}
		r.stations[key] = st
		// Subscriptions are matched with a station once, when either
		// comes: a connection storm must not make every frame match every
		// client again.
		for s := range r.subs {
			if s.wants(key) {
				st.subs = append(st.subs, s)
				s.in = append(s.in, st)
			}
		}
	}
	st.entries = append(st.entries, e)
	st.newest = max(st.newest, f.FirstMs)
	// Trim by data time, from the front: arrival order is data order but
	// for retransmissions, which a later trim catches.
	horizon := st.newest - r.window.Milliseconds()
	n := 0
	for n < len(st.entries) && st.entries[n].FirstMs < horizon {
		n++
	}
	if n > 0 {
		clear(st.entries[:n])
		st.entries = st.entries[n:]
		st.cold = max(st.cold-n, 0)
		if cap(st.entries) > 4*len(st.entries)+64 {
			st.entries = slices.Clone(st.entries)
		}
	}
	for st.cold < len(st.entries) && st.entries[st.cold].FirstMs < st.newest-cacheMs {
		st.entries[st.cold].enc[0].Store(nil)
		st.entries[st.cold].enc[1].Store(nil)
		st.cold++
	}
	var slow []*sub
	for _, s := range st.subs {
		select {
		case s.c <- delivery{key, e}:
		default:
			slow = append(slow, s)
		}
	}
	for _, s := range slow {
		r.dropLocked(s)
	}
	return true
}

// delivery is an entry on its way to a subscription.
type delivery struct {
	key StationKey
	e   *entry
}

// sub is one client's subscription.
type sub struct {
	wants   func(StationKey) bool
	c       chan delivery
	dropped chan struct{}
	in      []*station // the stations whose lists hold it
}

// subscribe registers a subscription of the stations wants selects, with
// room for buffer entries, and returns with it what the ring holds of those
// stations that the filter start returns for each (given the station's
// latest sequence number) keeps, each station's in sequence order, in one
// step: nothing is missed between the two or sent twice.
func (r *Ring) subscribe(wants func(StationKey) bool, buffer int, start func(held Held) func(*entry) bool) (*sub, []delivery) {
	s := &sub{wants: wants, c: make(chan delivery, buffer), dropped: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs[s] = struct{}{}
	var backlog []delivery
	for key, st := range r.stations {
		if !wants(key) {
			continue
		}
		st.subs = append(st.subs, s)
		s.in = append(s.in, st)
		held := Held{Key: key, ID: st.id, SensorFromMs: math.MaxInt64, IntensityFromMs: math.MaxInt64}
		for _, e := range st.entries {
			held.Latest = max(held.Latest, e.last)
			if e.Sensor {
				held.SensorFromMs = min(held.SensorFromMs, e.FirstMs)
			} else {
				held.IntensityFromMs = min(held.IntensityFromMs, e.FirstMs)
			}
		}
		keep := start(held)
		from := len(backlog)
		for _, e := range st.entries {
			if keep(e) {
				backlog = append(backlog, delivery{key, e})
			}
		}
		part := backlog[from:]
		slices.SortFunc(part, func(a, b delivery) int { return cmp.Compare(a.e.first, b.e.first) })
	}
	return s, backlog
}

// Held is what the ring holds of a station when a client subscribes: its
// newest number, and from when it has each kind of frame (MaxInt64: none):
// what is older comes from the archive.
type Held struct {
	Key             StationKey
	ID              string
	Latest          uint64
	SensorFromMs    int64 // first sample of the oldest sensor frame
	IntensityFromMs int64 // window end of the oldest intensity frame
}

// unsubscribe removes s; safe after it was dropped.
func (r *Ring) unsubscribe(s *sub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(s)
}

func (r *Ring) dropLocked(s *sub) {
	if r.removeLocked(s) {
		r.dropped++
		close(s.dropped)
	}
}

// removeLocked takes s out of the ring and its stations' lists; false if
// it was already out.
func (r *Ring) removeLocked(s *sub) bool {
	if _, ok := r.subs[s]; !ok {
		return false
	}
	delete(r.subs, s)
	for _, st := range s.in {
		if i := slices.Index(st.subs, s); i >= 0 {
			st.subs = slices.Delete(st.subs, i, i+1)
		}
	}
	s.in = nil
	return true
}

// StationInfo describes what the ring holds of one station.
type StationInfo struct {
	Key               StationKey
	ID                string // the station ID, as the archive knows it
	FirstSeq, LastSeq uint64
	FirstMs, NewestMs int64
	SensorFrames      int
	IntensityFrames   int
}

// Stations lists the stations the ring holds that wants selects (nil: all),
// sorted by ID.
func (r *Ring) Stations(wants func(StationKey) bool) []StationInfo {
	r.mu.Lock()
	out := make([]StationInfo, 0, len(r.stations))
	for key, st := range r.stations {
		if len(st.entries) == 0 || (wants != nil && !wants(key)) {
			continue
		}
		in := StationInfo{Key: key, ID: st.id, FirstSeq: st.entries[0].first, FirstMs: st.entries[0].FirstMs, NewestMs: st.newest}
		for _, e := range st.entries {
			in.FirstSeq = min(in.FirstSeq, e.first)
			in.LastSeq = max(in.LastSeq, e.last)
			in.FirstMs = min(in.FirstMs, e.FirstMs)
			if e.Sensor {
				in.SensorFrames++
			} else {
				in.IntensityFrames++
			}
		}
		out = append(out, in)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b StationInfo) int { return cmp.Compare(a.Key.ID(), b.Key.ID()) })
	return out
}

// Latest returns the highest sequence number the ring holds of a station,
// which SeedLink 3's 24-bit numbers are resolved against.
func (r *Ring) Latest(key StationKey) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stations[key]
	if st == nil || len(st.entries) == 0 {
		return 0, false
	}
	var last uint64
	for _, e := range st.entries {
		last = max(last, e.last)
	}
	return last, true
}

// Dropped is how many subscriptions were dropped for falling behind.
func (r *Ring) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

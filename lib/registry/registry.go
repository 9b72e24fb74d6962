// Package registry holds the station registry a service works from: each
// station's identity, place, township and signing keys. It loads the
// registry from a JSON file (the format `shindo dev` writes and operators
// provision) and reloads it when the file changes, without a restart.
package registry

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"shindo.dev/lib/stationwire"
	"shindo.dev/seismo/measure"
	"shindo.dev/seismo/seedcode"
)

// Station is one provisioned station.
type Station struct {
	ID   string  `json:"id"`
	Name string  `json:"name,omitempty"`
	Net  string  `json:"net,omitempty"`
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
	Code uint32  `json:"code,omitempty"`
	// SEED are the codes that name the station's data everywhere (the
	// archive, exports, station metadata), fixed when it is provisioned.
	// A registry file may leave them out: NewSet then gives the station
	// network seedcode.DefaultNetwork, location seedcode.DefaultLocation
	// and a station code by seedcode.Station's rule.
	SEED seedcode.Codes `json:"seed,omitzero"`
	// Elevation is the station's height above sea level, m.
	Elevation float64 `json:"elevation_m,omitempty"`
	// ScaleGal is the size of one count of the station's accelerometer
	// (counts × ScaleGal = gal), what its metadata reports as sensitivity;
	// 0: measure.DefaultScaleGal, what the fleet's stations send.
	ScaleGal float64 `json:"scale_gal,omitempty"`
	// Created and Retired bound the station's service (Retired zero while
	// it is active): its metadata's start and end dates.
	Created time.Time `json:"created_at,omitzero"`
	Retired time.Time `json:"retired_at,omitzero"`
	// KeyID and KeyHex are the station's current signing key.
	KeyID  uint32 `json:"key_id"`
	KeyHex string `json:"key_hex"`
	// Previous lists keys being rotated out: still accepted until their
	// NotAfter, so a station can switch keys without losing a packet.
	Previous []OldKey `json:"previous_keys,omitempty"`
	// Active is false for retired stations; their packets are rejected.
	Active *bool `json:"active,omitempty"`
	// SeqResetMs is when an admin last reset the station's seq counter,
	// Unix ms; 0 if never. A station whose counter really restarted
	// (firmware reflashed, counter lost) would have every new packet taken
	// for a replay: ingest forgets the station's replay window at this
	// moment, and the journal records it received before it. Each reset
	// is later than the one before (metadb.Store.ResetStationSeq), so a
	// changed value is a new reset.
	SeqResetMs int64 `json:"seq_reset_ms,omitempty"`

	key        []byte
	olds       [][]byte
	signer     *stationwire.Signer
	oldSigners []*stationwire.Signer
}

// OldKey is a key still accepted during a rotation.
type OldKey struct {
	ID       uint32    `json:"key_id"`
	Hex      string    `json:"key_hex"`
	NotAfter time.Time `json:"not_after"`
}

// Key returns the key named keyID if it is the current one, or a previous
// one still inside its overlap period at now.
func (s *Station) Key(keyID uint32) ([]byte, bool) { return s.KeyAt(keyID, time.Now()) }

// KeyAt is Key at a given time.
func (s *Station) KeyAt(keyID uint32, now time.Time) ([]byte, bool) {
	if keyID == s.KeyID {
		return s.key, true
	}
	for i, old := range s.Previous {
		if old.ID == keyID && now.Before(old.NotAfter) {
			return s.olds[i], true
		}
	}
	return nil, false
}

// Signer returns a signer for the key named keyID, under the same rules
// as Key; cores verify packets and sign acks with it.
func (s *Station) Signer(keyID uint32) (*stationwire.Signer, bool) {
	if keyID == s.KeyID {
		return s.signer, true
	}
	now := time.Now()
	for i, old := range s.Previous {
		if old.ID == keyID && now.Before(old.NotAfter) {
			return s.oldSigners[i], true
		}
	}
	return nil, false
}

// CurrentKey returns the key the station signs with now.
func (s *Station) CurrentKey() []byte { return s.key }

// Scale is the size of one count, gal: ScaleGal, or the default.
func (s *Station) Scale() float64 {
	if s.ScaleGal == 0 {
		return measure.DefaultScaleGal
	}
	return s.ScaleGal
}

// Bounds of a station's elevation (m: the deepest sea floor to above the
// highest summit) and of its count size (gal: a count of 1 m/s² is
// already far coarser than any strong-motion sensor).
const (
	MinElevation = -12000
	MaxElevation = 9000
	MaxScaleGal  = 100
)

// InService reports whether the station is active.
func (s *Station) InService() bool { return s.Active == nil || *s.Active }

// Bounds of Station.SeqResetMs other than 0. A reset time before 2020 or
// more than a day past the clock is a mistake (seconds taken for
// milliseconds, a clock far off), and taking it would have ingest drop a
// station's whole journal, or keep dropping it.
const (
	// MinSeqResetMs is 2020-01-01T00:00:00Z, Unix ms.
	MinSeqResetMs int64 = 1_577_836_800_000
	// MaxSeqResetAhead is how far past the clock a reset time may be.
	MaxSeqResetAhead = 24 * time.Hour
)

// CheckSeqReset checks a Station.SeqResetMs at now: 0, or from
// MinSeqResetMs to MaxSeqResetAhead past now.
func CheckSeqReset(ms int64, now time.Time) error {
	if ms != 0 && (ms < MinSeqResetMs || ms > now.Add(MaxSeqResetAhead).UnixMilli()) {
		return fmt.Errorf("seq_reset_ms %d is neither 0 nor a time from 2020 to a day from now", ms)
	}
	return nil
}

// Set is an immutable set of stations.
type Set struct {
	byID map[string]*Station
	list []*Station
}

// Parse decodes and validates a registry document: a JSON array of stations
// with unique IDs and 16–64 byte hex keys.
func Parse(b []byte) (*Set, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var list []*Station
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return NewSet(list)
}

// NewSet validates stations (unique IDs, 16–64 byte hex keys, positions in
// range, seq reset times as CheckSeqReset, valid SEED codes unique by
// network and station) and indexes them, giving the stations without SEED
// codes their defaults (Station.SEED); it takes ownership of the slice.
func NewSet(list []*Station) (*Set, error) {
	now := time.Now()
	set := &Set{byID: make(map[string]*Station, len(list))}
	for i, s := range list {
		if s == nil || s.ID == "" {
			return nil, fmt.Errorf("station %d: missing id", i)
		}
		if len(s.ID) > 64 {
			return nil, fmt.Errorf("station %d: id longer than 64 bytes", i)
		}
		if _, dup := set.byID[s.ID]; dup {
			return nil, fmt.Errorf("station %q: listed twice", s.ID)
		}
		key, err := decodeKey(s.KeyHex)
		if err != nil {
			return nil, fmt.Errorf("station %q: key_hex %w", s.ID, err)
		}
		s.olds = make([][]byte, len(s.Previous))
		s.oldSigners = make([]*stationwire.Signer, len(s.Previous))
		for j, old := range s.Previous {
			if old.ID == s.KeyID {
				return nil, fmt.Errorf("station %q: previous key %d is also the current key", s.ID, old.ID)
			}
			if s.olds[j], err = decodeKey(old.Hex); err != nil {
				return nil, fmt.Errorf("station %q: previous key %d %w", s.ID, old.ID, err)
			}
			s.oldSigners[j] = stationwire.NewSigner(s.olds[j])
		}
		s.signer = stationwire.NewSigner(key)
		if s.Lat < -90 || s.Lat > 90 || s.Lon < -180 || s.Lon > 180 {
			return nil, fmt.Errorf("station %q: position %.4f,%.4f out of range", s.ID, s.Lat, s.Lon)
		}
		if s.Elevation < MinElevation || s.Elevation > MaxElevation || math.IsNaN(s.Elevation) {
			return nil, fmt.Errorf("station %q: elevation %g m outside %d to %d", s.ID, s.Elevation, MinElevation, MaxElevation)
		}
		if s.ScaleGal < 0 || s.ScaleGal > MaxScaleGal || math.IsNaN(s.ScaleGal) {
			return nil, fmt.Errorf("station %q: scale %g gal per count outside 0 to %g", s.ID, s.ScaleGal, float64(MaxScaleGal))
		}
		if err := CheckSeqReset(s.SeqResetMs, now); err != nil {
			return nil, fmt.Errorf("station %q: %w", s.ID, err)
		}
		s.key = key
		set.byID[s.ID] = s
	}
	set.list = list
	sort.Slice(set.list, func(i, j int) bool { return set.list[i].ID < set.list[j].ID })
	if err := set.seedCodes(); err != nil {
		return nil, err
	}
	return set, nil
}

// seedCodes checks the stations' SEED codes and gives the stations
// without any their defaults, in id order after every given code is
// taken, so a file's codes do not depend on the order it lists stations.
func (s *Set) seedCodes() error {
	taken := map[string]string{} // network.station → id
	for _, st := range s.list {
		if st.SEED.IsZero() {
			continue
		}
		if err := st.SEED.Check(); err != nil {
			return fmt.Errorf("station %q: %w", st.ID, err)
		}
		if other, dup := taken[st.SEED.Key()]; dup {
			return fmt.Errorf("stations %q and %q: both named %s", other, st.ID, st.SEED.Key())
		}
		taken[st.SEED.Key()] = st.ID
	}
	for _, st := range s.list {
		if !st.SEED.IsZero() {
			continue
		}
		net := seedcode.DefaultNetwork
		sta := seedcode.Station(st.ID, func(c string) bool { _, ok := taken[net+"."+c]; return ok })
		st.SEED = seedcode.Codes{Network: net, Station: sta, Location: seedcode.DefaultLocation}
		taken[st.SEED.Key()] = st.ID
	}
	return nil
}

func decodeKey(h string) ([]byte, error) {
	key, err := hex.DecodeString(h)
	if err != nil || len(key) < 16 || len(key) > 64 {
		return nil, errors.New("must be 16 to 64 bytes of hex")
	}
	return key, nil
}

// Lookup returns the station with id.
func (s *Set) Lookup(id string) (*Station, bool) {
	st, ok := s.byID[id]
	return st, ok
}

// All returns the stations ordered by ID; callers must not modify them.
func (s *Set) All() []*Station { return s.list }

// Len returns the number of stations.
func (s *Set) Len() int { return len(s.list) }

// Source is where a service gets its stations from: a file (File) or the
// metadata database. Current and Lookup never block; Run keeps the set
// fresh, checking every interval, until ctx ends.
type Source interface {
	Current() *Set
	Lookup(id string) (*Station, bool)
	Run(ctx context.Context, interval time.Duration) error
}

var _ Source = (*File)(nil)

// File is a registry backed by a JSON file, reloaded when it changes.
type File struct {
	path    string
	current atomic.Pointer[Set]
	modTime time.Time
	size    int64
	log     *slog.Logger
}

// Open loads the registry file at path.
func Open(path string, log *slog.Logger) (*File, error) {
	f := &File{path: path, log: log}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Current returns the latest successfully loaded set.
func (f *File) Current() *Set { return f.current.Load() }

// Lookup finds a station in the current set.
func (f *File) Lookup(id string) (*Station, bool) { return f.Current().Lookup(id) }

func (f *File) reload() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("station registry: %w", err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("station registry: %w", err)
	}
	set, err := Parse(b)
	if err != nil {
		return fmt.Errorf("station registry %s: %w", f.path, err)
	}
	f.current.Store(set)
	f.modTime, f.size = st.ModTime(), st.Size()
	return nil
}

// Run polls the file every interval and reloads it when its size or
// modification time changed. A file that fails to load is logged and the
// previous set stays in use.
func (f *File) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st, err := os.Stat(f.path)
		if err != nil {
			f.log.WarnContext(ctx, "station registry unreadable, keeping the loaded one", slog.Any("error", err))
			continue
		}
		if st.ModTime().Equal(f.modTime) && st.Size() == f.size {
			continue
		}
		if err := f.reload(); err != nil {
			f.log.WarnContext(ctx, "station registry reload failed, keeping the loaded one", slog.Any("error", err))
			continue
		}
		f.log.InfoContext(ctx, "station registry reloaded", slog.Int("stations", f.Current().Len()))
	}
}

// ErrUnknownStation is returned for a station ID not in the registry.
var ErrUnknownStation = errors.New("unknown station")

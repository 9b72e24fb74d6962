package metadb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"shindo.dev/lib/registry"
	"shindo.dev/seismo/measure"
	"shindo.dev/seismo/seedcode"
)

// Limits, the same as the schema's CHECK constraints.
const (
	maxIDBytes   = 64 // registry.NewSet's limit too
	maxNameChars = 200
	maxNetChars  = 64
	minKeyBytes  = 16
	maxKeyBytes  = 64
	// GeneratedKeyBytes is the size of the keys CreateStation and RotateKey
	// generate: as long as an HMAC-SHA256 output, beyond which a key adds
	// no strength.
	GeneratedKeyBytes = 32
)

// Store reads and changes the station registry in PostgreSQL. It is safe
// for concurrent use.
type Store struct {
	pool  *pgxpool.Pool // writes, and reads without a replica
	reads rowQuerier    // reads, if replicated (NewReplicatedStore)
}

// NewStore returns a Store on pool, whose database Migrate has brought up
// to date.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// NewStation is what CreateStation needs to provision a station.
type NewStation struct {
	ID   string // 1–64 bytes of UTF-8 without control characters; never reused
	Name string
	Net  string // network the station belongs to
	Lat  float64
	Lon  float64
	Code uint32 // township postal code, 0 if unknown
	// SEED are the station's SEED codes, fixed from now on; zero gives it
	// network seedcode.DefaultNetwork, location seedcode.DefaultLocation
	// and a station code by seedcode.Station's rule among the stations
	// provisioned before.
	SEED seedcode.Codes
	// Elevation above sea level, m; ScaleGal the size of one count of its
	// accelerometer, gal (0: the fleet's, measure.DefaultScaleGal).
	Elevation float64
	ScaleGal  float64
	// Key is the station's first signing key (key ID 1), 16–64 bytes; nil
	// means generate 32 random bytes.
	Key []byte
}

// Update holds the descriptive fields UpdateStation replaces, all of them
// at once: read the station, change what you need, write it back.
type Update struct {
	Name string
	Net  string
	Lat  float64
	Lon  float64
	Code uint32
	// Elevation (m) and ScaleGal (gal per count) change the station's
	// instrument metadata when set; nil keeps them.
	Elevation, ScaleGal *float64
}

// Filter narrows ListStations.
type Filter struct {
	Net            string // only this network; all when empty
	IncludeRetired bool
}

// CreateStation provisions a station, active, with its first key as key ID
// 1, and returns it. It fails with ErrInvalid for a bad value and with
// ErrExists if the ID or the SEED codes are taken, even by a retired
// station.
func (s *Store) CreateStation(ctx context.Context, ns NewStation) (*registry.Station, error) {
	key := newKey()
	if ns.Key != nil {
		key = append([]byte(nil), ns.Key...) // ours from here on
	}
	var seedErr error
	if !ns.SEED.IsZero() {
		if seedErr = ns.SEED.Check(); seedErr != nil {
			seedErr = fmt.Errorf("%w: %v", ErrInvalid, seedErr)
		}
	}
	if ns.ScaleGal == 0 {
		ns.ScaleGal = measure.DefaultScaleGal
	}
	if err := firstError(checkID(ns.ID), checkInfo(ns.Name, ns.Net, ns.Lat, ns.Lon, ns.Code), seedErr, checkInstrument(ns.Elevation, ns.ScaleGal), checkKey(key)); err != nil {
		return nil, fmt.Errorf("create station %q: %w", ns.ID, err)
	}
	// Without codes the row is given them by the schema's rule
	// (migration 0007, seedcode.Station's), among the stations there.
	var seed [3]*string
	if !ns.SEED.IsZero() {
		seed = [3]*string{&ns.SEED.Network, &ns.SEED.Station, &ns.SEED.Location}
	}
	var created time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx,
			`INSERT INTO stations (id, name, net, lat, lon, code, seed_net, seed_sta, seed_loc, elevation_m, scale_gal)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			 RETURNING seed_net, seed_sta, seed_loc, created_at`,
			ns.ID, ns.Name, ns.Net, ns.Lat, ns.Lon, int64(ns.Code), seed[0], seed[1], seed[2], ns.Elevation, ns.ScaleGal,
		).Scan(&ns.SEED.Network, &ns.SEED.Station, &ns.SEED.Location, &created); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO station_keys (station_id, key_id, secret) VALUES ($1, 1, $2)`, ns.ID, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create station %q: %w", ns.ID, translate(err))
	}
	active := true
	return validated(&registry.Station{
		ID: ns.ID, Name: ns.Name, Net: ns.Net, Lat: ns.Lat, Lon: ns.Lon, Code: ns.Code, SEED: ns.SEED,
		Elevation: ns.Elevation, ScaleGal: ns.ScaleGal, Created: created.UTC(),
		KeyID: 1, KeyHex: hex.EncodeToString(key), Active: &active,
	})
}

// GetStation returns the station with id, retired or not, with its current
// key and the previous keys still accepted now.
func (s *Store) GetStation(ctx context.Context, id string) (*registry.Station, error) {
	list, err := readStations(ctx, s.reader(), "s.id = $1", id)
	if err != nil {
		return nil, fmt.Errorf("get station %q: %w", id, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("get station %q: %w", id, ErrNotFound)
	}
	return validated(list[0])
}

// ListStations returns the stations f selects, ordered by ID, each as
// GetStation returns it.
func (s *Store) ListStations(ctx context.Context, f Filter) ([]*registry.Station, error) {
	list, err := readStations(ctx, s.reader(), "($1 = '' OR s.net = $1) AND ($2 OR s.active)", f.Net, f.IncludeRetired)
	if err != nil {
		return nil, fmt.Errorf("list stations: %w", err)
	}
	set, err := registry.NewSet(list)
	if err != nil {
		return nil, fmt.Errorf("list stations: %w: %v", ErrDatabase, err)
	}
	return set.All(), nil
}

// UpdateStation replaces the name, network, position and township code of
// an active station and returns it. It fails with ErrNotFound, ErrRetired
// or ErrInvalid.
func (s *Store) UpdateStation(ctx context.Context, id string, u Update) (*registry.Station, error) {
	if err := checkInfo(u.Name, u.Net, u.Lat, u.Lon, u.Code); err != nil {
		return nil, fmt.Errorf("update station %q: %w", id, err)
	}
	elevation, scale := 0.0, measure.DefaultScaleGal // stand-ins for the check alone
	if u.Elevation != nil {
		elevation = *u.Elevation
	}
	if u.ScaleGal != nil {
		scale = *u.ScaleGal
	}
	if err := checkInstrument(elevation, scale); err != nil {
		return nil, fmt.Errorf("update station %q: %w", id, err)
	}
	var st *registry.Station
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE stations SET name = $2, net = $3, lat = $4, lon = $5, code = $6,
			    elevation_m = COALESCE($7, elevation_m), scale_gal = COALESCE($8, scale_gal) WHERE id = $1`,
			id, u.Name, u.Net, u.Lat, u.Lon, int64(u.Code), u.Elevation, u.ScaleGal); err != nil {
			return err
		}
		list, err := readStations(ctx, tx, "s.id = $1", id)
		if err == nil {
			st = list[0]
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update station %q: %w", id, translate(err))
	}
	return validated(st)
}

// RetireStation takes a station out of service for good: its packets are
// refused from then on (registry.Station.InService is false), its ID is
// never given to another station, and its keys are kept as a record. It
// fails with ErrNotFound, or ErrRetired if it was retired already.
func (s *Store) RetireStation(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE stations SET active = false, retired_at = now() WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("retire station %q: %w", id, translate(err))
	}
	return nil
}

// RotateKey gives an active station a new random key, which becomes the
// current one under the next key ID (the highest it ever had, plus one), and
// returns it. The key that was current stays accepted for overlap, so
// packets the station signed before it learnt the new key still verify;
// a key is never accepted longer than that: every previous key still inside
// an earlier, longer overlap is cut to the same end. Overlap 0 therefore
// revokes every old key at once (a compromised key). Rotated-out keys stay
// in the database after they expire. It fails with ErrNotFound, ErrRetired,
// or ErrInvalid for a negative overlap or exhausted key IDs.
func (s *Store) RotateKey(ctx context.Context, id string, overlap time.Duration) (keyID uint32, key []byte, err error) {
	if overlap < 0 {
		return 0, nil, fmt.Errorf("rotate key of %q: %w: negative overlap %s", id, ErrInvalid, overlap)
	}
	key = newKey()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The station's row lock also serializes concurrent rotations.
		if err := lockActive(ctx, tx, id); err != nil {
			return err
		}
		var last int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(key_id), 0) FROM station_keys WHERE station_id = $1`, id).Scan(&last); err != nil {
			return err
		}
		if last >= math.MaxUint32 {
			return fmt.Errorf("%w: key IDs exhausted", ErrInvalid)
		}
		keyID = uint32(last + 1)
		if _, err := tx.Exec(ctx, `UPDATE station_keys SET not_after = now() + $2::interval
			WHERE station_id = $1 AND (not_after IS NULL OR not_after > now() + $2::interval)`, id, overlap); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO station_keys (station_id, key_id, secret) VALUES ($1, $2, $3)`, id, int64(keyID), key)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("rotate key of %q: %w", id, translate(err))
	}
	return keyID, key, nil
}

// ResetStationSeq records that an active station's seq counter was reset
// at (the caller's clock, the server's: never a client's) and returns the
// station. Ingest forgets the station's replay window then, and the
// journal records it received before at (registry.Station.SeqResetMs); the
// change reaches every service's registry like any other. The time is
// kept to the millisecond, as the registry carries it, and each reset of a
// station is later than the one before — by a millisecond if at is not
// (two cores' clocks apart) — so a service that saw one reset can tell the
// next. It fails with ErrInvalid for a time before 2020 or more than a day
// ahead, and with ErrNotFound for an unknown station and for a retired one
// (which wraps ErrRetired too): a retired station has no counter to reset.
func (s *Store) ResetStationSeq(ctx context.Context, id string, at time.Time) (*registry.Station, error) {
	at = time.UnixMilli(at.UnixMilli())
	if err := registry.CheckSeqReset(at.UnixMilli(), time.Now()); err != nil {
		return nil, fmt.Errorf("reset seq of %q: %w: %v", id, ErrInvalid, err)
	}
	var st *registry.Station
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, id); errors.Is(err, ErrRetired) {
			return fmt.Errorf("%w (%w)", ErrNotFound, ErrRetired)
		} else if err != nil {
			return err
		}
		// GREATEST skips a NULL: the first reset takes at as it is.
		if _, err := tx.Exec(ctx, `UPDATE stations SET seq_reset_at = GREATEST($2, seq_reset_at + interval '1 millisecond') WHERE id = $1`,
			id, at); err != nil {
			return err
		}
		list, err := readStations(ctx, tx, "s.id = $1", id)
		if err == nil {
			st = list[0]
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reset seq of %q: %w", id, translate(err))
	}
	return validated(st)
}

// Snapshot returns every station, retired ones included (so that their
// packets are refused as retired rather than unknown), with its current key
// and the previous keys accepted now, read in one consistent statement.
func (s *Store) Snapshot(ctx context.Context) (*registry.Set, error) {
	list, err := readStations(ctx, s.pool, "true")
	if err != nil {
		return nil, fmt.Errorf("snapshot stations: %w", err)
	}
	set, err := registry.NewSet(list)
	if err != nil {
		return nil, fmt.Errorf("snapshot stations: %w: %v", ErrDatabase, err)
	}
	return set, nil
}

// lockActive locks the station's row for the rest of the transaction and
// checks that it can still change.
func lockActive(ctx context.Context, tx pgx.Tx, id string) error {
	var active bool
	err := tx.QueryRow(ctx, `SELECT active FROM stations WHERE id = $1 FOR UPDATE`, id).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if !active {
		return ErrRetired
	}
	return nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readStations reads the stations matching where (over stations s) with
// their accepted keys: the current one, and previous ones whose overlap has
// not ended by the database's clock. Errors are already translated.
func readStations(ctx context.Context, q querier, where string, args ...any) ([]*registry.Station, error) {
	rows, err := q.Query(ctx, `
		SELECT s.id, s.name, s.net, s.lat, s.lon, s.code, s.active, s.seq_reset_at, s.seed_net, s.seed_sta, s.seed_loc,
		       s.elevation_m, s.scale_gal, s.created_at, s.retired_at,
		       k.key_id, k.secret, k.not_after
		FROM stations s
		LEFT JOIN station_keys k ON k.station_id = s.id AND (k.not_after IS NULL OR k.not_after > now())
		WHERE `+where+`
		ORDER BY s.id, k.not_after DESC NULLS FIRST, k.key_id DESC`, args...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var (
		list []*registry.Station
		cur  *registry.Station
	)
	for rows.Next() {
		var (
			id, name, net string
			lat, lon      float64
			code          int32
			active        bool
			seqReset      *time.Time
			keyID         *int64
			secret        []byte
			notAfter      *time.Time
			seed          seedcode.Codes
			elev, scale   float64
			created       time.Time
			retired       *time.Time
		)
		if err := rows.Scan(&id, &name, &net, &lat, &lon, &code, &active, &seqReset,
			&seed.Network, &seed.Station, &seed.Location, &elev, &scale, &created, &retired, &keyID, &secret, &notAfter); err != nil {
			return nil, translate(err)
		}
		if cur == nil || cur.ID != id {
			cur = &registry.Station{ID: id, Name: name, Net: net, Lat: lat, Lon: lon, Code: uint32(code), SEED: seed, Active: &active,
				Elevation: elev, ScaleGal: scale, Created: created.UTC()}
			if retired != nil {
				cur.Retired = retired.UTC()
			}
			if seqReset != nil {
				cur.SeqResetMs = seqReset.UnixMilli()
			}
			list = append(list, cur)
		}
		switch {
		case keyID == nil:
			// No accepted key at all; reported below.
		case notAfter == nil:
			cur.KeyID, cur.KeyHex = uint32(*keyID), hex.EncodeToString(secret)
		default:
			cur.Previous = append(cur.Previous, registry.OldKey{ID: uint32(*keyID), Hex: hex.EncodeToString(secret), NotAfter: *notAfter})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	for _, st := range list {
		// Only a hand edit of station_keys can get here; say so rather than
		// let registry.NewSet call the key malformed.
		if st.KeyHex == "" {
			return nil, fmt.Errorf("%w: station %q has no current key", ErrDatabase, st.ID)
		}
	}
	return list, nil
}

// validated runs st through registry.NewSet, which checks it once more and
// prepares the decoded keys Station.Key returns.
func validated(st *registry.Station) (*registry.Station, error) {
	if _, err := registry.NewSet([]*registry.Station{st}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDatabase, err)
	}
	return st, nil
}

func newKey() []byte {
	key := make([]byte, GeneratedKeyBytes)
	rand.Read(key) // never fails: the runtime aborts if the OS cannot give randomness
	return key
}

func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty id", ErrInvalid)
	case len(id) > maxIDBytes:
		return fmt.Errorf("%w: id longer than %d bytes", ErrInvalid, maxIDBytes)
	}
	return checkText("id", id)
}

func checkInfo(name, net string, lat, lon float64, code uint32) error {
	switch {
	case utf8.RuneCountInString(name) > maxNameChars:
		return fmt.Errorf("%w: name longer than %d characters", ErrInvalid, maxNameChars)
	case utf8.RuneCountInString(net) > maxNetChars:
		return fmt.Errorf("%w: net longer than %d characters", ErrInvalid, maxNetChars)
	case !(lat >= -90 && lat <= 90): // also refuses NaN
		return fmt.Errorf("%w: latitude %v outside -90..90", ErrInvalid, lat)
	case !(lon >= -180 && lon <= 180):
		return fmt.Errorf("%w: longitude %v outside -180..180", ErrInvalid, lon)
	case code > math.MaxInt32:
		return fmt.Errorf("%w: township code %d too large", ErrInvalid, code)
	}
	return firstError(checkText("name", name), checkText("net", net))
}

// checkInstrument checks a station's elevation and count size against the
// registry's bounds.
func checkInstrument(elevation, scaleGal float64) error {
	switch {
	case !(elevation >= registry.MinElevation && elevation <= registry.MaxElevation):
		return fmt.Errorf("%w: elevation %v m outside %d..%d", ErrInvalid, elevation, registry.MinElevation, registry.MaxElevation)
	case !(scaleGal > 0 && scaleGal <= registry.MaxScaleGal):
		return fmt.Errorf("%w: scale %v gal per count outside 0..%d", ErrInvalid, scaleGal, registry.MaxScaleGal)
	}
	return nil
}

// firstError returns the first non-nil error: one problem at a time keeps
// messages on one line.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkText refuses what PostgreSQL cannot store (invalid UTF-8, NUL) and
// control characters, which have no place in names that end up in logs,
// metric labels and NOTIFY payloads.
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s contains control character %U", ErrInvalid, field, r)
		}
	}
	return nil
}

func checkKey(key []byte) error {
	if len(key) < minKeyBytes || len(key) > maxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, want %d to %d", ErrInvalid, len(key), minKeyBytes, maxKeyBytes)
	}
	return nil
}

package metadb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// Detection is the latest known update of a network-level trigger, as
// svc-rts publishes it (rtsv1.Detection, field for field).
type Detection struct {
	ID             string
	Serial         uint32
	Final          bool
	OriginTimeMs   int64
	Lat            float64
	Lon            float64
	DepthKm        float64
	Magnitude      float64
	Location       string
	LocationCode   uint32
	MaxLevel       int
	FirstTriggerMs int64
	UpdatedMs      int64
	Stations       uint32
	UpdatedAt      time.Time // when this row last changed
}

func (d *Detection) check() error {
	switch {
	case d.ID == "" || len(d.ID) > maxIDBytes:
		return fmt.Errorf("%w: detection id of %d bytes, want 1 to %d", ErrInvalid, len(d.ID), maxIDBytes)
	case d.Serial == 0:
		return fmt.Errorf("%w: serial 0", ErrInvalid)
	case !(d.Lat >= -90 && d.Lat <= 90):
		return fmt.Errorf("%w: latitude %v outside -90..90", ErrInvalid, d.Lat)
	case !(d.Lon >= -180 && d.Lon <= 180):
		return fmt.Errorf("%w: longitude %v outside -180..180", ErrInvalid, d.Lon)
	case !(d.DepthKm >= -10 && d.DepthKm <= 1000):
		return fmt.Errorf("%w: depth %v outside -10..1000 km", ErrInvalid, d.DepthKm)
	case !(d.Magnitude >= -5 && d.Magnitude <= 12):
		return fmt.Errorf("%w: magnitude %v outside -5..12", ErrInvalid, d.Magnitude)
	case d.MaxLevel < 0 || d.MaxLevel > MaxLevel:
		return fmt.Errorf("%w: max level %d outside 0..9", ErrInvalid, d.MaxLevel)
	case d.LocationCode > math.MaxInt32 || d.Stations > math.MaxInt32:
		return fmt.Errorf("%w: location code or station count too large", ErrInvalid)
	case len([]rune(d.Location)) > maxLocationChars:
		return fmt.Errorf("%w: location longer than %d characters", ErrInvalid, maxLocationChars)
	}
	return firstError(checkText("detection id", d.ID), checkText("location", d.Location))
}

// UpsertDetection stores an update of a detection unless the stored one
// has the same or a higher serial: updates may arrive late, twice, and
// from both cores, and the newest always wins. applied tells whether the
// row changed. It fails with ErrInvalid for a value the schema refuses.
func (s *Store) UpsertDetection(ctx context.Context, d Detection) (applied bool, err error) {
	if err := d.check(); err != nil {
		return false, fmt.Errorf("upsert detection %q: %w", d.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO detections (id, serial, final, origin_time_ms, lat, lon, depth_km, magnitude, location,
			location_code, max_level, first_trigger_ms, updated_ms, stations)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (id) DO UPDATE SET
			serial = EXCLUDED.serial, final = EXCLUDED.final, origin_time_ms = EXCLUDED.origin_time_ms,
			lat = EXCLUDED.lat, lon = EXCLUDED.lon, depth_km = EXCLUDED.depth_km, magnitude = EXCLUDED.magnitude,
			location = EXCLUDED.location, location_code = EXCLUDED.location_code, max_level = EXCLUDED.max_level,
			first_trigger_ms = EXCLUDED.first_trigger_ms, updated_ms = EXCLUDED.updated_ms,
			stations = EXCLUDED.stations, updated_at = now()
		WHERE detections.serial < EXCLUDED.serial`,
		d.ID, int64(d.Serial), d.Final, d.OriginTimeMs, d.Lat, d.Lon, d.DepthKm, d.Magnitude, d.Location,
		int64(d.LocationCode), int16(d.MaxLevel), d.FirstTriggerMs, d.UpdatedMs, int64(d.Stations))
	if err != nil {
		return false, fmt.Errorf("upsert detection %q: %w", d.ID, translate(err))
	}
	return tag.RowsAffected() == 1, nil
}

const detectionColumns = `id, serial, final, origin_time_ms, lat, lon, depth_km, magnitude, location,
	location_code, max_level, first_trigger_ms, updated_ms, stations, updated_at`

func scanDetection(row pgx.Row, d *Detection) error {
	var serial, code, stations int64
	var level int16
	err := row.Scan(&d.ID, &serial, &d.Final, &d.OriginTimeMs, &d.Lat, &d.Lon, &d.DepthKm, &d.Magnitude, &d.Location,
		&code, &level, &d.FirstTriggerMs, &d.UpdatedMs, &stations, &d.UpdatedAt)
	d.Serial, d.LocationCode, d.MaxLevel, d.Stations = uint32(serial), uint32(code), int(level), uint32(stations)
	return err
}

// GetDetection returns the latest update of a detection; ErrNotFound if
// there is none.
func (s *Store) GetDetection(ctx context.Context, id string) (*Detection, error) {
	var d Detection
	err := scanDetection(s.reader().QueryRow(ctx, `SELECT `+detectionColumns+` FROM detections WHERE id = $1`, id), &d)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get detection %q: %w: no detection %q", id, ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("get detection %q: %w", id, translate(err))
	}
	return &d, nil
}

// DetectionFilter selects detections, newest first trigger first.
type DetectionFilter struct {
	ActiveOnly bool             // only those not final yet
	SinceMs    *int64           // first trigger at or after
	After      *DetectionCursor // resume after this detection
	Limit      int              // 1–MaxPage+1
}

// DetectionCursor is the position of a detection in the list order.
type DetectionCursor struct {
	FirstTriggerMs int64
	ID             string
}

// ListDetections returns the detections f selects.
func (s *Store) ListDetections(ctx context.Context, f DetectionFilter) ([]Detection, error) {
	if f.Limit < 1 || f.Limit > MaxPage+1 {
		return nil, fmt.Errorf("list detections: %w: limit %d outside 1..%d", ErrInvalid, f.Limit, MaxPage+1)
	}
	var afterTime *int64
	var afterID *string
	if f.After != nil {
		afterTime, afterID = &f.After.FirstTriggerMs, &f.After.ID
	}
	rows, err := s.reader().Query(ctx, `SELECT `+detectionColumns+` FROM detections
		WHERE (NOT $1::bool OR NOT final)
		  AND ($2::bigint IS NULL OR first_trigger_ms >= $2)
		  AND ($3::bigint IS NULL OR (first_trigger_ms, id) < ($3, $4::text))
		ORDER BY first_trigger_ms DESC, id DESC
		LIMIT $5`, f.ActiveOnly, f.SinceMs, afterTime, afterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list detections: %w", translate(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Detection, error) {
		var d Detection
		return d, scanDetection(row, &d)
	})
	if err != nil {
		return nil, fmt.Errorf("list detections: %w", translate(err))
	}
	return list, nil
}

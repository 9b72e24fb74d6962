package metadb

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Report limits, the same as the schema's CHECK constraints.
const (
	maxReportIDBytes = 64
	maxLocationChars = 200
	// MaxAreas bounds a report's per-area intensities: Taiwan has fewer
	// than 400 townships.
	MaxAreas = 1000
	// MaxTimeMs is 9999-12-31T23:59:59.999Z, the latest time a report may
	// carry.
	MaxTimeMs = 253402300799999
	// MaxLevel is the highest intensity level (JMA 7).
	MaxLevel = 9
	// MaxReportStations bounds a report's station peaks.
	MaxReportStations = 20_000
)

// reportID is the alphabet of report IDs: they appear in URLs and in the
// compatible routes' JSON, so nothing that needs escaping.
var reportID = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// Report is an earthquake report: where and when, how strong, and how
// strongly each area shook.
type Report struct {
	ID        string
	TimeMs    int64 // origin time, Unix ms
	Lat       float64
	Lon       float64
	DepthKm   float64
	Magnitude float64
	Location  string
	MaxLevel  int         // 0–9
	Areas     []AreaLevel // ordered by code; ListReports leaves it nil
	// SourceDetectionID is the detection the report was derived from,
	// empty for a posted one; TremMs is that detection's first trigger,
	// Unix ms, or 0.
	SourceDetectionID string
	TremMs            int64
	// Stations are the peaks of the stations that felt the event, by
	// station ID: written with a report and merged like its areas, but
	// not part of its content (ContentHash) and not read back with it
	// (ReportStations reads them).
	Stations []StationPeak
	// MD5 is ContentHash, set by the store.
	MD5       string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// AreaLevel is the intensity level (0–9) of one area, a township postal
// code.
type AreaLevel struct {
	Code  uint32
	Level int
}

// StationPeak is the highest motion one station sent during a report's
// detection.
type StationPeak struct {
	StationID string
	PGAGal    float32 // peak ground acceleration, gal
	PGVCms    float32 // peak ground velocity, cm/s
	Intensity float32 // real-time JMA intensity
	// The station's SEED codes, from the registry when ReportStations
	// reads it (empty for a station no longer registered).
	Network, Station, Location string
}

// Bounds of a station peak, the same as the schema's CHECK constraints.
const (
	maxPeakPGAGal = 10_000
	maxPeakPGVCms = 1_000
)

// ContentHash returns the hex MD5 of the report's content: every field
// but the hash itself and the bookkeeping times, in a fixed text form
// (floats in their shortest exact form, areas by code). Equal content
// gives an equal hash on every core and in every version of this code,
// which is what lets a second write of the same report be recognised.
func (r *Report) ContentHash() string {
	b := make([]byte, 0, 128+len(r.Areas)*8)
	b = append(b, "shindo-report-v1\n"...)
	b = append(b, r.ID...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, r.TimeMs, 10)
	for _, f := range []float64{r.Lat, r.Lon, r.DepthKm, r.Magnitude} {
		b = append(b, '\n')
		b = strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	b = append(b, '\n')
	b = append(b, r.Location...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(r.MaxLevel), 10)
	b = append(b, '\n')
	b = append(b, r.SourceDetectionID...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, r.TremMs, 10)
	for _, a := range r.Areas {
		b = append(b, '\n')
		b = strconv.AppendUint(b, uint64(a.Code), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(a.Level), 10)
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// CheckReportID reports whether id can name a report: 1–64 bytes of
// letters, digits and ._:-
func CheckReportID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty report id", ErrInvalid)
	case len(id) > maxReportIDBytes:
		return fmt.Errorf("%w: report id longer than %d bytes", ErrInvalid, maxReportIDBytes)
	case !reportID.MatchString(id):
		return fmt.Errorf("%w: report id may hold only letters, digits and . _ : -", ErrInvalid)
	}
	return nil
}

// normalize checks r and puts its areas in order; it fails with
// ErrInvalid.
func (r *Report) normalize() error {
	if err := CheckReportID(r.ID); err != nil {
		return err
	}
	switch {
	case r.TimeMs < 0 || r.TimeMs > MaxTimeMs:
		return fmt.Errorf("%w: time %d outside 0..%d", ErrInvalid, r.TimeMs, int64(MaxTimeMs))
	case !(r.Lat >= -90 && r.Lat <= 90):
		return fmt.Errorf("%w: latitude %v outside -90..90", ErrInvalid, r.Lat)
	case !(r.Lon >= -180 && r.Lon <= 180):
		return fmt.Errorf("%w: longitude %v outside -180..180", ErrInvalid, r.Lon)
	case !(r.DepthKm >= 0 && r.DepthKm <= 1000):
		return fmt.Errorf("%w: depth %v outside 0..1000 km", ErrInvalid, r.DepthKm)
	case !(r.Magnitude >= -5 && r.Magnitude <= 12):
		return fmt.Errorf("%w: magnitude %v outside -5..12", ErrInvalid, r.Magnitude)
	case utf8.RuneCountInString(r.Location) > maxLocationChars:
		return fmt.Errorf("%w: location longer than %d characters", ErrInvalid, maxLocationChars)
	case r.MaxLevel < 0 || r.MaxLevel > MaxLevel:
		return fmt.Errorf("%w: max level %d outside 0..9", ErrInvalid, r.MaxLevel)
	case len(r.Areas) > MaxAreas:
		return fmt.Errorf("%w: more than %d areas", ErrInvalid, MaxAreas)
	case len(r.SourceDetectionID) > maxIDBytes:
		return fmt.Errorf("%w: source detection id longer than %d bytes", ErrInvalid, maxIDBytes)
	case r.TremMs < 0 || r.TremMs > MaxTimeMs:
		return fmt.Errorf("%w: trem %d outside 0..%d", ErrInvalid, r.TremMs, int64(MaxTimeMs))
	}
	if err := checkText("location", r.Location); err != nil {
		return err
	}
	if err := checkText("source detection id", r.SourceDetectionID); err != nil {
		return err
	}
	areas := slices.Clone(r.Areas)
	slices.SortFunc(areas, func(a, b AreaLevel) int { return int(a.Code) - int(b.Code) })
	for i, a := range areas {
		switch {
		case a.Code > 999999:
			return fmt.Errorf("%w: area code %d outside 0..999999", ErrInvalid, a.Code)
		case a.Level < 0 || a.Level > MaxLevel:
			return fmt.Errorf("%w: area %d level %d outside 0..9", ErrInvalid, a.Code, a.Level)
		case i > 0 && areas[i-1].Code == a.Code:
			return fmt.Errorf("%w: area %d given twice", ErrInvalid, a.Code)
		}
	}
	r.Areas = areas
	return r.normalizeStations()
}

// normalizeStations checks the station peaks and puts them in order.
func (r *Report) normalizeStations() error {
	if len(r.Stations) > MaxReportStations {
		return fmt.Errorf("%w: more than %d station peaks", ErrInvalid, MaxReportStations)
	}
	peaks := slices.Clone(r.Stations)
	slices.SortFunc(peaks, func(a, b StationPeak) int { return strings.Compare(a.StationID, b.StationID) })
	for i, p := range peaks {
		switch {
		case p.StationID == "" || len(p.StationID) > maxIDBytes:
			return fmt.Errorf("%w: station peak of station id %.80q", ErrInvalid, p.StationID)
		case !(p.PGAGal >= 0 && p.PGAGal <= maxPeakPGAGal) || !(p.PGVCms >= 0 && p.PGVCms <= maxPeakPGVCms) ||
			!(p.Intensity >= -12 && p.Intensity <= 10):
			return fmt.Errorf("%w: station %s peak out of range", ErrInvalid, p.StationID)
		case i > 0 && peaks[i-1].StationID == p.StationID:
			return fmt.Errorf("%w: station %s peak given twice", ErrInvalid, p.StationID)
		}
		if err := checkText("station id", p.StationID); err != nil {
			return err
		}
	}
	r.Stations = peaks
	return nil
}

// CreateReport stores a new report and returns it with created true. A
// report with the same ID and the same content (ContentHash) is not an
// error: the stored one is returned with created false, so a retried post
// is harmless. The same ID with different content fails with ErrConflict.
// It fails with ErrInvalid for a bad value.
func (s *Store) CreateReport(ctx context.Context, r Report) (stored *Report, created bool, err error) {
	if err := r.normalize(); err != nil {
		return nil, false, fmt.Errorf("create report %q: %w", r.ID, err)
	}
	r.MD5 = r.ContentHash()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ok, err := insertReport(ctx, tx, &r)
		if err != nil || ok {
			created = ok
			return err
		}
		existing, err := readReport(ctx, tx, r.ID)
		if err != nil {
			return err
		}
		if existing.MD5 != r.MD5 {
			return fmt.Errorf("%w: report %q exists with different content", ErrConflict, r.ID)
		}
		r = *existing
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("create report %q: %w", r.ID, translate(err))
	}
	return &r, created, nil
}

// MergeDetectionReport stores the report derived from a final detection,
// as both cores' data APIs do for every detection, in any order and any
// number of times. A new report is inserted. An existing one from the same
// detection keeps its fields (a final detection never changes) and gains
// the union of both versions' areas, each at the higher level, so two
// writers that saw different parts of the shaking converge on the same
// report. changed tells whether anything was written. A report of the same
// ID from another source fails with ErrConflict.
func (s *Store) MergeDetectionReport(ctx context.Context, r Report) (stored *Report, changed bool, err error) {
	if r.SourceDetectionID == "" {
		return nil, false, fmt.Errorf("merge report %q: %w: no source detection", r.ID, ErrInvalid)
	}
	if err := r.normalize(); err != nil {
		return nil, false, fmt.Errorf("merge report %q: %w", r.ID, err)
	}
	r.MD5 = r.ContentHash()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ok, err := insertReport(ctx, tx, &r)
		if err != nil || ok {
			changed = ok
			return err
		}
		// Lock the row: the other core may be merging at the same time.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM reports WHERE id = $1 FOR UPDATE`, r.ID); err != nil {
			return err
		}
		existing, err := readReport(ctx, tx, r.ID)
		if err != nil {
			return err
		}
		if existing.SourceDetectionID != r.SourceDetectionID {
			return fmt.Errorf("%w: report %q comes from another source", ErrConflict, r.ID)
		}
		if err := writeStations(ctx, tx, r.ID, r.Stations); err != nil {
			return err
		}
		merged := *existing
		merged.Areas = mergeAreas(existing.Areas, r.Areas)
		merged.MD5 = merged.ContentHash()
		if merged.MD5 == existing.MD5 {
			r = *existing
			return nil
		}
		if err := writeAreas(ctx, tx, r.ID, merged.Areas, existing.Areas); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `UPDATE reports SET md5 = $2, updated_at = now() WHERE id = $1 RETURNING updated_at`,
			r.ID, merged.MD5).Scan(&merged.UpdatedAt); err != nil {
			return err
		}
		r, changed = merged, true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("merge report %q: %w", r.ID, translate(err))
	}
	return &r, changed, nil
}

// mergeAreas is the union of a and b (both ordered by code), each code at
// its higher level.
func mergeAreas(a, b []AreaLevel) []AreaLevel {
	out := make([]AreaLevel, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Code < b[j].Code:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Code < a[i].Code:
			out = append(out, b[j])
			j++
		default:
			out = append(out, AreaLevel{Code: a[i].Code, Level: max(a[i].Level, b[j].Level)})
			i, j = i+1, j+1
		}
	}
	return out
}

// insertReport inserts r unless its ID exists, telling which happened.
func insertReport(ctx context.Context, tx pgx.Tx, r *Report) (bool, error) {
	var source *string
	if r.SourceDetectionID != "" {
		source = &r.SourceDetectionID
	}
	err := tx.QueryRow(ctx, `
		INSERT INTO reports (id, time_ms, lat, lon, depth_km, magnitude, location, max_level, md5, source_detection_id, trem_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (id) DO NOTHING
		RETURNING created_at, updated_at`,
		r.ID, r.TimeMs, r.Lat, r.Lon, r.DepthKm, r.Magnitude, r.Location, int16(r.MaxLevel), r.MD5, source, r.TremMs,
	).Scan(&r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := writeAreas(ctx, tx, r.ID, r.Areas, nil); err != nil {
		return false, err
	}
	return true, writeStations(ctx, tx, r.ID, r.Stations)
}

// writeStations merges peaks into a report's stored station peaks, each
// value at the higher of the two.
func writeStations(ctx context.Context, tx pgx.Tx, id string, peaks []StationPeak) error {
	if len(peaks) == 0 {
		return nil
	}
	ids := make([]string, len(peaks))
	pga, pgv, in := make([]float32, len(peaks)), make([]float32, len(peaks)), make([]float32, len(peaks))
	for i, p := range peaks {
		ids[i], pga[i], pgv[i], in[i] = p.StationID, p.PGAGal, p.PGVCms, p.Intensity
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO report_stations (report_id, station_id, pga_gal, pgv_cms, intensity)
		SELECT $1, s, a, v, i FROM unnest($2::text[], $3::real[], $4::real[], $5::real[]) AS t (s, a, v, i)
		ON CONFLICT (report_id, station_id) DO UPDATE SET
			pga_gal = greatest(report_stations.pga_gal, EXCLUDED.pga_gal),
			pgv_cms = greatest(report_stations.pgv_cms, EXCLUDED.pgv_cms),
			intensity = greatest(report_stations.intensity, EXCLUDED.intensity)`, id, ids, pga, pgv, in)
	return err
}

// ReportStations returns the station peaks of reports ids (at most
// MaxPage+1 of them), each report's by station ID, with the stations' SEED
// codes from the registry.
func (s *Store) ReportStations(ctx context.Context, ids []string) (map[string][]StationPeak, error) {
	if len(ids) > MaxPage+1 {
		return nil, fmt.Errorf("report stations: %w: %d reports, at most %d", ErrInvalid, len(ids), MaxPage+1)
	}
	rows, err := s.reader().Query(ctx, `
		SELECT r.report_id, r.station_id, r.pga_gal, r.pgv_cms, r.intensity,
		       coalesce(s.seed_net, ''), coalesce(s.seed_sta, ''), coalesce(s.seed_loc, '')
		FROM report_stations r LEFT JOIN stations s ON s.id = r.station_id
		WHERE r.report_id = ANY($1::text[])
		ORDER BY r.report_id, r.station_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("report stations: %w", translate(err))
	}
	out := map[string][]StationPeak{}
	var report string
	var p StationPeak
	_, err = pgx.ForEachRow(rows, []any{&report, &p.StationID, &p.PGAGal, &p.PGVCms, &p.Intensity, &p.Network, &p.Station, &p.Location}, func() error {
		out[report] = append(out[report], p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report stations: %w", translate(err))
	}
	return out, nil
}

// writeAreas brings a report's stored areas from old to areas.
func writeAreas(ctx context.Context, tx pgx.Tx, id string, areas, old []AreaLevel) error {
	have := make(map[uint32]int, len(old))
	for _, a := range old {
		have[a.Code] = a.Level
	}
	var codes, levels []int32
	for _, a := range areas {
		if l, ok := have[a.Code]; ok && l == a.Level {
			continue
		}
		codes, levels = append(codes, int32(a.Code)), append(levels, int32(a.Level))
	}
	if len(codes) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO report_areas (report_id, code, level)
		SELECT $1, c, l FROM unnest($2::integer[], $3::integer[]) AS t (c, l)
		ON CONFLICT (report_id, code) DO UPDATE SET level = EXCLUDED.level`, id, codes, levels)
	return err
}

// GetReport returns the report with id and its areas; ErrNotFound if
// there is none.
func (s *Store) GetReport(ctx context.Context, id string) (*Report, error) {
	r, err := readReport(ctx, s.reader(), id)
	if err != nil {
		return nil, fmt.Errorf("get report %q: %w", id, translate(err))
	}
	return r, nil
}

type rowQuerier interface {
	querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const reportColumns = `id, time_ms, lat, lon, depth_km, magnitude, location, max_level, md5,
	coalesce(source_detection_id, ''), trem_ms, created_at, updated_at`

func scanReport(row pgx.Row, r *Report) error {
	var level int16
	err := row.Scan(&r.ID, &r.TimeMs, &r.Lat, &r.Lon, &r.DepthKm, &r.Magnitude, &r.Location, &level, &r.MD5,
		&r.SourceDetectionID, &r.TremMs, &r.CreatedAt, &r.UpdatedAt)
	r.MaxLevel = int(level)
	return err
}

func readReport(ctx context.Context, q rowQuerier, id string) (*Report, error) {
	var r Report
	if err := scanReport(q.QueryRow(ctx, `SELECT `+reportColumns+` FROM reports WHERE id = $1`, id), &r); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: no report %q", ErrNotFound, id)
		}
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT code, level FROM report_areas WHERE report_id = $1 ORDER BY code`, id)
	if err != nil {
		return nil, err
	}
	r.Areas, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AreaLevel, error) {
		var code int32
		var level int16
		err := row.Scan(&code, &level)
		return AreaLevel{Code: uint32(code), Level: int(level)}, err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// ReportFilter selects reports. Nil pointers do not filter. Reports come
// newest first (time, then ID, descending).
type ReportFilter struct {
	FromMs, ToMs               *int64   // origin time range, inclusive
	MinMagnitude, MaxMagnitude *float64 // inclusive
	MinLevel, MaxLevel         *int     // max intensity level, inclusive
	MinDepthKm, MaxDepthKm     *float64 // inclusive
	MinLat, MaxLat             *float64 // bounding box, inclusive
	MinLon, MaxLon             *float64
	After                      *ReportCursor // resume after this report (newest-first order only)
	Offset                     int           // skip this many (page-numbered clients)
	Limit                      int           // at most this many, 1–MaxPage+1
	// Sort orders the list (by origin time unless set); Ascending turns it
	// round. Reports equal in the sort key stay newest first.
	Sort      ReportSort
	Ascending bool
}

// ReportSort is the key a report list is ordered by.
type ReportSort int

// The report orders.
const (
	SortTime      ReportSort = iota // origin time
	SortLevel                       // highest intensity level
	SortMagnitude                   // magnitude
	SortDepth                       // depth
)

// reportOrder is the ORDER BY clause of each sort and direction: static
// text, never built from input.
var reportOrder = map[ReportSort][2]string{
	SortTime:      {"time_ms DESC, id DESC", "time_ms ASC, id ASC"},
	SortLevel:     {"max_level DESC, time_ms DESC, id DESC", "max_level ASC, time_ms DESC, id DESC"},
	SortMagnitude: {"magnitude DESC, time_ms DESC, id DESC", "magnitude ASC, time_ms DESC, id DESC"},
	SortDepth:     {"depth_km DESC, time_ms DESC, id DESC", "depth_km ASC, time_ms DESC, id DESC"},
}

// ReportCursor is the position of a report in the list order.
type ReportCursor struct {
	TimeMs int64
	ID     string
}

// MaxPage bounds a page of ListReports and ListDetections. A filter's
// Limit may be one more: the look-ahead row by which a pager knows
// whether another page follows.
const MaxPage = 500

// MaxOffset bounds ReportFilter.Offset: deep offsets cost a scan of
// everything skipped, and page-numbered clients never go that far.
const MaxOffset = 100_000

// ListReports returns the reports f selects, without their areas.
func (s *Store) ListReports(ctx context.Context, f ReportFilter) ([]Report, error) {
	if f.Limit < 1 || f.Limit > MaxPage+1 {
		return nil, fmt.Errorf("list reports: %w: limit %d outside 1..%d", ErrInvalid, f.Limit, MaxPage+1)
	}
	if f.Offset < 0 || f.Offset > MaxOffset {
		return nil, fmt.Errorf("list reports: %w: offset %d outside 0..%d", ErrInvalid, f.Offset, MaxOffset)
	}
	for _, v := range []*float64{f.MinMagnitude, f.MaxMagnitude, f.MinDepthKm, f.MaxDepthKm, f.MinLat, f.MaxLat, f.MinLon, f.MaxLon} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return nil, fmt.Errorf("list reports: %w: not a finite number", ErrInvalid)
		}
	}
	order, ok := reportOrder[f.Sort]
	if !ok {
		return nil, fmt.Errorf("list reports: %w: unknown order %d", ErrInvalid, f.Sort)
	}
	dir := 0
	if f.Ascending {
		dir = 1
	}
	var afterTime *int64
	var afterID *string
	if f.After != nil {
		if f.Sort != SortTime || f.Ascending {
			return nil, fmt.Errorf("list reports: %w: a cursor resumes the newest-first order only", ErrInvalid)
		}
		afterTime, afterID = &f.After.TimeMs, &f.After.ID
	}
	// One static statement: every filter is a parameter, NULL when unused.
	rows, err := s.reader().Query(ctx, `SELECT `+reportColumns+` FROM reports
		WHERE ($1::bigint IS NULL OR time_ms >= $1)
		  AND ($2::bigint IS NULL OR time_ms <= $2)
		  AND ($3::float8 IS NULL OR magnitude >= $3)
		  AND ($4::float8 IS NULL OR magnitude <= $4)
		  AND ($5::int IS NULL OR max_level >= $5)
		  AND ($6::int IS NULL OR max_level <= $6)
		  AND ($7::float8 IS NULL OR depth_km >= $7)
		  AND ($8::float8 IS NULL OR depth_km <= $8)
		  AND ($9::float8 IS NULL OR lat >= $9)
		  AND ($10::float8 IS NULL OR lat <= $10)
		  AND ($11::float8 IS NULL OR lon >= $11)
		  AND ($12::float8 IS NULL OR lon <= $12)
		  AND ($13::bigint IS NULL OR (time_ms, id) < ($13, $14::text))
		ORDER BY `+order[dir]+`
		OFFSET $15 LIMIT $16`,
		f.FromMs, f.ToMs, f.MinMagnitude, f.MaxMagnitude, f.MinLevel, f.MaxLevel, f.MinDepthKm, f.MaxDepthKm,
		f.MinLat, f.MaxLat, f.MinLon, f.MaxLon, afterTime, afterID, f.Offset, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list reports: %w", translate(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Report, error) {
		var r Report
		return r, scanReport(row, &r)
	})
	if err != nil {
		return nil, fmt.Errorf("list reports: %w", translate(err))
	}
	return list, nil
}

// Versions are the version counters of the kinds of data: each grows with
// every change to its tables (reports and their areas, detections,
// stations), in the same transaction.
type Versions struct {
	Reports, Detections, Stations int64
}

// DataVersions reads the version counters, in one statement.
func (s *Store) DataVersions(ctx context.Context) (Versions, error) {
	var v Versions
	err := s.reader().QueryRow(ctx, `SELECT
		coalesce(max(version) FILTER (WHERE name = 'reports'), 0),
		coalesce(max(version) FILTER (WHERE name = 'detections'), 0),
		coalesce(max(version) FILTER (WHERE name = 'stations'), 0)
		FROM data_versions`).Scan(&v.Reports, &v.Detections, &v.Stations)
	if err != nil {
		return Versions{}, fmt.Errorf("data versions: %w", translate(err))
	}
	return v, nil
}

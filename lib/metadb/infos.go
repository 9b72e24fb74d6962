package metadb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StationInfo is a station as the compatible station list shows it.
type StationInfo struct {
	ID        string
	Net       string
	Lat       float64
	Lon       float64
	Code      uint32
	Active    bool
	CreatedAt time.Time
}

// StationInfos returns every station, retired ones too, ordered by ID,
// with the time it was provisioned (never its keys).
func (s *Store) StationInfos(ctx context.Context) ([]StationInfo, error) {
	rows, err := s.reader().Query(ctx, `SELECT id, net, lat, lon, code, active, created_at FROM stations ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("station infos: %w", translate(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StationInfo, error) {
		var si StationInfo
		var code int32
		err := row.Scan(&si.ID, &si.Net, &si.Lat, &si.Lon, &code, &si.Active, &si.CreatedAt)
		si.Code = uint32(code)
		return si, err
	})
	if err != nil {
		return nil, fmt.Errorf("station infos: %w", translate(err))
	}
	return list, nil
}

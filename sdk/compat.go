package sdk

import (
	"context"
	"fmt"
	"net/url"
)

// RTS is the body of GET /api/v2/trem/rts (SPEC §7).
type RTS struct {
	Station map[string]StationRTS `json:"station"`
	Box     map[string]int        `json:"box"`
	Int     []AreaLevel           `json:"int"`
	Time    int64                 `json:"time"`
}

// StationRTS is one station's real-time values.
type StationRTS struct {
	PGA float64 `json:"pga"`
	PGV float64 `json:"pgv"`
	I   float64 `json:"i"`
	Dsp float64 `json:"I"`
	// Alert is 1 while the station is triggered, absent (0) otherwise: the
	// apps decode it as an integer flag.
	Alert int `json:"alert,omitempty"`
}

// Triggered reports whether the station is triggered.
func (s StationRTS) Triggered() bool { return s.Alert == 1 }

// AreaLevel is a township's level.
type AreaLevel struct {
	Code int `json:"code"`
	I    int `json:"i"`
}

// EEW is one active alert of GET /api/v2/eq/eew.
type EEW struct {
	Author string  `json:"author"`
	ID     string  `json:"id"`
	Serial int     `json:"serial"`
	Status int     `json:"status"`
	Final  int     `json:"final"`
	EQ     EEWInfo `json:"eq"`
	Time   int64   `json:"time"`
}

// EEWInfo describes the earthquake of an alert.
type EEWInfo struct {
	Time  int64   `json:"time"`
	Lat   float64 `json:"lat"`
	Lon   float64 `json:"lon"`
	Depth float64 `json:"depth"`
	Mag   float64 `json:"mag"`
	Loc   string  `json:"loc"`
	Max   int     `json:"max"`
}

// TremStation is one entry of GET /api/v1/trem/station.
type TremStation struct {
	Net  string `json:"net"`
	Info []struct {
		Code int     `json:"code"`
		Lat  float64 `json:"lat"`
		Lon  float64 `json:"lon"`
		Time string  `json:"time"`
	} `json:"info"`
	Work bool `json:"work"`
}

// RTS returns the latest real-time shaking snapshot (from an edge).
func (c *Client) RTS(ctx context.Context) (*RTS, error) {
	var out RTS
	return &out, c.Get(ctx, "/api/v2/trem/rts", &out)
}

// EEW returns the active alerts (from an edge); empty when quiet.
func (c *Client) EEW(ctx context.Context) ([]EEW, error) {
	var out []EEW
	return out, c.Get(ctx, "/api/v2/eq/eew", &out)
}

// TremStations returns the stations in the compatible form.
func (c *Client) TremStations(ctx context.Context) (map[string]TremStation, error) {
	out := map[string]TremStation{}
	return out, c.Get(ctx, "/api/v1/trem/station", &out)
}

// TremReport is an earthquake report as the compatible route gives it
// (GET /api/v2/eq/report).
type TremReport struct {
	ID    string  `json:"id"`
	Lat   float64 `json:"lat"`
	Lon   float64 `json:"lon"`
	Loc   string  `json:"loc"`
	Depth float64 `json:"depth"`
	Mag   float64 `json:"mag"`
	Int   int     `json:"int"`  // highest intensity level
	Time  int64   `json:"time"` // origin, Unix ms
	Trem  int64   `json:"trem"`
	MD5   string  `json:"md5"`
}

// TremReports returns a page of earthquake reports, newest first, as the
// compatible route gives them; Reports gives the data API's.
func (c *Client) TremReports(ctx context.Context, limit, page int) ([]TremReport, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if page > 0 {
		q.Set("page", fmt.Sprint(page))
	}
	var out []TremReport
	path := "/api/v2/eq/report"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out, c.Get(ctx, path, &out)
}

package synth

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Event is an earthquake.
type Event struct {
	Name        string
	Description string
	Lat, Lon    float64 // epicentre, degrees
	DepthKm     float64 // hypocentre depth
	Mag         float64 // moment magnitude
	Origin      time.Time
	// Motion is the relation the amplitudes follow (the model's own
	// when empty).
	Motion Motion
}

// Position is a station's location, degrees.
type Position struct{ Lat, Lon float64 }

// ErrUnknownScenario is returned by Scenario for a name it does not know.
var ErrUnknownScenario = errors.New("unknown scenario")

var tst = time.FixedZone("CST", 8*60*60) // Taiwan time

// scenarios are modelled on real events: epicentres and depths from the
// Central Weather Administration, moment magnitudes (what the model takes)
// from USGS.
var scenarios = []Event{
	{
		Name:        "hualien",
		Description: "Mw 7.4 (ML 7.2) off Hualien, like 2024-04-03 (23.77N 121.67E, 15.5 km)",
		Lat:         23.77, Lon: 121.67, DepthKm: 15.5, Mag: 7.4,
		Origin: time.Date(2024, 4, 3, 7, 58, 9, 0, tst),
	},
	{
		Name:        "hualien-m6",
		Description: "Mw 6.4 (ML 6.2) near Hualien city, like 2018-02-06 (24.10N 121.73E, 10 km)",
		Lat:         24.10, Lon: 121.73, DepthKm: 10, Mag: 6.4,
		Origin: time.Date(2018, 2, 6, 23, 50, 42, 0, tst),
	},
	{
		Name:        "meinong-m6",
		Description: "Mw 6.4 (ML 6.6) under Kaohsiung's hills, like Meinong 2016-02-06 (22.92N 120.54E, 14.6 km)",
		Lat:         22.92, Lon: 120.54, DepthKm: 14.6, Mag: 6.4,
		Origin: time.Date(2016, 2, 6, 3, 57, 26, 0, tst),
	},
	{
		Name:        "chishang-m7",
		Description: "Mw 6.9 (ML 6.8) in the Longitudinal Valley, like Chishang 2022-09-18 (23.14N 121.20E, 7.8 km)",
		Lat:         23.14, Lon: 121.20, DepthKm: 7.8, Mag: 6.9,
		Origin: time.Date(2022, 9, 18, 14, 44, 15, 0, tst),
	},
	{
		Name:        "taitung-offshore-m5",
		Description: "M5.5 30 km off the coast of Taitung, outside the network (22.75N 121.45E, 20 km); no particular event",
		Lat:         22.75, Lon: 121.45, DepthKm: 20, Mag: 5.5,
		Origin: time.Date(2025, 6, 1, 12, 0, 0, 0, tst),
	},
	{
		Name:        "yilan-m4",
		Description: "M4.5 off Yilan, a small felt event (24.70N 121.90E, 15 km)",
		Lat:         24.70, Lon: 121.90, DepthKm: 15, Mag: 4.5,
		Origin: time.Date(2024, 1, 1, 12, 0, 0, 0, tst),
	},
}

// Scenarios returns the built-in events.
func Scenarios() []Event { return slices.Clone(scenarios) }

// Scenario returns the built-in event with the given name. Its Origin is
// the historical time; set it to replay the event now.
func Scenario(name string) (Event, error) {
	for _, ev := range scenarios {
		if ev.Name == name {
			return ev, nil
		}
	}
	names := make([]string, len(scenarios))
	for i, ev := range scenarios {
		names[i] = ev.Name
	}
	return Event{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownScenario, name, names)
}

const earthRadiusKm = 6371.0

// EpicentralKm is the great-circle distance from the epicentre to p.
func (ev Event) EpicentralKm(p Position) float64 {
	la1, la2 := rad(ev.Lat), rad(p.Lat)
	dla, dlo := la2-la1, rad(p.Lon-ev.Lon)
	h := math.Sin(dla/2)*math.Sin(dla/2) + math.Cos(la1)*math.Cos(la2)*math.Sin(dlo/2)*math.Sin(dlo/2)
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(h)))
}

// HypocentralKm is the straight-line distance from the hypocentre to p.
func (ev Event) HypocentralKm(p Position) float64 {
	e := ev.EpicentralKm(p)
	return math.Sqrt(e*e + ev.DepthKm*ev.DepthKm)
}

// azimuth is the direction from the epicentre to p, radians clockwise from
// north.
func (ev Event) azimuth(p Position) float64 {
	la1, la2 := rad(ev.Lat), rad(p.Lat)
	dlo := rad(p.Lon - ev.Lon)
	y := math.Sin(dlo) * math.Cos(la2)
	x := math.Cos(la1)*math.Sin(la2) - math.Sin(la1)*math.Cos(la2)*math.Cos(dlo)
	return math.Atan2(y, x)
}

func rad(deg float64) float64 { return deg * math.Pi / 180 }

// String formats a position as "lat,lon", usable as an ID.
func (p Position) String() string { return fmt.Sprintf("%.4f,%.4f", p.Lat, p.Lon) }

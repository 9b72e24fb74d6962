package compat

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"shindo.dev/lib/metadb"
	"shindo.dev/lib/township"
)

// AppendReportList appends the body of GET /api/v2/eq/report.
func AppendReportList(b []byte, list []metadb.Report) []byte {
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSummary(b, &list[i])
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendSummary appends a report's fields, leaving its object open.
func appendSummary(b []byte, r *metadb.Report) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"lat":`...)
	b = appendFloat(b, r.Lat)
	b = append(b, `,"lon":`...)
	b = appendFloat(b, r.Lon)
	b = append(b, `,"loc":`...)
	b = appendString(b, appLocation(r))
	b = append(b, `,"depth":`...)
	b = appendFloat(b, r.DepthKm)
	b = append(b, `,"mag":`...)
	b = appendFloat(b, r.Magnitude)
	b = append(b, `,"int":`...)
	b = strconv.AppendInt(b, int64(r.MaxLevel), 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, r.TimeMs, 10)
	b = append(b, `,"trem":`...)
	b = strconv.AppendInt(b, r.TremMs, 10)
	b = append(b, `,"md5":`...)
	return appendString(b, r.MD5)
}

// placeClause is what TREM-Lite takes a report's place from: it reads
// the location with /位於(.+?)(?=\))/ and throws when that does not match
// (src/js/index/core/audio.js:303 of ExpTechTW/TREM-Lite at 9bbaccf), so
// the report's alert is neither shown nor spoken. (JavaScript's "." is not
// a line end.)
var placeClause = regexp.MustCompile(`位於[^\n\r\x{2028}\x{2029}]+\)`)

// appLocation is a report's location as the apps get it: as it was
// given when it names its place as the Central Weather Administration's
// reports do, which the reports made from detections always do
// (township.ReportLocation); otherwise, a location entered by hand, with
// the epicentre's place added in that form, or made whole from the
// epicentre when none was given.
func appLocation(r *metadb.Report) string {
	switch {
	case placeClause.MatchString(r.Location):
		return r.Location
	case strings.TrimSpace(r.Location) == "":
		return township.ReportLocation(r.Lat, r.Lon)
	}
	return r.Location + " (位於" + township.Place(r.Lat, r.Lon) + ")"
}

// AppendReport appends the body of GET /api/v2/eq/report/{id}: the
// summary fields and "list", the areas grouped by county (in order of
// their lowest code) and township (by code). stations place townships
// lib/township has no seat for.
func AppendReport(b []byte, r *metadb.Report, stations []metadb.StationInfo) []byte {
	b = appendSummary(b, r)
	b = append(b, `,"list":{`...)
	type town struct {
		name     string
		lat, lon float64
		level    int
	}
	type county struct {
		name  string
		level int
		towns []town
	}
	var counties []*county
	byName := map[string]*county{}
	for _, a := range r.Areas { // ordered by code
		if a.Level < 1 {
			// The apps' reports list the areas that felt the earthquake;
			// TREM-Lite's report alert indexes its towns by intensity 1–9
			// and throws on any other (audio.js:340).
			continue
		}
		cn, tn := names(a.Code)
		c := byName[cn]
		if c == nil {
			c = &county{name: cn}
			byName[cn] = c
			counties = append(counties, c)
		}
		lat, lon := Place(a.Code, stations)
		c.towns = append(c.towns, town{name: tn, lat: lat, lon: lon, level: a.Level})
		c.level = max(c.level, a.Level)
	}
	if len(counties) == 0 {
		// TREM-Lite names the county of the highest intensity in a new
		// report's alert (audio.js:311) and throws on none; the throw
		// also keeps its report list's handler of the same event from
		// running, so the report never shows and is fetched again at
		// every poll (report.js:398-404). A report nobody felt names the
		// epicentre's nearest county at intensity 0, with no towns.
		counties = append(counties, &county{name: nearestCounty(r.Lat, r.Lon)})
	}
	for i, c := range counties {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.name)
		b = append(b, `:{"int":`...)
		b = strconv.AppendInt(b, int64(c.level), 10)
		b = append(b, `,"town":{`...)
		for j, t := range c.towns {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t.name)
			b = append(b, `:{"lat":`...)
			b = appendFloat(b, t.lat)
			b = append(b, `,"lon":`...)
			b = appendFloat(b, t.lon)
			b = append(b, `,"int":`...)
			b = strconv.AppendInt(b, int64(t.level), 10)
			b = append(b, '}')
		}
		b = append(b, "}}"...)
	}
	return append(b, "}}"...)
}

// taiwan is the clients' time zone (no daylight saving since 1979).
var taiwan = time.FixedZone("Asia/Taipei", 8*3600)

// AppendStations appends the body of GET /api/v1/trem/station, stations
// in the order given (by ID).
func AppendStations(b []byte, list []metadb.StationInfo) []byte {
	b = append(b, '{')
	for i := range list {
		st := &list[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, st.ID)
		b = append(b, `:{"net":`...)
		b = appendString(b, st.Net)
		b = append(b, `,"info":[{"code":`...)
		b = strconv.AppendUint(b, uint64(st.Code), 10)
		b = append(b, `,"lat":`...)
		b = appendFloat(b, st.Lat)
		b = append(b, `,"lon":`...)
		b = appendFloat(b, st.Lon)
		b = append(b, `,"time":"`...)
		b = st.CreatedAt.In(taiwan).AppendFormat(b, "2006-01-02")
		b = append(b, `"}],"work":`...)
		b = strconv.AppendBool(b, st.Active)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendStationCSV appends the body of GET /resource/station:
//
//	loc_code,id,lat,lon,floor,code,net,time,work
//	970,HUA01,23.991,121.611,0,970,MS-Net,2024-04-03,1
//
// code (and loc_code, the app's location column) is the township's postal
// code, floor 0 (a station's floor is not recorded), time the day it was
// provisioned (Taiwan time), work 1 while in service. Fields are never
// quoted (the app splits on commas): a comma or line break in an ID or
// network, which provisioning refuses anyway, is replaced by a space.
func AppendStationCSV(b []byte, list []metadb.StationInfo) []byte {
	b = append(b, "loc_code,id,lat,lon,floor,code,net,time,work\n"...)
	for i := range list {
		st := &list[i]
		b = strconv.AppendUint(b, uint64(st.Code), 10)
		b = append(b, ',')
		b = append(b, csvField(st.ID)...)
		b = append(b, ',')
		b = appendFloat(b, st.Lat)
		b = append(b, ',')
		b = appendFloat(b, st.Lon)
		b = append(b, ",0,"...)
		b = strconv.AppendUint(b, uint64(st.Code), 10)
		b = append(b, ',')
		b = append(b, csvField(st.Net)...)
		b = append(b, ',')
		b = st.CreatedAt.In(taiwan).AppendFormat(b, "2006-01-02")
		if st.Active {
			b = append(b, ",1\n"...)
		} else {
			b = append(b, ",0\n"...)
		}
	}
	return b
}

func csvField(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ',' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// Place returns a township's position: its seat if lib/township knows it,
// else the mean position of the stations with its code, else 0, 0.
func Place(code uint32, stations []metadb.StationInfo) (lat, lon float64) {
	if t, ok := township.Lookup(code); ok {
		return t.Lat, t.Lon
	}
	n := 0
	for _, st := range stations {
		if st.Code == code {
			lat, lon, n = lat+st.Lat, lon+st.Lon, n+1
		}
	}
	if n == 0 {
		return 0, 0
	}
	return math.Round(lat/float64(n)*1000) / 1000, math.Round(lon/float64(n)*1000) / 1000
}

// needStations reports whether some area has no seat in lib/township.
func needStations(areas []metadb.AreaLevel) bool {
	for _, a := range areas {
		if _, ok := township.Lookup(a.Code); !ok {
			return true
		}
	}
	return false
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendFloat writes f in its shortest exact decimal form; NaN and
// infinities, which JSON cannot carry, as 0.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// nearestCounty is the county or city nearest a position, otherCounty for
// a position that is not a coordinate.
func nearestCounty(lat, lon float64) string {
	t, km := township.Nearest(lat, lon)
	if math.IsInf(km, 1) {
		return otherCounty
	}
	return t.County
}

// otherCounty holds the townships of codes without a name.
const otherCounty = "其他"

// names returns a township's county and township in Chinese, as the apps
// label them; a code without a name is in county 其他 under its number.
func names(code uint32) (county, town string) {
	if t, ok := township.Lookup(code); ok {
		return t.County, t.Name
	}
	return otherCounty, strconv.FormatUint(uint64(code), 10)
}

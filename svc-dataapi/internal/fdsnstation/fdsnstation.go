// Package fdsnstation is fdsnws-station 1 (FDSN Web Service
// Specifications 1.2): the network's station metadata as StationXML 1.2 or
// the services' text format, selected by SEED codes, time, a geographic
// box or a radius, at the levels network, station, channel and response;
// with the service's version and its WADL description. It answers from the
// registry — the same codes the archive writes its data under, the
// position, elevation and count size stations are provisioned with, and
// their service dates — so it needs no database round trip.
package fdsnstation

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-dataapi/internal/fdsn"
)

// Version is the fdsnws-station specification version served.
const Version = "1.1.0"

// Base is where the service's routes are.
const Base = "/fdsnws/station/1/"

// spec are the query's parameters (fdsnws-station 1.1, "query method").
var spec = &fdsn.Spec{Params: append(fdsn.Common("xml", "text"),
	fdsn.Param{Name: "startbefore", Kind: fdsn.Time},
	fdsn.Param{Name: "startafter", Kind: fdsn.Time},
	fdsn.Param{Name: "endbefore", Kind: fdsn.Time},
	fdsn.Param{Name: "endafter", Kind: fdsn.Time},
	fdsn.Param{Name: "minlatitude", Aliases: []string{"minlat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	fdsn.Param{Name: "maxlatitude", Aliases: []string{"maxlat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	fdsn.Param{Name: "minlongitude", Aliases: []string{"minlon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	fdsn.Param{Name: "maxlongitude", Aliases: []string{"maxlon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	fdsn.Param{Name: "latitude", Aliases: []string{"lat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	fdsn.Param{Name: "longitude", Aliases: []string{"lon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	fdsn.Param{Name: "minradius", Kind: fdsn.Float, Min: 0, Max: 180},
	fdsn.Param{Name: "maxradius", Kind: fdsn.Float, Min: 0, Max: 180},
	fdsn.Param{Name: "level", Kind: fdsn.Enum, Options: []string{"station", "network", "channel", "response"}, Default: "station"},
	fdsn.Param{Name: "includerestricted", Kind: fdsn.Bool, Default: "true"},
	// Taken at their defaults only (refused otherwise, with the reason),
	// so not listed in the WADL.
	fdsn.Param{Name: "includeavailability", Kind: fdsn.Bool, Default: "false", Unlisted: true},
	fdsn.Param{Name: "matchtimeseries", Kind: fdsn.Bool, Default: "false", Unlisted: true},
	fdsn.Param{Name: "updatedafter", Kind: fdsn.Time, Unlisted: true},
)}

// Handler serves the service.
type Handler struct {
	stations func() *registry.Set
	// Network describes each SEED network code in its metadata; a code
	// it lacks is described by DefaultDescription.
	Network map[string]string
	log     *slog.Logger
	now     func() time.Time
}

// DefaultDescription describes a network the Handler has no description of.
const DefaultDescription = "shindo real-time strong-motion network"

// New returns a Handler answering from the registry stations returns.
func New(stations func() *registry.Set, log *slog.Logger) *Handler {
	return &Handler{stations: stations, log: log, now: time.Now}
}

// Register adds the service's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Base+"query", h.query)
	mux.HandleFunc("POST "+Base+"query", h.query)
	spec.Describe(mux, Base, Version, "application/xml", "text/plain")
	mux.HandleFunc("GET "+Base+"{$}", h.usage)
}

// request is a parsed query: its selections (one for a GET) and options.
type request struct {
	q    *fdsn.Query
	sels []fdsn.Selection
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	req, err := parse(r)
	if err != nil {
		h.fail(w, r, fdsn.StatusOf(err), err.Error())
		return
	}
	level, format := req.q.Enum("level"), req.q.Enum("format")
	switch {
	case format == "text" && level == "response":
		h.fail(w, r, http.StatusBadRequest, "format=text has no response level: ask for format=xml, or level=channel")
		return
	case req.q.Bool("includeavailability"):
		h.fail(w, r, http.StatusBadRequest, "includeavailability=true is not supported: fdsnws-availability answers what the archive holds")
		return
	case req.q.Has("updatedafter"):
		h.fail(w, r, http.StatusBadRequest, "updatedafter is not supported: the registry keeps no time of a station's last change")
		return
	case req.q.Bool("matchtimeseries"):
		h.fail(w, r, http.StatusBadRequest, "matchtimeseries=true is not supported: every station's channels are archived while it is in service")
		return
	}
	nets := h.collect(req, level)
	if len(nets) == 0 {
		w.WriteHeader(req.q.NoData())
		return
	}
	if format == "text" {
		writeText(w, nets, level)
		return
	}
	doc := document{SchemaVersion: SchemaVersion, Source: "shindo", Sender: "shindo", Module: "shindo fdsnws-station " + Version,
		ModuleURI: fdsn.Scheme(r) + "://" + r.Host + r.URL.RequestURI(), Created: xmlTime(h.now()), Networks: nets}
	w.Header().Set("Content-Type", "application/xml")
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(xml.Header) // a write error sticks: Flush reports it
	_ = writeXML(bw, &doc)
	_ = bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		h.log.DebugContext(r.Context(), "stationxml cut short", slog.Any("error", err)) // the client went away
	}
}

// parse reads a GET query or a POST body.
func parse(r *http.Request) (*request, error) {
	if r.Method == http.MethodPost {
		q, sels, err := spec.ParsePost(r.Body)
		if err != nil {
			if errors.Is(err, fdsn.ErrTooLarge) {
				return nil, &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: err.Error()}
			}
			return nil, err
		}
		return &request{q: q, sels: sels}, nil
	}
	q, err := spec.ParseQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return &request{q: q, sels: []fdsn.Selection{q.Selection()}}, nil
}

// epoch is a station's time in service: [start, end), end zero while in
// service.
type epoch struct{ start, end time.Time }

// inWindow applies starttime, endtime and the start/end before/after
// filters (fdsnws-station 1.1: an open end is after any time).
func (req *request) inWindow(sel fdsn.Selection, e epoch) bool {
	if !sel.Overlaps(e.start, e.end) {
		return false
	}
	q := req.q
	if t, ok := q.Time("startbefore"); ok && !e.start.Before(t) {
		return false
	}
	if t, ok := q.Time("startafter"); ok && !e.start.After(t) {
		return false
	}
	if t, ok := q.Time("endbefore"); ok && (e.end.IsZero() || !e.end.Before(t)) {
		return false
	}
	if t, ok := q.Time("endafter"); ok && !e.end.IsZero() && !e.end.After(t) {
		return false
	}
	return true
}

// inArea applies the box and the radius.
func (req *request) inArea(lat, lon float64) bool {
	q := req.q
	if v, ok := q.Float("minlatitude"); ok && lat < v {
		return false
	}
	if v, ok := q.Float("maxlatitude"); ok && lat > v {
		return false
	}
	minLon, okMin := q.Float("minlongitude")
	maxLon, okMax := q.Float("maxlongitude")
	switch {
	case okMin && okMax && minLon > maxLon: // a box across the antimeridian
		if lon < minLon && lon > maxLon {
			return false
		}
	case okMin && lon < minLon, okMax && lon > maxLon:
		return false
	}
	if q.Has("minradius") || q.Has("maxradius") || q.Has("latitude") || q.Has("longitude") {
		clat, _ := q.Float("latitude")
		clon, _ := q.Float("longitude")
		d := fdsn.DistanceDeg(clat, clon, lat, lon)
		if v, ok := q.Float("minradius"); ok && d < v {
			return false
		}
		if v, ok := q.Float("maxradius"); ok && d > v {
			return false
		}
	}
	return true
}

// collect builds the networks the request selects, down to level.
func (h *Handler) collect(req *request, level string) []network {
	set := h.stations()
	if set == nil {
		return nil
	}
	type netAcc struct {
		network
		first time.Time
		open  bool
		last  time.Time
	}
	byCode := map[string]*netAcc{}
	var order []string
	total := map[string]int{}
	for _, st := range set.All() {
		total[st.SEED.Network]++
	}
	for _, st := range set.All() {
		e := epoch{start: st.Created, end: st.Retired}
		if !req.inArea(st.Lat, st.Lon) {
			continue
		}
		var chans []channel
		matched := false
		for _, sel := range req.sels {
			if !req.inWindow(sel, e) || !fdsn.MatchAny(sel.Network, st.SEED.Network) || !fdsn.MatchAny(sel.Station, st.SEED.Station) {
				continue
			}
			for _, c := range seedcode.Channels {
				if !sel.Matches(st.SEED.Network, st.SEED.Station, st.SEED.Location, c.Code) {
					continue
				}
				matched = true
				if (level == "channel" || level == "response") && !slices.ContainsFunc(chans, func(x channel) bool { return x.Code == c.Code }) {
					chans = append(chans, describeChannel(st, c, e, level == "response"))
				}
			}
		}
		if !matched {
			continue
		}
		acc := byCode[st.SEED.Network]
		if acc == nil {
			acc = &netAcc{network: network{node: node{Code: st.SEED.Network, RestrictedStatus: "open"},
				Description: h.describeNetwork(st.SEED.Network), TotalNumberStations: total[st.SEED.Network]}}
			byCode[st.SEED.Network] = acc
			order = append(order, st.SEED.Network)
		}
		if acc.first.IsZero() || e.start.Before(acc.first) {
			acc.first = e.start
		}
		if e.end.IsZero() {
			acc.open = true
		} else if e.end.After(acc.last) {
			acc.last = e.end
		}
		acc.SelectedNumberStations++
		if level == "network" {
			continue
		}
		acc.Stations = append(acc.Stations, describeStation(st, e, chans, level))
	}
	slices.Sort(order)
	nets := make([]network, 0, len(order))
	for _, code := range order {
		acc := byCode[code]
		// The registry is in id order; a document lists stations by code.
		slices.SortFunc(acc.Stations, func(a, b station) int { return strings.Compare(a.Code, b.Code) })
		acc.StartDate = xmlTime(acc.first)
		if !acc.open {
			acc.EndDate = xmlTime(acc.last)
		}
		nets = append(nets, acc.network)
	}
	return nets
}

func (h *Handler) describeNetwork(code string) string {
	if d, ok := h.Network[code]; ok {
		return d
	}
	return DefaultDescription
}

func describeStation(st *registry.Station, e epoch, chans []channel, level string) station {
	s := station{
		node:     node{Code: st.SEED.Station, StartDate: xmlTime(e.start), EndDate: xmlTime(e.end), RestrictedStatus: "open"},
		Latitude: st.Lat, Longitude: st.Lon, Elevation: st.Elevation,
		Site:         site{Name: siteName(st)},
		CreationDate: xmlTime(e.start), TerminationDate: xmlTime(e.end),
	}
	if st.ID != st.SEED.Station {
		s.AlternateCode = st.ID // the id the REST routes and the apps know it by
	}
	if level == "channel" || level == "response" {
		total, selected := len(seedcode.Channels), len(chans)
		s.TotalNumberChannels, s.SelectedNumberChannels = &total, &selected
		s.Channels = chans
	}
	return s
}

func siteName(st *registry.Station) string {
	if st.Name != "" {
		return st.Name
	}
	return st.ID
}

// describeChannel is one channel of st; with its response (the overall
// sensitivity) when withResponse.
func describeChannel(st *registry.Station, c seedcode.Channel, e epoch, withResponse bool) channel {
	ch := channel{
		node:         node{Code: c.Code, StartDate: xmlTime(e.start), EndDate: xmlTime(e.end), RestrictedStatus: "open"},
		LocationCode: st.SEED.Location, Description: c.Description,
		Latitude: st.Lat, Longitude: st.Lon, Elevation: st.Elevation,
		Azimuth: c.Azimuth, Dip: c.Dip, Type: []string{"CONTINUOUS"}, SampleRate: c.RateHz,
	}
	if c.Counts {
		ch.Sensor = &equipment{Type: "accelerometer", Description: sensorDescription}
	} else {
		ch.Type = append(ch.Type, "SYNTHESIZED")
	}
	ch.sens = sensitivityOf(st, c)
	if withResponse {
		ch.Response = &response{InstrumentSensitivity: ch.sens, Stages: []stage{flatStage(ch.sens, c)}}
	}
	return ch
}

// flatStage is a channel's response as one stage: flat (a filter without
// poles or zeros) from its input units to its output units, with the
// overall sensitivity as its gain, and for counts the decimation of a
// digital output at the channel's rate. The sensitivity alone says as
// much, but readers work from the stages: ObsPy's remove_sensitivity,
// remove_response and recalculate_overall_sensitivity fail on a response
// without any (obspy/core/trace.py, Trace.remove_sensitivity, reads
// response_stages[0]), and evalresp requires a digital stage's decimation.
func flatStage(sens sensitivity, c seedcode.Channel) stage {
	st := stage{Number: 1,
		PolesZeros: polesZeros{InputUnits: sens.InputUnits, OutputUnits: sens.OutputUnits,
			PzTransferFunctionType: "LAPLACE (RADIANS/SECOND)", NormalizationFactor: 1, NormalizationFrequency: sens.Frequency},
		StageGain: stageGain{Value: sens.Value, Frequency: sens.Frequency}}
	if c.Counts {
		st.Decimation = &decimation{InputSampleRate: c.RateHz, Factor: 1}
	}
	return st
}

// sensorDescription is every station's accelerometer.
const sensorDescription = "MEMS accelerometer"

// sensitivityOf is a channel's overall sensitivity: for counts, counts per
// m/s² from the station's count size, at 1 Hz (a MEMS sensor is flat there
// and down to DC); a derived channel's samples are the value itself.
func sensitivityOf(st *registry.Station, c seedcode.Channel) sensitivity {
	if c.Counts {
		return sensitivity{Value: seedcode.CountsPerMS2(st.Scale()), Frequency: 1,
			InputUnits:  units{Name: c.Units, Description: c.UnitsDescription},
			OutputUnits: units{Name: "count", Description: "digital counts"}}
	}
	u := units{Name: c.Units, Description: c.UnitsDescription}
	return sensitivity{Value: 1, Frequency: 0.1, InputUnits: u, OutputUnits: u}
}

// xmlTime writes an xs:dateTime in UTC with microseconds; "" for zero.
func xmlTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// writeText writes the services' text format (fdsnws-station 1.1, "text
// output"): a header line starting with #, then one |-separated line per
// network, station or channel.
func writeText(w http.ResponseWriter, nets []network, level string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	bw := bufio.NewWriterSize(w, 64<<10)
	defer func() { _ = bw.Flush() }() // a client gone midway is nothing to report
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	tt := func(s string) string { return strings.TrimSuffix(s, "Z") }
	switch level {
	case "network":
		_, _ = bw.WriteString("#Network|Description|StartTime|EndTime|TotalStations\n")
		for _, n := range nets {
			fmt.Fprintf(bw, "%s|%s|%s|%s|%d\n", n.Code, n.Description, tt(n.StartDate), tt(n.EndDate), n.SelectedNumberStations)
		}
	case "station":
		_, _ = bw.WriteString("#Network|Station|Latitude|Longitude|Elevation|SiteName|StartTime|EndTime\n")
		for _, n := range nets {
			for _, s := range n.Stations {
				fmt.Fprintf(bw, "%s|%s|%s|%s|%s|%s|%s|%s\n", n.Code, s.Code, f(s.Latitude), f(s.Longitude), f(s.Elevation),
					textField(s.Site.Name), tt(s.StartDate), tt(s.EndDate))
			}
		}
	default:
		_, _ = bw.WriteString("#Network|Station|Location|Channel|Latitude|Longitude|Elevation|Depth|Azimuth|Dip|SensorDescription|Scale|ScaleFreq|ScaleUnits|SampleRate|StartTime|EndTime\n")
		for _, n := range nets {
			for _, s := range n.Stations {
				for _, c := range s.Channels {
					sens, sensor := c.sens, ""
					if c.Sensor != nil {
						sensor = c.Sensor.Description
					}
					fmt.Fprintf(bw, "%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n", n.Code, s.Code, c.LocationCode, c.Code,
						f(c.Latitude), f(c.Longitude), f(c.Elevation), f(c.Depth), f(c.Azimuth), f(c.Dip), sensor,
						f(sens.Value), f(sens.Frequency), sens.InputUnits.Name, f(c.SampleRate), tt(c.StartDate), tt(c.EndDate))
				}
			}
		}
	}
}

// textField keeps a free-text value on its line and out of the columns.
func textField(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '|' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, detail string) {
	fdsn.WriteError(w, r, status, detail, fdsn.Scheme(r)+"://"+r.Host+Base, Version)
}

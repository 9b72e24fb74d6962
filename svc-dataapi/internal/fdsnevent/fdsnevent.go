// Package fdsnevent is fdsnws-event 1 (FDSN Web Service Specifications
// 1.2): the network's earthquake reports as QuakeML 1.2 (Basic Event
// Description) or the services' text format, selected by origin time, a
// box or a radius, depth, magnitude and its type, update time or event
// ID, ordered by time or magnitude, with limit and offset.
//
// Each report is one event with one origin and one magnitude. A report the
// network's trigger made of a final detection is automatic, its depth the
// one the trigger assigns (operator assigned) and its magnitude of type Mi
// (from the stations' real-time intensities, package detect); a report an
// operator posted is manual, its magnitude of type M (unspecified). The
// reports come from the metadata database in pages, so a request costs
// what it selects; the selection is bounded (413 beyond).
package fdsnevent

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"shindo.dev/lib/metadb"
	"shindo.dev/svc-dataapi/internal/fdsn"
)

// Version is the fdsnws-event specification version served.
const Version = "1.1.0"

// Base is where the service's routes are.
const Base = "/fdsnws/event/1/"

// Catalog and Contributor name this network's reports.
const (
	Catalog     = "shindo"
	Contributor = "shindo"
)

// Magnitude types: of the trigger's estimate from intensities, and of a
// posted report, whose type the poster does not state.
const (
	MagTypeIntensity = "Mi"
	MagTypeUnknown   = "M"
)

// MaxEvents bounds an answer; MaxScanned the reports read for one.
const (
	MaxEvents  = 20_000
	MaxScanned = metadb.MaxOffset
)

// spec are the query's parameters (fdsnws-event 1.1, "query method").
var spec = &fdsn.Spec{Params: []fdsn.Param{
	{Name: "starttime", Aliases: []string{"start"}, Kind: fdsn.Time},
	{Name: "endtime", Aliases: []string{"end"}, Kind: fdsn.Time},
	{Name: "minlatitude", Aliases: []string{"minlat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	{Name: "maxlatitude", Aliases: []string{"maxlat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	{Name: "minlongitude", Aliases: []string{"minlon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	{Name: "maxlongitude", Aliases: []string{"maxlon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	{Name: "latitude", Aliases: []string{"lat"}, Kind: fdsn.Float, Min: -90, Max: 90},
	{Name: "longitude", Aliases: []string{"lon"}, Kind: fdsn.Float, Min: -180, Max: 180},
	{Name: "minradius", Kind: fdsn.Float, Min: 0, Max: 180},
	{Name: "maxradius", Kind: fdsn.Float, Min: 0, Max: 180},
	{Name: "mindepth", Kind: fdsn.Float, Min: -10, Max: 1000},
	{Name: "maxdepth", Kind: fdsn.Float, Min: -10, Max: 1000},
	{Name: "minmagnitude", Aliases: []string{"minmag"}, Kind: fdsn.Float, Min: -5, Max: 12},
	{Name: "maxmagnitude", Aliases: []string{"maxmag"}, Kind: fdsn.Float, Min: -5, Max: 12},
	{Name: "magnitudetype", Aliases: []string{"magtype"}, Kind: fdsn.Text},
	{Name: "includeallorigins", Kind: fdsn.Bool, Default: "false"},
	{Name: "includeallmagnitudes", Kind: fdsn.Bool, Default: "false"},
	{Name: "includearrivals", Kind: fdsn.Bool, Default: "false"},
	{Name: "eventid", Kind: fdsn.Text},
	{Name: "limit", Kind: fdsn.Int, Min: 1, Max: MaxEvents},
	{Name: "offset", Kind: fdsn.Int, Min: 1, Max: MaxScanned},
	{Name: "orderby", Kind: fdsn.Enum, Options: []string{"time", "time-asc", "magnitude", "magnitude-asc"}, Default: "time"},
	{Name: "catalog", Kind: fdsn.Text},
	{Name: "contributor", Kind: fdsn.Text},
	{Name: "updatedafter", Kind: fdsn.Time},
	{Name: "format", Kind: fdsn.Enum, Options: []string{"xml", "text"}, Default: "xml"},
	{Name: "nodata", Kind: fdsn.Enum, Options: []string{"204", "404"}, Default: "204"},
}}

// Store is what the service reads (metadb.Store).
type Store interface {
	ListReports(ctx context.Context, f metadb.ReportFilter) ([]metadb.Report, error)
	GetReport(ctx context.Context, id string) (*metadb.Report, error)
	ReportStations(ctx context.Context, ids []string) (map[string][]metadb.StationPeak, error)
}

// MaxPeaks bounds the station peaks one answer with includearrivals=true
// carries (three amplitudes each).
const MaxPeaks = 100_000

// Handler serves the service.
type Handler struct {
	store   Store // nil without a database
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
}

// New returns a Handler reading store (nil: every query is a 503), each
// request's database work bounded by timeout.
func New(store Store, timeout time.Duration, log *slog.Logger) *Handler {
	return &Handler{store: store, timeout: timeout, log: log, now: time.Now}
}

// Register adds the service's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Base+"query", h.query)
	spec.Describe(mux, Base, Version, "application/xml", "text/plain")
	mux.HandleFunc("GET "+Base+"catalogs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = io.WriteString(w, xml.Header+"<Catalogs>\n  <Catalog>"+Catalog+"</Catalog>\n</Catalogs>\n")
	})
	mux.HandleFunc("GET "+Base+"contributors", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = io.WriteString(w, xml.Header+"<Contributors>\n  <Contributor>"+Contributor+"</Contributor>\n</Contributors>\n")
	})
	mux.HandleFunc("GET "+Base+"{$}", h.usage)
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	q, err := spec.ParseQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, fdsn.StatusOf(err), err.Error())
		return
	}
	if h.store == nil {
		h.fail(w, r, http.StatusServiceUnavailable, "the event service reads the metadata database, which this data API runs without")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	events, err := h.collect(ctx, q)
	switch {
	case errors.Is(err, metadb.ErrNotFound):
		err = nil
	case err != nil && fdsn.StatusOf(err) == http.StatusInternalServerError:
		h.log.WarnContext(r.Context(), "fdsnws-event: reading the reports failed", slog.Any("error", err))
		w.Header().Set("Retry-After", "5")
		h.fail(w, r, http.StatusServiceUnavailable, "the metadata database did not answer in time")
		return
	case err != nil:
		h.fail(w, r, fdsn.StatusOf(err), err.Error())
		return
	}
	if len(events) == 0 {
		w.WriteHeader(q.NoData())
		return
	}
	if q.Enum("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeText(w, events)
		return
	}
	var peaks map[string][]metadb.StationPeak
	if q.Bool("includearrivals") {
		if peaks, err = h.peaks(ctx, events); err != nil {
			if fdsn.StatusOf(err) == http.StatusInternalServerError {
				h.log.WarnContext(r.Context(), "fdsnws-event: reading the station peaks failed", slog.Any("error", err))
				w.Header().Set("Retry-After", "5")
				h.fail(w, r, http.StatusServiceUnavailable, "the metadata database did not answer in time")
				return
			}
			h.fail(w, r, fdsn.StatusOf(err), err.Error())
			return
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := writeQuakeML(bw, h.now(), events, peaks); err != nil {
		h.log.DebugContext(r.Context(), "quakeml cut short", slog.Any("error", err)) // the client went away
		return
	}
	if err := bw.Flush(); err != nil {
		h.log.DebugContext(r.Context(), "quakeml cut short", slog.Any("error", err))
	}
}

// peaks reads the station peaks of events, a page of reports at a time,
// up to MaxPeaks in all.
func (h *Handler) peaks(ctx context.Context, events []metadb.Report) (map[string][]metadb.StationPeak, error) {
	out := map[string][]metadb.StationPeak{}
	n := 0
	for page := range slices.Chunk(events, metadb.MaxPage) {
		ids := make([]string, len(page))
		for i := range page {
			ids[i] = page[i].ID
		}
		got, err := h.store.ReportStations(ctx, ids)
		if err != nil {
			return nil, err
		}
		for id, p := range got {
			out[id] = p
			n += len(p)
		}
		if n > MaxPeaks {
			return nil, &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf(
				"includearrivals=true: the events selected have more than %d station amplitudes; narrow the query or ask without them", MaxPeaks)}
		}
	}
	return out, nil
}

// collect reads the reports the request selects, in its order, after its
// offset and up to its limit.
func (h *Handler) collect(ctx context.Context, q *fdsn.Query) ([]metadb.Report, error) {
	if id := q.Text("eventid"); id != "" {
		r, err := h.store.GetReport(ctx, id)
		if err != nil {
			return nil, err
		}
		return []metadb.Report{*r}, nil
	}
	for _, name := range []string{"catalog", "contributor"} {
		if v := q.Text(name); v != "" && !strings.EqualFold(v, Catalog) {
			return nil, nil // no other catalog, no other contributor
		}
	}
	f := metadb.ReportFilter{Limit: metadb.MaxPage}
	if t, ok := q.Time("starttime"); ok {
		ms := t.UnixMilli()
		f.FromMs = &ms
	}
	if t, ok := q.Time("endtime"); ok {
		ms := t.UnixMilli()
		f.ToMs = &ms
	}
	f.MinMagnitude, f.MaxMagnitude = floatPtr(q, "minmagnitude"), floatPtr(q, "maxmagnitude")
	f.MinDepthKm, f.MaxDepthKm = floatPtr(q, "mindepth"), floatPtr(q, "maxdepth")
	f.MinLat, f.MaxLat = floatPtr(q, "minlatitude"), floatPtr(q, "maxlatitude")
	minLon, maxLon := floatPtr(q, "minlongitude"), floatPtr(q, "maxlongitude")
	across := minLon != nil && maxLon != nil && *minLon > *maxLon // a box across the antimeridian
	if !across {
		f.MinLon, f.MaxLon = minLon, maxLon
	}
	switch q.Enum("orderby") {
	case "time-asc":
		f.Ascending = true
	case "magnitude":
		f.Sort = metadb.SortMagnitude
	case "magnitude-asc":
		f.Sort, f.Ascending = metadb.SortMagnitude, true
	}
	skip := 0
	if v, ok := q.Float("offset"); ok {
		skip = int(v) - 1
	}
	limit := MaxEvents
	limited := false
	if v, ok := q.Float("limit"); ok {
		limit, limited = int(v), true
	}
	updated, byUpdate := q.Time("updatedafter")
	magType := q.Text("magnitudetype")
	var out []metadb.Report
	for {
		page, err := h.store.ListReports(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			switch {
			case across && r.Lon < *minLon && r.Lon > *maxLon,
				byUpdate && !r.UpdatedAt.After(updated),
				magType != "" && !strings.EqualFold(magType, magnitudeType(&r)),
				!inRadius(q, r.Lat, r.Lon):
				continue
			case skip > 0:
				skip--
				continue
			}
			if len(out) == limit {
				if limited {
					return out, nil
				}
				return nil, &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf(
					"more than %d events match: narrow the selection, or page through it with limit and offset", MaxEvents)}
			}
			out = append(out, r)
		}
		if len(page) < f.Limit {
			return out, nil
		}
		if f.Offset += len(page); f.Offset > MaxScanned {
			return nil, &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf(
				"the selection reads more than %d reports: narrow it (time, box, magnitude)", MaxScanned)}
		}
	}
}

func floatPtr(q *fdsn.Query, name string) *float64 {
	v, ok := q.Float(name)
	if !ok {
		return nil
	}
	return &v
}

// inRadius applies latitude, longitude, minradius and maxradius (degrees;
// the point defaults to 0, 0 as the specification says).
func inRadius(q *fdsn.Query, lat, lon float64) bool {
	minR, okMin := q.Float("minradius")
	maxR, okMax := q.Float("maxradius")
	if !okMin && !okMax {
		return true
	}
	clat, _ := q.Float("latitude")
	clon, _ := q.Float("longitude")
	d := fdsn.DistanceDeg(clat, clon, lat, lon)
	return (!okMin || d >= minR) && (!okMax || d <= maxR)
}

// magnitudeType is a report's magnitude type.
func magnitudeType(r *metadb.Report) string {
	if r.SourceDetectionID != "" {
		return MagTypeIntensity
	}
	return MagTypeUnknown
}

// resourceID makes a QuakeML resource identifier of a report ID: its
// characters are those of an identifier but the colon, which becomes ~
// (not a report ID's character, so the mapping is one to one).
func resourceID(kind, id string) string {
	return "smi:" + Catalog + "/" + kind + "/" + strings.ReplaceAll(id, ":", "~")
}

// writeText writes the services' text format: a header line, then one
// line per event, fields separated by |.
func writeText(w io.Writer, events []metadb.Report) {
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString("#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|MagAuthor|EventLocationName|EventType\n")
	for i := range events {
		r := &events[i]
		loc := strings.NewReplacer("|", "/", "\n", " ", "\r", " ").Replace(r.Location)
		fmt.Fprintf(bw, "%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|earthquake\n",
			r.ID, timeText(r.TimeMs), num(r.Lat), num(r.Lon), num(r.DepthKm), Catalog, Catalog, Contributor, r.ID,
			magnitudeType(r), num(r.Magnitude), Catalog, loc)
	}
	_ = bw.Flush() // a client gone away is not ours to report
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func timeText(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000")
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, detail string) {
	fdsn.WriteError(w, r, status, detail, fdsn.Scheme(r)+"://"+r.Host+Base, Version)
}

// usage is the page errors point to: what the service answers.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	base := fdsn.Scheme(r) + "://" + r.Host + Base
	fmt.Fprintf(w, `fdsnws-event %s (FDSN Web Service Specifications 1.2): this network's earthquake reports.

%squery?start=2026-12-01&minmag=4&orderby=magnitude   QuakeML 1.2; format=text for the text format
%squery?eventid=ID
%scatalogs, %scontributors, %sversion, %sapplication.wadl

Magnitude types: %s (the network trigger's, from station intensities), %s (a posted report's).
includearrivals=true adds the stations' amplitudes of a triggered report: PGA, PGV, JMA intensity.
Times are UTC, YYYY-MM-DDThh:mm:ss[.ssssss]; offset counts from 1; nodata=204 (default) or 404.
An answer holds at most %d events: page with limit and offset.
`, Version, base, base, base, base, base, base, MagTypeIntensity, MagTypeUnknown, MaxEvents)
}

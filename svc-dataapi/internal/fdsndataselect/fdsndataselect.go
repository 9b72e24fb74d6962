// Package fdsndataselect is fdsnws-dataselect 1 (FDSN Web Service
// Specifications 1.2): the archive's time series as miniSEED 2.4, selected
// by SEED codes (wildcards and lists) and a time window, by GET or by a POST
// body of up to a thousand selections.
//
// It answers from this core's svc-waveform over its Export stream: records
// of 1024 bytes, Steim-2 counts for BNZ, BNN and BNE, 32-bit floats for the
// intensity series MXI, MXA and MXV, cut to the window, the samples acked
// to ingest but not yet on disk included. Each part is written as it comes,
// so an answer of any length holds one part (64 KiB) in memory; a client
// that stops reading is cut after WriteStall.
//
// Where the data API shares the core's disk with svc-waveform (New's sds,
// the archive's SDS root, read-only), the stored records that go out as
// they are — almost all of a long window — come over the stream as spans
// of their day files, and the handler copies them from the files to the
// client itself: a day of a station is then a span per hour and channel
// instead of 18 MB through gRPC (docs/BENCHMARKS.md, fdsnws-dataselect).
//
// What a request may ask is bounded (Limits): the channel time it selects
// (413 beyond), and how many requests are answered at once (503 with
// Retry-After beyond).
//
// The archive holds one quality, D: quality=D, M and B (the default) select
// it, R and Q select nothing. minimumlength and longestonly need to know a
// channel's continuous segments before its first record is written, so
// with either the service reads each selected window twice: once for the
// records' headers, once for the records it keeps.
package fdsndataselect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-dataapi/internal/fdsn"
	"shindo.dev/svc-dataapi/internal/waveforms"
)

// Version is the fdsnws-dataselect specification version served.
const Version = "1.1.0"

// Base is where the service's routes are.
const Base = "/fdsnws/dataselect/1/"

// MediaType is miniSEED's registered media type.
const MediaType = waveforms.MediaType

// spec are the query's parameters (fdsnws-dataselect 1.1, "query method").
var spec = &fdsn.Spec{Params: append(fdsn.Common("miniseed"),
	fdsn.Param{Name: "quality", Kind: fdsn.Enum, Options: []string{"d", "r", "q", "m", "b"}, Default: "b"},
	fdsn.Param{Name: "minimumlength", Kind: fdsn.Float, Min: 0, Max: 366 * 86400},
	fdsn.Param{Name: "longestonly", Kind: fdsn.Bool, Default: "false"},
)}

// Limits bound what the service takes on.
type Limits struct {
	// MaxSpan is the most channel time one request selects: the sum over
	// its channels of the window asked of each.
	MaxSpan time.Duration
	// MaxWindows is the most station windows one request selects.
	MaxWindows int
	// Concurrent is how many requests are answered at once.
	Concurrent int
	// WriteStall is how long one write to the client may take.
	WriteStall time.Duration
}

// DefaultLimits: a month of one channel (about 200 MB of miniSEED at
// 50 Hz), or a day of ten stations' six channels; four answers at once.
var DefaultLimits = Limits{MaxSpan: 31 * 24 * time.Hour, MaxWindows: 3000, Concurrent: 4, WriteStall: 30 * time.Second}

// maxSegments bounds the continuous segments one window's first reading
// keeps for minimumlength and longestonly (24 bytes each).
const maxSegments = 1 << 20

// Handler serves the service.
type Handler struct {
	stations func() *registry.Set
	archive  waveformv1.WaveformServiceClient
	sds      string // the archive's SDS root on a shared disk; "" for none
	limits   Limits
	slots    chan struct{}
	log      *slog.Logger
	now      func() time.Time

	requests  *prometheus.CounterVec
	bytes     prometheus.Counter
	fileBytes prometheus.Counter
	fallbacks prometheus.Counter

	// filesAfter is when the day files are tried again (Unix ns) after one
	// could not be read: a -waveform-dir that is not (or not yet) the
	// archive's costs each answer a failed span and its warning otherwise.
	filesAfter atomic.Int64
}

// filesPause is how long answers come over the stream after a day file
// could not be read.
const filesPause = time.Minute

// New returns a Handler selecting from the registry stations returns and
// answering from archive, whose SDS root is sds when this process can read
// it ("" when it cannot).
func New(stations func() *registry.Set, archive waveformv1.WaveformServiceClient, sds string, limits Limits, reg prometheus.Registerer, log *slog.Logger) *Handler {
	h := &Handler{
		stations: stations, archive: archive, sds: sds, limits: limits, slots: make(chan struct{}, limits.Concurrent), log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_fdsn_dataselect_requests_total",
			Help: "fdsnws-dataselect queries by status: 200, 204/404 (no data), 400, 413, 503 (busy or archive unavailable), aborted (cut after the first byte).",
		}, []string{"status"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_fdsn_dataselect_bytes_total", Help: "miniSEED bytes fdsnws-dataselect wrote.",
		}),
		fileBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_fdsn_dataselect_file_bytes_total",
			Help: "Of shindo_fdsn_dataselect_bytes_total, the bytes copied from the archive's day files by the data API itself (-waveform-dir).",
		}),
	}
	h.fallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shindo_fdsn_dataselect_file_fallbacks_total",
		Help: "Archived day files that could not be read (-waveform-dir not the archive's, a file gone): the answer went on over the Export stream, and so do answers for a minute.",
	})
	reg.MustRegister(h.requests, h.bytes, h.fileBytes, h.fallbacks)
	return h
}

// Register adds the service's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Base+"query", h.query)
	mux.HandleFunc("POST "+Base+"query", h.query)
	spec.Describe(mux, Base, Version, MediaType)
	mux.HandleFunc("GET "+Base+"{$}", h.usage)
}

// window is one station's channels over one time window of a request.
type window struct {
	st         *registry.Station
	channels   []string // in the table's order (seedcode.Channels)
	start, end time.Time
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	q, sels, err := spec.ParseRequest(r)
	if err != nil {
		h.fail(w, r, fdsn.StatusOf(err), err.Error())
		return
	}
	wins, err := h.plan(q, sels)
	if err != nil {
		h.fail(w, r, fdsn.StatusOf(err), err.Error())
		return
	}
	if len(wins) == 0 {
		h.requests.WithLabelValues(fmt.Sprint(q.NoData())).Inc()
		w.WriteHeader(q.NoData())
		return
	}
	// A moment's wait for a slot: answers are long, and a burst of
	// requests is better queued briefly than refused at once.
	wait := time.NewTimer(2 * time.Second)
	select {
	case h.slots <- struct{}{}:
		wait.Stop()
		defer func() { <-h.slots }()
	case <-wait.C:
		w.Header().Set("Retry-After", "10")
		h.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("%d dataselect answers are being written; retry in a few seconds", h.limits.Concurrent))
		return
	case <-r.Context().Done():
		wait.Stop()
		return
	}
	minLen, _ := q.Float("minimumlength")
	a := &answer{h: h, w: w, r: r, rc: http.NewResponseController(w), nodata: q.NoData(),
		minLen: time.Duration(minLen * float64(time.Second)), longest: q.Bool("longestonly")}
	start := time.Now()
	err = a.write(wins)
	result := "200"
	switch {
	case err != nil && a.started:
		// Too late for a status: cut the response, so the client sees a
		// broken transfer, not a short answer that looks whole.
		h.requests.WithLabelValues("aborted").Inc()
		if r.Context().Err() == nil {
			h.log.WarnContext(r.Context(), "dataselect answer cut short", slog.Any("error", err), slog.Int64("bytes", a.bytes))
		}
		panic(http.ErrAbortHandler)
	case err != nil:
		status := fdsn.StatusOf(err)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		h.fail(w, r, status, err.Error())
		return
	case !a.started:
		result = fmt.Sprint(q.NoData())
		w.WriteHeader(q.NoData())
	}
	// What net/http still holds goes out after the handler, maybe long
	// after the last write's deadline (the archive's last windows empty).
	_ = a.rc.SetWriteDeadline(time.Now().Add(h.limits.WriteStall))
	h.requests.WithLabelValues(result).Inc()
	h.log.DebugContext(r.Context(), "dataselect", slog.Int("windows", len(wins)), slog.Int("records", a.records),
		slog.Int64("bytes", a.bytes), slog.Duration("took", time.Since(start)))
}

// plan turns the selections into station windows, in the order of the
// stations' codes, then of time: each selection's window (its start is
// required, an open end is now) with the channels it matches at each
// station whose codes it matches. Windows asked twice are answered once.
func (h *Handler) plan(q *fdsn.Query, sels []fdsn.Selection) ([]window, error) {
	if quality := q.Enum("quality"); quality == "r" || quality == "q" {
		return nil, nil // the archive holds quality D only
	}
	now := h.now().UTC()
	set := h.stations()
	if set == nil {
		return nil, nil
	}
	var wins []window
	var span time.Duration
	for _, sel := range sels {
		start, end := sel.Start, sel.End
		switch {
		case start.IsZero():
			return nil, &fdsn.Error{Status: http.StatusBadRequest, Detail: "starttime is required: a time series is asked for a window"}
		case end.IsZero() || end.After(now):
			end = now
		}
		if !end.After(start) {
			continue // all of it in the future
		}
		for _, st := range set.All() {
			c := st.SEED
			if !fdsn.MatchAny(sel.Network, c.Network) || !fdsn.MatchAny(sel.Station, c.Station) || !fdsn.MatchAny(sel.Location, c.Location) {
				continue
			}
			var chans []string
			for _, ch := range seedcode.Channels {
				if fdsn.MatchAny(sel.Channel, ch.Code) {
					chans = append(chans, ch.Code)
				}
			}
			if len(chans) == 0 {
				continue
			}
			win := window{st: st, channels: chans, start: start, end: end}
			if slices.ContainsFunc(wins, func(o window) bool {
				return o.st == st && o.start.Equal(start) && o.end.Equal(end) && slices.Equal(o.channels, chans)
			}) {
				continue
			}
			span += time.Duration(len(chans)) * end.Sub(start)
			wins = append(wins, win)
			if len(wins) > h.limits.MaxWindows || span > h.limits.MaxSpan {
				return nil, &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf(
					"the request selects more than %d station windows or more than %s of channel time (each station's channels times its window, summed): split it",
					h.limits.MaxWindows, hours(h.limits.MaxSpan))}
			}
		}
	}
	slices.SortStableFunc(wins, func(a, b window) int {
		if c := strings.Compare(a.st.SEED.String(), b.st.SEED.String()); c != 0 {
			return c
		}
		return a.start.Compare(b.start)
	})
	return wins, nil
}

func hours(d time.Duration) string { return fmt.Sprintf("%g channel-hours", d.Hours()) }

// answer writes the records of a request's windows.
type answer struct {
	h       *Handler
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	nodata  int
	minLen  time.Duration
	longest bool

	started bool   // the status and the first bytes are out
	buf     []byte // for copying spans (copyBuf)
	records int
	bytes   int64
}

// dayMs is the longest window of one Export.
const dayMs = 24 * 60 * 60 * 1000

func (a *answer) write(wins []window) error {
	for _, win := range wins {
		var keep func(mseed.Header) bool
		if a.minLen > 0 || a.longest {
			segs, err := a.segments(win)
			if err != nil {
				return err
			}
			keep = segs.keeps
		}
		before := a.records
		err := a.export(win, keep == nil && a.h.filesUsable(), func(part *waveformv1.ExportResponse) error {
			if sp := part.GetSpan(); sp != nil {
				return a.sendSpan(sp, win)
			}
			return a.sendPart(part.GetData(), keep, win)
		})
		if errors.Is(err, errSpanUnread) {
			// Nothing of the span went out: the stream has the same
			// records in the same order, so the answer goes on from the
			// first record not sent.
			a.h.fallbacks.Inc()
			a.h.filesAfter.Store(a.h.now().Add(filesPause).UnixNano())
			skip := a.records - before
			err = a.export(win, false, func(part *waveformv1.ExportResponse) error {
				data, err := dropRecords(part.GetData(), &skip)
				if err != nil {
					return err
				}
				return a.sendPart(data, keep, win)
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// filesUsable tells whether answers copy stored records from the day
// files.
func (h *Handler) filesUsable() bool {
	return h.sds != "" && h.now().UnixNano() >= h.filesAfter.Load()
}

// dropRecords returns data without its first *n records, counting *n down.
func dropRecords(data []byte, n *int) ([]byte, error) {
	for ; *n > 0 && len(data) > 0; *n-- {
		hdr, err := mseed.ParseHeader(data)
		if err != nil || hdr.RecordLen > len(data) {
			return nil, fmt.Errorf("archive sent a broken record: %v", err)
		}
		data = data[hdr.RecordLen:]
	}
	return data, nil
}

// sendPart writes the records of a part that keep allows (all of them
// when it is nil), each run of consecutive ones in one write: a day is
// about 37,000 records of 512 bytes, and a write per record cost a
// deadline, a counter and a trip through the response's buffer each.
func (a *answer) sendPart(part []byte, keep func(mseed.Header) bool, win window) error {
	run, at := 0, 0 // the run of kept records not yet written: part[run:at]
	err := eachRecord(part, func(rec []byte, hdr mseed.Header) error {
		if keep == nil || keep(hdr) {
			a.records++
			at += len(rec)
			return nil
		}
		err := a.send(part[run:at], win)
		at += len(rec)
		run = at
		return err
	})
	if err != nil {
		return err
	}
	return a.send(part[run:at], win)
}

// exportRecords is export handing over each record with its header.
func (a *answer) exportRecords(win window, fn func(rec []byte, hdr mseed.Header) error) error {
	return a.export(win, false, func(part *waveformv1.ExportResponse) error { return eachRecord(part.GetData(), fn) })
}

// export reads a window's records from the archive, a day at a time,
// handing over each part of the stream: whole records that eachRecord
// splits, or with spans a span of a day file. A station the archive never
// saw has no records.
func (a *answer) export(win window, spans bool, fn func(part *waveformv1.ExportResponse) error) error {
	ctx, cancel := context.WithCancel(a.r.Context())
	defer cancel()
	for t := win.start.UnixMilli(); t < win.end.UnixMilli(); t += dayMs {
		stream, err := a.h.archive.Export(ctx, &waveformv1.ExportRequest{
			StationId: win.st.ID, StartMs: t, EndMs: min(t+dayMs, win.end.UnixMilli()), Channels: win.channels, FileSpans: spans,
		})
		for err == nil {
			var part *waveformv1.ExportResponse
			if part, err = stream.Recv(); err != nil {
				break
			}
			err = fn(part)
		}
		switch {
		case errors.Is(err, io.EOF):
		case status.Code(err) == codes.NotFound:
			return nil // never archived
		case a.r.Context().Err() != nil:
			return a.r.Context().Err()
		case err != nil:
			if _, ours := errors.AsType[*fdsn.Error](err); ours || errors.Is(err, errSpanUnread) {
				return err
			}
			a.h.log.WarnContext(a.r.Context(), "dataselect: archive read failed", slog.String("station", win.st.ID), slog.Any("error", err))
			return &fdsn.Error{Status: http.StatusServiceUnavailable, Detail: "archive unavailable"}
		}
	}
	return nil
}

// eachRecord splits a part of the Export stream into its records.
func eachRecord(data []byte, fn func(rec []byte, hdr mseed.Header) error) error {
	for len(data) > 0 {
		hdr, err := mseed.ParseHeader(data)
		if err != nil || hdr.RecordLen > len(data) {
			return fmt.Errorf("archive sent a broken record: %v", err)
		}
		if err := fn(data[:hdr.RecordLen], hdr); err != nil {
			return err
		}
		data = data[hdr.RecordLen:]
	}
	return nil
}

// spanPiece is how much of a span one write sends: the client has
// WriteStall for it.
const spanPiece = 1 << 20

// errSpanUnread: a span of a day file could not be read, and nothing of it
// was sent.
var errSpanUnread = errors.New("archived day file unreadable")

// sendSpan copies a span of a day file to the client. The span is
// svc-waveform's, but its path is still opened inside the SDS root only,
// and its first record read: a span that leaves the root or does not start
// on a record, or a file that is not there, is not read at all
// (errSpanUnread: write answers it over the stream; the path is logged),
// and a file that ends before the span (removed or replaced meanwhile)
// cuts the answer rather than send something else.
func (a *answer) sendSpan(sp *waveformv1.FileSpan, win window) error {
	unreadable := func(err error) error {
		a.h.log.WarnContext(a.r.Context(), "dataselect: archived day file unreadable; answering over the stream", slog.String("path", sp.GetPath()),
			slog.Int64("offset", sp.GetOffset()), slog.Int64("length", sp.GetLength()), slog.Any("error", err))
		return errSpanUnread
	}
	cut := func(err error) error {
		a.h.log.WarnContext(a.r.Context(), "dataselect: archived day file shorter than its span", slog.String("path", sp.GetPath()),
			slog.Int64("offset", sp.GetOffset()), slog.Int64("length", sp.GetLength()), slog.Any("error", err))
		return &fdsn.Error{Status: http.StatusServiceUnavailable, Detail: "archive unavailable"}
	}
	if sp.GetOffset() < 0 || sp.GetLength() <= 0 {
		return unreadable(errors.New("not a span"))
	}
	f, err := os.OpenInRoot(a.h.sds, filepath.FromSlash(sp.GetPath()))
	if err != nil {
		return unreadable(err)
	}
	defer f.Close()
	head := make([]byte, mseed.DataOffset)
	if _, err := f.ReadAt(head, sp.GetOffset()); err != nil {
		return unreadable(err)
	}
	hdr, err := mseed.ParseHeader(head)
	switch {
	case err != nil:
		return unreadable(err)
	case sp.GetLength()%int64(hdr.RecordLen) != 0:
		return unreadable(fmt.Errorf("not whole records of %d bytes", hdr.RecordLen))
	}
	if _, err := f.Seek(sp.GetOffset(), io.SeekStart); err != nil {
		return unreadable(err)
	}
	a.begin(win)
	for left := sp.GetLength(); left > 0; {
		_ = a.rc.SetWriteDeadline(time.Now().Add(a.h.limits.WriteStall))
		// Through Write, not the response's ReadFrom: see copyBuf.
		n, err := io.CopyBuffer(struct{ io.Writer }{a.w}, &io.LimitedReader{R: f, N: min(left, spanPiece)}, a.copyBuf())
		a.bytes += n
		a.h.bytes.Add(float64(n))
		a.h.fileBytes.Add(float64(n))
		left -= n
		switch {
		case err != nil:
			return err
		case n == 0:
			return cut(fmt.Errorf("the file ends %d bytes before the span", left))
		}
	}
	a.records += int(sp.GetLength() / int64(hdr.RecordLen))
	return nil
}

// copyBuf is the answer's buffer for copying spans: one read and one
// chunk of the response per 256 KiB. (A response's own ReadFrom copies 32
// KiB at a time, and uses sendfile only without chunks, where a cut answer
// would look whole: 710–740 MB/s against 930–990 this way,
// BenchmarkDataselectDay.)
func (a *answer) copyBuf() []byte {
	if a.buf == nil {
		a.buf = make([]byte, 256<<10)
	}
	return a.buf
}

// begin writes the status and headers before the first record.
func (a *answer) begin(win window) {
	if !a.started {
		a.w.Header().Set("Content-Type", MediaType)
		name := "shindo." + win.start.UTC().Format("20060102T150405") + ".mseed"
		a.w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		a.w.WriteHeader(http.StatusOK)
		a.started = true
	}
}

// send writes records, the status and headers before the first.
func (a *answer) send(recs []byte, win window) error {
	if len(recs) == 0 {
		return nil
	}
	a.begin(win)
	// A client that stops reading holds a slot and an archive stream: it
	// has WriteStall for each write (at most one part of the archive's
	// stream).
	_ = a.rc.SetWriteDeadline(time.Now().Add(a.h.limits.WriteStall))
	n, err := a.w.Write(recs)
	a.bytes += int64(n)
	a.h.bytes.Add(float64(n))
	return err
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, detail string) {
	h.requests.WithLabelValues(fmt.Sprint(status)).Inc()
	fdsn.WriteError(w, r, status, detail, fdsn.Scheme(r)+"://"+r.Host+Base, Version)
}

// usage is the page errors point to: what the service answers.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	base := fdsn.Scheme(r) + "://" + r.Host + Base
	fmt.Fprintf(w, `fdsnws-dataselect %s (FDSN Web Service Specifications 1.2): this network's time series as miniSEED 2.4.

%squery?net=SH&sta=00001&cha=BN?&start=2026-12-01T00:00:00&end=2026-12-01T00:10:00
%squery (POST)   a selection per line: NET STA LOC CHA START END (END * for now)
%sversion
%sapplication.wadl

Channels: BNZ, BNN, BNE (50 Hz, counts, Steim-2), MXI, MXA, MXV (2 Hz: real-time intensity, PGA
in gal, PGV in cm/s; 32-bit floats). starttime is required; an open or future end is now.
quality: D, M or B (the default) select the archive's data, which is all D; R and Q none.
minimumlength (s) and longestonly select continuous segments; nodata=204 (default) or 404.
At most %s of channel time and %d station windows per request.
`, Version, base, base, base, base, hours(h.limits.MaxSpan), h.limits.MaxWindows)
}

// Package playback serves the replay routes of the compatible API: what
// the live routes carried at a past tick, from the cores' archives of the
// snapshots they sent (RTSService.GetSnapshot with a time), rendered by the
// same code as the live stream (lib/compatjson), so a replay equals the
// live event byte for byte.
//
//	GET /api/v2/trem/rts/{t}        the RTS snapshot of that tick
//	GET /api/v2/eq/eew/{t}          the alerts listed then
//	GET /api/v2/trem/intensity/{t}  the intensity flashes then
//	GET /api/v2/trem/lpgm/{t}       the long-period ground motion then
//	GET /api/v3/trem/rts/{t}        the rts.v1 payload of that tick
//	GET /api/v3/trem/intensity/{t}  the intensity.v1 flashes then
//
// (the v3 pair is what the newest TREM-Lite replays:
// packages/core/src/features/data/dataHttp.ts at 2400a0e)
//
// The apps put Unix seconds in the path (TREM-Lite:
// src/js/index/data/http.js:276 of ExpTechTW/TREM-Lite at 9bbaccf; DPIP:
// lib/features/earthquake/data/eew_replay_source.dart:28 of
// ExpTechTW/DPIP at 194d28f), so a number below 10^11 is seconds and a
// larger one milliseconds; either way the answer is the tick at or before
// it. The core's own archive is asked first, then the other cores', so a
// tick this core missed while it was down comes from its peer. A tick no
// core holds (no data then, or older than the retention) is answered with
// an empty snapshot of that tick — the apps' replay polls every second and
// takes an error for a dead server — marked X-Shindo-Archived: 0; a tick
// not computed yet is a 404.
package playback

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	"shindo.dev/lib/apierror"
	"shindo.dev/lib/compatjson"
)

// secondsBelow: a time below it is in seconds (10^11 s is the year 5138;
// 10^11 ms is 1973).
const secondsBelow = 100_000_000_000

// maxTimeMs bounds a time (the year 9999).
const maxTimeMs = 253402300799999

// Handler serves the replay routes.
type Handler struct {
	cores   []rtsv1.RTSServiceClient // this core's svc-rts first
	author  string
	timeout time.Duration
	log     *slog.Logger
}

// New returns the routes over the cores' RTS services, this core's first.
func New(cores []rtsv1.RTSServiceClient, author string, timeout time.Duration, log *slog.Logger) *Handler {
	return &Handler{cores: cores, author: author, timeout: timeout, log: log}
}

// Register adds the routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	for path, render := range map[string]func(*rtsv1.Snapshot) []byte{
		"/api/v2/trem/rts/{t}":       compatjson.RTS,
		"/api/v2/eq/eew/{t}":         func(s *rtsv1.Snapshot) []byte { return compatjson.EEW(h.author, s.GetDetections()) },
		"/api/v2/trem/intensity/{t}": func(s *rtsv1.Snapshot) []byte { return compatjson.Intensity(h.author, s.GetDetections()) },
		"/api/v2/trem/lpgm/{t}":      func(s *rtsv1.Snapshot) []byte { return compatjson.LPGM(h.author, s.GetDetections()) },
		"/api/v3/trem/rts/{t}":       compatjson.RTSv1,
		"/api/v3/trem/intensity/{t}": compatjson.IntensityV1,
	} {
		mux.Handle("GET "+path, h.route(render))
	}
}

// ParseTime reads the {t} of a replay route: Unix seconds or ms, as
// digits only; it returns Unix ms.
func ParseTime(s string) (int64, error) {
	if s == "" || len(s) > 15 {
		return 0, errors.New("time: Unix seconds or milliseconds, as digits")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("time: Unix seconds or milliseconds, as digits")
		}
	}
	v, _ := strconv.ParseInt(s, 10, 64) // at most 15 digits: fits
	if v < secondsBelow {
		v *= 1000
	}
	if v <= 0 || v > maxTimeMs {
		return 0, errors.New("time: from 1970 to 9999")
	}
	return v, nil
}

func (h *Handler) route(render func(*rtsv1.Snapshot) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ms, err := ParseTime(r.PathValue("t"))
		if err != nil {
			apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
			return
		}
		snap, archived, err := h.snapshot(r.Context(), ms)
		switch {
		case errors.Is(err, errFuture):
			apierror.Write(w, http.StatusNotFound, codes.OutOfRange, "that tick is not computed yet")
			return
		case err != nil:
			w.Header().Set("Retry-After", "1")
			apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, "no core's archive answers")
			return
		}
		hdr := w.Header()
		hdr.Set("Content-Type", "application/json")
		if archived {
			hdr.Set("X-Shindo-Archived", "1")
		} else {
			hdr.Set("X-Shindo-Archived", "0")
		}
		w.Write(render(snap))
	})
}

var errFuture = errors.New("tick not computed yet")

// snapshot asks the cores in turn for the tick at or before ms. It returns
// an empty snapshot of the tick, not archived, when the cores that answer
// all lack it.
func (h *Handler) snapshot(ctx context.Context, ms int64) (*rtsv1.Snapshot, bool, error) {
	tick := ms - ms%500
	answered, future := 0, 0
	for _, c := range h.cores {
		cctx, cancel := context.WithTimeout(ctx, h.timeout)
		resp, err := c.GetSnapshot(cctx, &rtsv1.GetSnapshotRequest{TimeMs: ms})
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return resp.GetSnapshot(), true, nil
		case codes.NotFound, codes.FailedPrecondition:
			answered++
		case codes.OutOfRange:
			answered++
			future++
		default:
			h.log.WarnContext(ctx, "replay: a core's archive did not answer", slog.Int64("time_ms", ms), slog.Any("error", err))
		}
	}
	switch {
	case answered == 0:
		return nil, false, errors.New("no core answered")
	case future == answered:
		return nil, false, errFuture
	}
	return &rtsv1.Snapshot{TimeMs: tick}, false, nil
}

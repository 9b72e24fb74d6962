// Package waveforms serves the waveform archive's REST routes from this
// core's svc-waveform, reached over its gRPC WaveformService:
//
//	GET /v1/waveforms/{station_id}?start_ms=&end_ms=&with_intensity=
//	    Query as JSON, through grpc-gateway (proto/shindo/api.yaml)
//	GET /v1/waveforms/{station_id}/mseed?start_ms=&end_ms=&intensity=
//	    Export as a miniSEED file (application/vnd.fdsn.mseed), the FDSN
//	    dataselect way: 204 when the window holds no data
//
// The download is a plain handler because grpc-gateway returns raw bytes
// only through google.api.HttpBody, whose proto is not available offline.
// It writes each part of the Export stream as it arrives, so the data API
// holds at most a part (64 KiB) of a download of up to a day.
//
// Errors are shindo.data.v1.Error (lib/apierror). The archive's own answers
// about the request (unknown station, bad window) reach the client as they
// are; anything else — the archive down, the connection lost, a broken
// answer — is a 503 "archive unavailable" with Retry-After, its detail in
// the log, never in the answer.
package waveforms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/apierror"
	"shindo.dev/seismo/seedcode"
)

// MediaType is miniSEED's registered media type.
const MediaType = "application/vnd.fdsn.mseed"

// unavailable is what a client is told when the archive cannot answer.
const unavailable = "archive unavailable"

// Handler returns the routes above over client. opts are the data API's
// gateway options (marshaler, error handlers); the archive's gateway adds
// its own error handler, and passes no headers between the client and the
// archive, as the archive needs none and its gRPC metadata is no client's
// business.
func Handler(ctx context.Context, client waveformv1.WaveformServiceClient, log *slog.Logger, opts ...runtime.ServeMuxOption) (http.Handler, error) {
	h := &handler{client: client, log: log, writeStall: writeStall}
	none := func(string) (string, bool) { return "", false }
	opts = append(opts,
		runtime.WithErrorHandler(h.gatewayError),
		runtime.WithIncomingHeaderMatcher(none),
		runtime.WithOutgoingHeaderMatcher(none),
		runtime.WithOutgoingTrailerMatcher(none),
	)
	gw := runtime.NewServeMux(opts...)
	if err := waveformv1.RegisterWaveformServiceHandlerClient(ctx, gw, client); err != nil {
		return nil, fmt.Errorf("waveform gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/waveforms/{station_id}", gw)
	mux.HandleFunc("GET /v1/waveforms/{station_id}/mseed", h.export)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, http.StatusNotFound, codes.NotFound, "no such route: "+r.URL.Path)
	})
	return mux, nil
}

type handler struct {
	client waveformv1.WaveformServiceClient
	log    *slog.Logger
	// writeStall is how long one part's write to the client may take.
	writeStall time.Duration
}

// writeStall bounds each part's write: a client that takes none of it
// for that long is cut, with its export (fdsnws-dataselect's bound).
const writeStall = 30 * time.Second

func (h *handler) gatewayError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if archiveFailed(err) {
		h.log.WarnContext(ctx, "waveform query failed", slog.String("path", r.URL.Path), slog.Any("error", err))
		apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, unavailable)
		return
	}
	apierror.Gateway(ctx, mux, m, w, r, err)
}

// archiveFailed tells an archive that could not answer from one that
// answered the request: InvalidArgument (also the gateway's own, for a
// query parameter that does not parse) and NotFound are about the request,
// Canceled and DeadlineExceeded about the client's patience; the rest is
// the archive's failure, or the way to it.
func archiveFailed(err error) bool {
	var he *runtime.HTTPStatusError
	if errors.As(err, &he) {
		return false // the gateway's own routing answer
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.Canceled, codes.DeadlineExceeded:
		return false
	}
	return true
}

func (h *handler) export(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("station_id")
	q := r.URL.Query()
	start, err1 := strconv.ParseInt(q.Get("start_ms"), 10, 64)
	end, err2 := strconv.ParseInt(q.Get("end_ms"), 10, 64)
	if err1 != nil || err2 != nil {
		apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, "start_ms and end_ms: give Unix milliseconds")
		return
	}
	withIntensity := false
	if v := q.Get("intensity"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			apierror.Write(w, http.StatusBadRequest, codes.InvalidArgument, "intensity: give true or false")
			return
		}
		withIntensity = b
	}
	// Ends the stream when the client leaves or the handler returns early.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := h.client.Export(ctx, &waveformv1.ExportRequest{StationId: id, StartMs: start, EndMs: end, WithIntensity: withIntensity})
	var part *waveformv1.ExportResponse
	if err == nil {
		// The first part decides the status: an error, no data, or a file.
		part, err = stream.Recv()
	}
	switch {
	case errors.Is(err, io.EOF):
		w.WriteHeader(http.StatusNoContent)
		return
	case err != nil:
		h.exportError(w, r, id, err)
		return
	}
	name, ok := fileName(part, start)
	if !ok {
		h.log.WarnContext(ctx, "miniSEED export without valid station codes", slog.String("station", id),
			slog.String("network_code", part.GetNetworkCode()), slog.String("station_code", part.GetStationCode()))
		apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, unavailable)
		return
	}
	w.Header().Set("Content-Type", MediaType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		// Without a deadline a client that stops reading would hold the
		// handler and the archive's stream for as long as its kernel
		// answers with a closed window.
		if err := rc.SetWriteDeadline(time.Now().Add(h.writeStall)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		if _, err := w.Write(part.GetData()); err != nil {
			return // the client left; cancel ends the export
		}
		// Each part goes out as it came, through any buffering on the way.
		// A writer that cannot flush sends it with the next parts; any
		// other error is the client gone.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		part, err = stream.Recv()
		if errors.Is(err, io.EOF) {
			// The answer's end goes out after the handler, maybe long
			// after the last part's deadline.
			_ = rc.SetWriteDeadline(time.Now().Add(h.writeStall))
			return
		}
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			// Too late for a status: cut the response so the client sees a
			// broken transfer, not a short file.
			h.log.WarnContext(ctx, "miniSEED export cut short", slog.String("station", id), slog.Any("error", err))
			panic(http.ErrAbortHandler)
		}
	}
}

func (h *handler) exportError(w http.ResponseWriter, r *http.Request, id string, err error) {
	if archiveFailed(err) {
		h.log.WarnContext(r.Context(), "miniSEED export failed", slog.String("station", id), slog.Any("error", err))
		apierror.Write(w, http.StatusServiceUnavailable, codes.Unavailable, unavailable)
		return
	}
	apierror.WriteStatus(w, err)
}

// fileName is the download's name, NET.STA.LOC.start.mseed, from the SEED
// codes of the export's first part; codes that are not SEED codes (which a
// header must not carry) are refused.
func fileName(first *waveformv1.ExportResponse, startMs int64) (string, bool) {
	c := seedcode.Codes{Network: first.GetNetworkCode(), Station: first.GetStationCode(), Location: first.GetLocationCode()}
	if c.Check() != nil {
		return "", false
	}
	return c.String() + "." + time.UnixMilli(startMs).UTC().Format("20060102T150405") + ".mseed", true
}

// Package wavehttp is svc-waveform's HTTP surface, which the data API
// proxies to:
//
//	GET /v1/waveforms/{station_id}?start_ms=&end_ms=&with_intensity=
//	    the Query RPC as JSON (grpc-gateway, from proto/shindo/api.yaml)
//	GET /v1/waveforms/{station_id}/mseed?start_ms=&end_ms=&intensity=
//	    the Export as a miniSEED file (application/vnd.fdsn.mseed), the
//	    FDSN dataselect way: 204 when the window holds no data
//
// The download is a plain handler because grpc-gateway returns raw bytes
// only through google.api.HttpBody, whose proto is not available offline.
package wavehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/lib/apierror"
	"shindo.dev/svc-waveform/internal/archive"
)

// MediaType is miniSEED's registered media type.
const MediaType = "application/vnd.fdsn.mseed"

// Handler serves the routes above from store and, for the JSON route,
// the gRPC server srv in-process.
func Handler(ctx context.Context, store *archive.Store, srv waveformv1.WaveformServiceServer, log *slog.Logger) (http.Handler, error) {
	// The same JSON as the rest of the data API: proto field names, every
	// field present.
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true},
	}), runtime.WithErrorHandler(apierror.Gateway), runtime.WithRoutingErrorHandler(apierror.Routing))
	if err := waveformv1.RegisterWaveformServiceHandlerServer(ctx, gw, srv); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/waveforms/{station_id}", gw)
	mux.HandleFunc("GET /v1/waveforms/{station_id}/mseed", func(w http.ResponseWriter, r *http.Request) {
		exportMSEED(w, r, store, log)
	})
	return mux, nil
}

func exportMSEED(w http.ResponseWriter, r *http.Request, store *archive.Store, log *slog.Logger) {
	id := r.PathValue("station_id")
	q := r.URL.Query()
	start, err1 := strconv.ParseInt(q.Get("start_ms"), 10, 64)
	end, err2 := strconv.ParseInt(q.Get("end_ms"), 10, 64)
	if err1 != nil || err2 != nil {
		http.Error(w, "start_ms and end_ms: give Unix milliseconds", http.StatusBadRequest)
		return
	}
	withIntensity := false
	if v := q.Get("intensity"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "intensity: give true or false", http.StatusBadRequest)
			return
		}
		withIntensity = b
	}
	net, sta, ok := store.Names(id)
	if !ok {
		http.Error(w, "no data for this station", http.StatusNotFound)
		return
	}
	started := false
	n, err := store.Export(id, start, end, withIntensity, func(b []byte) error {
		if !started {
			started = true
			name := fmt.Sprintf("%s.%s.%s.%s.mseed", net, sta, archive.Location, time.UnixMilli(start).UTC().Format("20060102T150405"))
			w.Header().Set("Content-Type", MediaType)
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			w.WriteHeader(http.StatusOK)
		}
		_, err := w.Write(b)
		return err
	})
	switch {
	case err == nil && n == 0:
		w.WriteHeader(http.StatusNoContent)
	case err == nil:
	case started:
		// Too late for a status: cut the response so the client sees a
		// broken transfer, not a short file.
		log.Warn("miniSEED export cut short", slog.String("station", id), slog.Any("error", err))
		panic(http.ErrAbortHandler)
	case errors.Is(err, archive.ErrWindow):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, archive.ErrUnknownStation):
		http.Error(w, "no data for this station", http.StatusNotFound)
	default:
		log.Error("miniSEED export failed", slog.String("station", id), slog.Any("error", err))
		http.Error(w, "archive unavailable", http.StatusServiceUnavailable)
	}
}

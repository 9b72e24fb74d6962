package edge

import (
	"context"
	"errors"
	"net/http"
	"regexp"

	"shindo.dev/svc-edge/internal/sse"
	"shindo.dev/svc-edge/internal/wavelive"
)

// stationIDPattern is what a station ID can look like (lib/registry's
// rule); anything else is refused before it reaches a core.
var stationIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// waveformStream serves GET /v1/stream/waveform?station=<id>: the
// station's live three-axis chunks as `event: waveform`, each with its
// id, resuming after Last-Event-ID from the station's recent history.
type waveformStream struct {
	live    *wavelive.Hub
	streams *streams
	// exists tells whether a station exists, from the stations the cores
	// push (stationSet.exists): true, false, or an error when it cannot
	// tell yet (then the stream is served anyway).
	exists func(ctx context.Context, id string) (bool, error)
}

func (ws *waveformStream) serve(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("station")
	if !stationIDPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, "station: give one station ID (letters, digits, '.', '_', '-'; at most 32)")
		return
	}
	lastID, err := lastEventID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if ws.exists != nil {
		ok, err := ws.exists(r.Context(), id)
		if err == nil && !ok {
			writeError(w, http.StatusNotFound, "no station "+id)
			return
		}
	}
	hub, err := ws.live.Acquire(id)
	if errors.Is(err, wavelive.ErrTooManyStations) {
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	addr := clientAddr(r)
	if !ws.streams.perAddr.acquire(addr) {
		ws.live.Release(id)
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusTooManyRequests, "too many streams from this address")
		return
	}
	hub.Serve(w, r, sse.ServeOptions{Hello: []*sse.Event{ws.streams.info}, LastID: lastID, Latest: lastID == "",
		OnClose: func() {
			ws.streams.perAddr.release(addr)
			ws.live.Release(id)
		}})
}

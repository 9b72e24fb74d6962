package edge

import (
	"net/http"
	"time"

	"shindo.dev/lib/timesync"
)

// serveTime is GET /v1/time: the same times as JSON,
// {"receive_ms":…,"transmit_ms":…}, Unix ms with a fraction.
func serveTime(w http.ResponseWriter, _ *http.Request) {
	t2 := time.Now()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	b := make([]byte, 0, 64)
	b = append(b, `{"receive_ms":`...)
	b = append(b, timesync.FormatMs(t2)...)
	b = append(b, `,"transmit_ms":`...)
	b = append(b, timesync.FormatMs(time.Now())...)
	w.Write(append(b, '}'))
}

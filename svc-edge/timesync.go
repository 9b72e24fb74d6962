package edge

import (
	"net/http"
	"strconv"
	"time"

	"shindo.dev/lib/timesync"
)

// serveNTP is GET /ntp (SPEC §7): the body is the transmit time in Unix ms,
// the headers carry receive and transmit times with a fraction, so a client
// can compute offset and delay NTP-style. It does no more work than that:
// during a big earthquake every client syncs at once.
func serveNTP(w http.ResponseWriter, _ *http.Request) {
	t2 := time.Now()
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Cache-Control", "no-store")
	h.Set(timesync.HeaderReceive, timesync.FormatMs(t2))
	t3 := time.Now()
	h.Set(timesync.HeaderTransmit, timesync.FormatMs(t3))
	w.Write(strconv.AppendInt(nil, t3.UnixMilli(), 10))
}

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

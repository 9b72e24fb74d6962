package timesync

import (
	"net/http"
	"strconv"
	"time"
)

// ServeNTP is GET /ntp (SPEC §7), on the edges and the cores: the body is
// the transmit time in Unix ms, what TREM-Lite's web build reads
// (packages/core/src/lib/ntp.ts:53-61 of ExpTechTW/TREM-Lite at 2400a0e);
// the headers carry receive and transmit times with a fraction, what its
// desktop build and this package's Client read, so a client can compute
// offset and delay NTP-style. It does no more work than that: during a big
// earthquake every client syncs at once.
func ServeNTP(w http.ResponseWriter, _ *http.Request) {
	t2 := time.Now()
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderReceive, FormatMs(t2))
	t3 := time.Now()
	h.Set(HeaderTransmit, FormatMs(t3))
	w.Write(strconv.AppendInt(nil, t3.UnixMilli(), 10))
}

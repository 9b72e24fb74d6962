package edge

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"shindo.dev/svc-edge/internal/corewatch"
)

// TestReportTopic: queued reports go out as one event per tick, at their
// due tick, after its snapshot — IDs "<tick>-2" — and a client resuming
// from before gets them in order; a report revised before its tick goes
// out once, as revised; an edge without a data API refuses the topic.
func TestReportTopic(t *testing.T) {
	t.Parallel()
	a, _, _, st, url := edgeWithCores(t)
	tick := func(ms int64) { t.Helper(); serveTick(t, st, a, ms) }

	if resp, _ := openStream(t, url, "topics=rts,report", ""); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("report topic without a data API: %d", resp.StatusCode)
	}
	st.reports = true

	tick(500)
	st.queueReports([]corewatch.Pending{
		{Due: 1000, ID: "B", Data: []byte(`{"id":"B"}`)},
		{Due: 1000, ID: "A", Data: []byte(`{"id":"A","v":1}`)},
		{Due: 2000, ID: "C", Data: []byte(`{"id":"C"}`)},
	})
	st.queueReports([]corewatch.Pending{{Due: 1000, ID: "A", Data: []byte(`{"id":"A","v":2}`)}})
	_, blocks := openStream(t, url, "topics=rts,report", "")
	if got := eventID(t, blocks); got != "500-0" {
		t.Fatalf("latest %s", got)
	}
	waitClients(t, st.hub, 1)
	tick(1000)
	tick(1500)
	tick(2000)
	want := []string{
		"id: 1000-0",
		"id: 1000-2\ndata: [{\"id\":\"A\",\"v\":2},{\"id\":\"B\"}]",
		"id: 1500-0",
		"id: 2000-0",
		"id: 2000-2\ndata: [{\"id\":\"C\"}]",
	}
	for _, w := range want {
		select {
		case b := <-blocks:
			if !strings.HasPrefix(b, w) {
				t.Fatalf("event %q, want %q…", b, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event, want %q", w)
		}
	}

	// Resuming from the first snapshot replays the rest, in order; the
	// report topic alone gets only its events.
	_, blocks = openStream(t, url, "topics=rts,report", "1000-0")
	for _, w := range []string{"1000-2", "1500-0", "2000-0", "2000-2"} {
		if got := eventID(t, blocks); got != w {
			t.Fatalf("replay %s, want %s", got, w)
		}
	}
	_, blocks = openStream(t, url, "topics=report", "500-0")
	for _, w := range []string{"1000-2", "2000-2"} {
		if got := eventID(t, blocks); got != w {
			t.Fatalf("report replay %s, want %s", got, w)
		}
	}
}

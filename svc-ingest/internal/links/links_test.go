package links

import (
	"math"
	"testing"
	"time"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

func TestLossOverFiveMinutes(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	now := start
	tab := New("TNN-1")
	tab.now = func() time.Time { return now }
	// 4 packets/s for 10 minutes; every 10th missing in the last 5 minutes.
	seq := uint64(0)
	for s := range 600 {
		for range 4 {
			seq++
			if s >= 300 && seq%10 == 0 {
				continue
			}
			tab.Observe("S1", seq, ingestv1.Transport_TRANSPORT_UDP, start.Add(time.Duration(s)*time.Second))
		}
	}
	tab.Observe("S2", 1, ingestv1.Transport_TRANSPORT_WS, start)
	now = start.Add(599 * time.Second)
	got := tab.List("")
	if len(got) != 2 || got[0].GetStationId() != "S1" || got[1].GetStationId() != "S2" {
		t.Fatalf("links %v", got)
	}
	l := got[0]
	if math.Abs(l.GetRecentLoss()-0.1) > 0.01 {
		t.Errorf("loss %.3f, want 0.1", l.GetRecentLoss())
	}
	if l.GetTransport() != ingestv1.Transport_TRANSPORT_UDP || l.GetSite() != "TNN-1" {
		t.Errorf("link %v", l)
	}
	if s2 := got[1]; s2.GetRecentAccepted() != 0 || s2.GetRecentLoss() != 0 {
		t.Errorf("S2 seen 10 minutes ago still counts: %v", s2)
	}
	if one := tab.List("S2"); len(one) != 1 || one[0].GetTransport() != ingestv1.Transport_TRANSPORT_WS {
		t.Errorf("filtered list %v", one)
	}
}

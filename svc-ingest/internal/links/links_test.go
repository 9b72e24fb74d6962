package links

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
			tab.Observe("S1", seq, ingestv1.Transport_TRANSPORT_UDP, 0, start.Add(time.Duration(s)*time.Second))
		}
	}
	tab.Observe("S2", 1, ingestv1.Transport_TRANSPORT_WS, 0, start)
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

func TestRTTSmoothing(t *testing.T) {
	t.Parallel()
	tab := New("TYO-1")
	at := time.Unix(1_800_000_000, 0)
	tab.Observe("S", 1, ingestv1.Transport_TRANSPORT_UDP, 0, at) // unknown: no sample
	tab.Observe("S", 2, ingestv1.Transport_TRANSPORT_UDP, 40_000, at)
	l := tab.List("S")[0]
	if l.GetSrttMs() != 40 || l.GetRttvarMs() != 20 {
		t.Fatalf("first sample: srtt %v rttvar %v, want 40 and 20", l.GetSrttMs(), l.GetRttvarMs())
	}
	tab.Observe("S", 3, ingestv1.Transport_TRANSPORT_UDP, 80_000, at)
	l = tab.List("S")[0]
	// RFC 6298: RTTVAR = 3/4·20 + 1/4·|40−80| = 25; SRTT = 7/8·40 + 1/8·80 = 45.
	if l.GetSrttMs() != 45 || l.GetRttvarMs() != 25 {
		t.Fatalf("second sample: srtt %v rttvar %v, want 45 and 25", l.GetSrttMs(), l.GetRttvarMs())
	}
}

func TestCollector(t *testing.T) {
	t.Parallel()
	tab := New("TNN-1")
	now := time.Now()
	tab.Observe("A", 1, ingestv1.Transport_TRANSPORT_UDP, 3000, now)
	tab.Observe("B", 1, ingestv1.Transport_TRANSPORT_WS, 80000, now)
	tab.Observe("C", 1, ingestv1.Transport_TRANSPORT_UDP, 0, now)
	reg := prometheus.NewRegistry()
	reg.MustRegister(tab.Collector())
	got, err := testutil.GatherAndCount(reg)
	if err != nil || got != 4 {
		t.Fatalf("%d series, %v", got, err)
	}
	want := `
# HELP shindo_ingest_links Station links seen in the last 5 minutes, by current transport.
# TYPE shindo_ingest_links gauge
shindo_ingest_links{site="TNN-1",transport="udp"} 2
shindo_ingest_links{site="TNN-1",transport="ws"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shindo_ingest_links"); err != nil {
		t.Fatal(err)
	}
}

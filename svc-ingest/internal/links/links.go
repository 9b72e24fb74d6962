// Package links keeps svc-ingest's view of each station link at this core:
// transport, last seen, packet loss over the last five minutes judged from
// gaps in the station's sequence numbers, and the round-trip time the
// station reports for this uplink, smoothed as RFC 6298 smooths a TCP
// sender's samples (SRTT gain 1/8, RTTVAR gain 1/4).
package links

import (
	"math"
	"sort"
	"sync"
	"time"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// window is the span loss is measured over, in one-minute buckets.
const (
	buckets      = 5
	bucketLength = time.Minute
)

type bucket struct {
	minute   int64 // Unix minute this bucket holds; 0 when unused
	count    uint64
	min, max uint64
}

type link struct {
	transport    ingestv1.Transport
	lastSeen     time.Time
	buckets      [buckets]bucket
	srtt, rttvar float64 // ms; srtt 0 before the first sample
}

// Table holds the links seen at one site. It is safe for concurrent use.
type Table struct {
	site string
	now  func() time.Time
	mu   sync.Mutex
	m    map[string]*link
}

// New returns an empty table for site.
func New(site string) *Table {
	return &Table{site: site, now: time.Now, m: map[string]*link{}}
}

// Observe records an accepted packet and the RTT (µs, 0 if unknown) the
// station reported in it.
func (t *Table) Observe(station string, seq uint64, tr ingestv1.Transport, rttUs uint32, at time.Time) {
	minute := at.Unix() / int64(bucketLength/time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.m[station]
	if l == nil {
		l = &link{}
		t.m[station] = l
	}
	l.transport, l.lastSeen = tr, at
	b := &l.buckets[minute%buckets]
	if b.minute != minute {
		*b = bucket{minute: minute, min: seq, max: seq}
	}
	b.count++
	b.min, b.max = min(b.min, seq), max(b.max, seq)
	if rttUs > 0 {
		l.sample(float64(rttUs) / 1000)
	}
}

// sample folds one RTT measurement r (ms) into the RFC 6298 estimators.
func (l *link) sample(r float64) {
	if l.srtt == 0 {
		l.srtt, l.rttvar = r, r/2
		return
	}
	l.rttvar = 0.75*l.rttvar + 0.25*math.Abs(l.srtt-r)
	l.srtt = 0.875*l.srtt + 0.125*r
}

// List returns the links, all or only station's, ordered by station.
func (t *Table) List(station string) []*ingestv1.Link {
	nowMinute := t.now().Unix() / int64(bucketLength/time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*ingestv1.Link, 0, len(t.m))
	for id, l := range t.m {
		if station != "" && id != station {
			continue
		}
		var count, lo, hi uint64
		for _, b := range l.buckets {
			if b.minute == 0 || nowMinute-b.minute >= buckets {
				continue
			}
			if count == 0 {
				lo, hi = b.min, b.max
			}
			count += b.count
			lo, hi = min(lo, b.min), max(hi, b.max)
		}
		loss := 0.0
		if count > 0 {
			if expected := hi - lo + 1; expected > count {
				loss = 1 - float64(count)/float64(expected)
			}
		}
		out = append(out, &ingestv1.Link{
			StationId:      id,
			Site:           t.site,
			Transport:      l.transport,
			LastSeenMs:     l.lastSeen.UnixMilli(),
			RecentAccepted: count,
			RecentLoss:     loss,
			SrttMs:         l.srtt,
			RttvarMs:       l.rttvar,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StationId < out[j].StationId })
	return out
}

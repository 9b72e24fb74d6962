package links

import (
	"github.com/prometheus/client_golang/prometheus"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// Per-station series would be thousands; the table is exported as the
// number of links per transport and as distributions of smoothed RTT and
// recent loss over the links, computed at each scrape.
var (
	descLinks = prometheus.NewDesc("shindo_ingest_links", "Station links seen in the last 5 minutes, by current transport.",
		[]string{"site", "transport"}, nil)
	descSRTT = prometheus.NewDesc("shindo_ingest_link_srtt_seconds", "Smoothed RTT of the station links (RFC 6298), over links.",
		[]string{"site"}, nil)
	descLoss = prometheus.NewDesc("shindo_ingest_link_loss_ratio", "Packet loss over the last 5 minutes, over links.",
		[]string{"site"}, nil)

	srttBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}
	lossBuckets = []float64{0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}
)

// Collector exports the table's links as Prometheus metrics.
func (t *Table) Collector() prometheus.Collector { return collector{t} }

type collector struct{ t *Table }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLinks
	ch <- descSRTT
	ch <- descLoss
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	counts := map[ingestv1.Transport]int{}
	srtt := histogram{bounds: srttBuckets}
	loss := histogram{bounds: lossBuckets}
	for _, l := range c.t.List("") {
		if l.GetRecentAccepted() == 0 {
			continue // not heard from in 5 minutes
		}
		counts[l.GetTransport()]++
		if l.GetSrttMs() > 0 {
			srtt.observe(l.GetSrttMs() / 1000)
		}
		loss.observe(l.GetRecentLoss())
	}
	for tr, name := range map[ingestv1.Transport]string{ingestv1.Transport_TRANSPORT_UDP: "udp", ingestv1.Transport_TRANSPORT_WS: "ws"} {
		ch <- prometheus.MustNewConstMetric(descLinks, prometheus.GaugeValue, float64(counts[tr]), c.t.site, name)
	}
	ch <- srtt.metric(descSRTT, c.t.site)
	ch <- loss.metric(descLoss, c.t.site)
}

type histogram struct {
	bounds []float64
	counts []uint64
	n      uint64
	sum    float64
}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(h.bounds))
	}
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
		}
	}
	h.n++
	h.sum += v
}

func (h *histogram) metric(d *prometheus.Desc, site string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.bounds))
	for i, b := range h.bounds {
		if h.counts != nil {
			buckets[b] = h.counts[i]
		} else {
			buckets[b] = 0
		}
	}
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, buckets, site)
}

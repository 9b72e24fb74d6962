package edge

import (
	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/svc-edge/internal/route"
)

var (
	apiRequestsDesc = prometheus.NewDesc("shindo_edge_api_requests_total",
		"Data-API requests sent to a core (retries included).", []string{"core"}, nil)
	apiFailuresDesc = prometheus.NewDesc("shindo_edge_api_failures_total",
		"Data-API requests that failed at a core (connection error or 5xx).", []string{"core"}, nil)
	apiAdmittedDesc = prometheus.NewDesc("shindo_edge_api_core_admitted",
		"1 while a core receives data-API requests, 0 while it is ejected.", []string{"core"}, nil)
	apiInFlightDesc = prometheus.NewDesc("shindo_edge_api_in_flight",
		"Data-API requests in flight at a core.", []string{"core"}, nil)
	apiLatencyDesc = prometheus.NewDesc("shindo_edge_api_latency_seconds",
		"Smoothed latency of a core's data-API responses.", []string{"core"}, nil)
)

// routeCollector exports the balancer's live view of the cores.
type routeCollector struct{ bal *route.Balancer }

func (routeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{apiRequestsDesc, apiFailuresDesc, apiAdmittedDesc, apiInFlightDesc, apiLatencyDesc} {
		ch <- d
	}
}

func (c routeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.bal.Status() {
		admitted := 0.0
		if s.Admitted {
			admitted = 1
		}
		ch <- prometheus.MustNewConstMetric(apiRequestsDesc, prometheus.CounterValue, float64(s.Requests), s.Base)
		ch <- prometheus.MustNewConstMetric(apiFailuresDesc, prometheus.CounterValue, float64(s.Failures), s.Base)
		ch <- prometheus.MustNewConstMetric(apiAdmittedDesc, prometheus.GaugeValue, admitted, s.Base)
		ch <- prometheus.MustNewConstMetric(apiInFlightDesc, prometheus.GaugeValue, float64(s.InFlight), s.Base)
		ch <- prometheus.MustNewConstMetric(apiLatencyDesc, prometheus.GaugeValue, s.Latency.Seconds(), s.Base)
	}
}

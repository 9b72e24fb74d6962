package stationcmd

import (
	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/sdk/uplink"
)

// uplinkCollector exports each uplink's state as Prometheus metrics,
// labelled by uplink name.
type uplinkCollector []*uplink.Uplink

var (
	desc = func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("shindo_station_uplink_"+name, help, []string{"uplink"}, nil)
	}
	descSent          = desc("sent_total", "Packets sent, first transmissions.")
	descAcked         = desc("acked_total", "Packets acked.")
	descRetransmitted = desc("retransmitted_total", "Packets retransmitted.")
	descLost          = desc("lost_total", "Packets unacked after their retransmission.")
	descBadAcks       = desc("bad_acks_total", "Acks dropped for a bad MAC.")
	descProbes        = desc("probes_total", "UDP probes sent while on WebSocket.")
	descToWS          = desc("switches_to_ws_total", "Switches from UDP to WebSocket.")
	descToUDP         = desc("switches_to_udp_total", "Switches from WebSocket back to UDP.")
	descOnWS          = desc("stations_on_ws", "Stations whose uplink is on WebSocket now.")
	descSRTT          = desc("srtt_seconds", "Smoothed round-trip time (mean over stations).")
	descTimeouts      = desc("consecutive_timeouts", "Current run of ack timeouts (largest over stations).")
	descProbesOK      = desc("probes_ok", "Current run of acked probes (largest over stations).")
)

func (c uplinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSent, descAcked, descRetransmitted, descLost, descBadAcks, descProbes,
		descToWS, descToUDP, descOnWS, descSRTT, descTimeouts, descProbesOK} {
		ch <- d
	}
}

func (c uplinkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c {
		s, name := u.Stats(), u.Name()
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter(descSent, s.Sent)
		counter(descAcked, s.Acked)
		counter(descRetransmitted, s.Retransmitted)
		counter(descLost, s.Lost)
		counter(descBadAcks, s.BadAcks)
		counter(descProbes, s.Probes)
		counter(descToWS, s.ToWS)
		counter(descToUDP, s.ToUDP)
		gauge(descOnWS, float64(s.OnWS))
		gauge(descSRTT, s.SRTT.Seconds())
		gauge(descTimeouts, float64(s.ConsecutiveTimeouts))
		gauge(descProbesOK, float64(s.ProbesOK))
	}
}

package notify

import "github.com/prometheus/client_golang/prometheus"

// Results of a post, the values of the result label.
const (
	resultAccepted     = "accepted"
	resultDuplicate    = "duplicate"
	resultUnauthorized = "unauthorized"
	resultInvalid      = "invalid"
	resultTooMany      = "too_many_pending"
	resultUnavailable  = "unavailable"
)

type metrics struct {
	posts       *prometheus.CounterVec
	postSeconds prometheus.Histogram
	stores      *prometheus.CounterVec
	delivered   prometheus.Counter
	acked       prometheus.Counter
	takeovers   *prometheus.CounterVec
	lost        prometheus.Counter
	subs        prometheus.Gauge
	repaired    prometheus.Counter
	missing     prometheus.Counter
	undecodable prometheus.Counter
	sessions    prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		posts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_edge_notify_posts_total",
			Help: "Notification posts by result: accepted, duplicate (a repeated id), unauthorized, invalid, too_many_pending, unavailable.",
		}, []string{"result"}),
		postSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shindo_edge_notify_post_seconds",
			Help:    "Time to store and commit an accepted notification.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		stores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_edge_notify_stores_total",
			Help: "Payload writes to a core's NOTIFY stream by core and result (ok, failed); failed ones are repaired later.",
		}, []string{"core", "result"}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_delivered_total",
			Help: "Notifications handed to a client's stream (redeliveries of unacknowledged ones included).",
		}),
		acked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_acked_total",
			Help: "Notifications acknowledged by their clients through this edge.",
		}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_edge_notify_ownership_takeovers_total",
			Help: "Clients whose delivery this edge took over, by previous owner: none, this_edge (a reconnect here), other_edge (the client moved).",
		}, []string{"previous"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_ownership_lost_total",
			Help: "Subscriptions ended because another subscription (here or at another edge) took the client over.",
		}),
		subs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shindo_edge_notify_subscriptions",
			Help: "Clients whose notifications this edge delivers now.",
		}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_repaired_total",
			Help: "Payloads copied to a core that missed them when they were posted.",
		}),
		missing: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_missing_total",
			Help: "Committed notifications whose payload no core holds any more (expired or a store lost): skipped.",
		}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_undecodable_total",
			Help: "Stored payloads read back that were not a notification payload (stored by an older version, or corrupt): taken as missing on that core.",
		}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shindo_edge_notify_etcd_sessions_total",
			Help: "etcd leases this edge held ownership on; more than one means a lease was lost and its subscriptions ended.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.posts, m.postSeconds, m.stores, m.delivered, m.acked, m.takeovers, m.lost, m.subs, m.repaired, m.missing, m.undecodable, m.sessions}
}

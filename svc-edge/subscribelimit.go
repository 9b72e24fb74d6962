package edge

import (
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"shindo.dev/lib/ratelimit"
)

// subscribeLimit bounds the notification subscriptions an edge opens.
// Subscribing needs no credential — knowing a client ID is the capability
// to receive — but each costs etcd writes (the client's ownership taken,
// then released), so a flood of made-up client IDs would load etcd for
// every edge and core. Subscriptions draw on their address's bucket (IPv6
// by /64), then on the edge's; an empty bucket is 429 with Retry-After,
// counted, and the app reconnects later as it does after any refusal.
type subscribeLimit struct {
	buckets   *ratelimit.Limiter
	addrRate  float64
	addrBurst int
	edgeRate  float64
	edgeBurst int
	refused   *prometheus.CounterVec
}

func newSubscribeLimit(addrRate float64, addrBurst int, edgeRate float64, edgeBurst int) *subscribeLimit {
	return &subscribeLimit{
		buckets:  ratelimit.New(100_000),
		addrRate: addrRate, addrBurst: addrBurst, edgeRate: edgeRate, edgeBurst: edgeBurst,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shindo_edge_notify_subscriptions_refused_total",
			Help: "Notification subscriptions refused for their address's or the edge's rate, by bucket.",
		}, []string{"bucket"}),
	}
}

// admit draws on r's address's bucket and the edge's, answering 429 and
// returning false when either is empty.
func (l *subscribeLimit) admit(w http.ResponseWriter, r *http.Request) bool {
	bucket := "address"
	ok, wait := l.buckets.Allow("a:"+clientAddr(r), l.addrRate, l.addrBurst)
	if ok {
		bucket = "edge"
		ok, wait = l.buckets.Allow("edge", l.edgeRate, l.edgeBurst)
	}
	if ok {
		return true
	}
	l.refused.WithLabelValues(bucket).Inc()
	w.Header().Set("Retry-After", strconv.Itoa(int(max(1, math.Ceil(wait.Seconds())))))
	writeError(w, http.StatusTooManyRequests, "too many notification subscriptions from this address or at this edge; retry later")
	return false
}

package notify

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkPostDeliver measures one notification's way from Post to the
// subscriber's channel at one edge, one at a time: store on both cores
// (each fsyncing), commit in etcd (fsyncing), watch event, fetch from a
// core. ns/op is that latency; p50-ms and p99-ms its distribution.
// Every 100 notifications the client acknowledges them, as a client does.
func BenchmarkPostDeliver(b *testing.B) {
	env := newEnvSync(b, true)
	tpe := env.edge(b, "TPE-1")
	client := newClient(b)
	ch, err := tpe.svc.Subscribe(b.Context(), client)
	if err != nil {
		b.Fatal(err)
	}
	data := json.RawMessage(`{"title":"地震速報","body":"震度5弱 花蓮県","eq":"2026-11-29T12:00:00Z"}`)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		rec, err := tpe.svc.Post(b.Context(), client, "", data)
		if err != nil {
			b.Fatal(err)
		}
		n := <-ch
		if n.Seq != rec.Seq {
			b.Fatalf("delivered %d, posted %d", n.Seq, rec.Seq)
		}
		lat = append(lat, time.Since(start))
		if n.Seq%100 == 0 {
			if _, err := tpe.svc.Ack(b.Context(), client, n.Seq); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportLatency(b, lat)
}

// BenchmarkPostDeliverParallel measures throughput with many clients at
// once, split over two edges: each client's notifications are posted at
// one edge and delivered at the other. notif/s is the rate of notifications
// posted and delivered.
func BenchmarkPostDeliverParallel(b *testing.B) {
	env := newEnvSync(b, true)
	edges := []*testEdge{env.edge(b, "TPE-1"), env.edge(b, "KHH-1")}
	data := json.RawMessage(`{"title":"地震速報","body":"震度5弱 花蓮県"}`)
	var mu sync.Mutex
	var lat []time.Duration
	var worker int
	b.SetParallelism(8)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		w := worker
		worker++
		mu.Unlock()
		post, deliver := edges[w%2], edges[(w+1)%2]
		client := newClient(b)
		ch, err := deliver.svc.Subscribe(b.Context(), client)
		if err != nil {
			b.Error(err)
			return
		}
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			rec, err := post.svc.Post(b.Context(), client, "", data)
			if err != nil {
				b.Error(err)
				return
			}
			n := <-ch
			if n.Seq != rec.Seq {
				b.Errorf("delivered %d, posted %d", n.Seq, rec.Seq)
				return
			}
			mine = append(mine, time.Since(t0))
			if n.Seq%100 == 0 {
				if _, err := deliver.svc.Ack(b.Context(), client, n.Seq); err != nil {
					b.Error(err)
					return
				}
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "notif/s")
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

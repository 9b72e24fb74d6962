package chaoscmd

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// detections watches both cores' RTS streams directly and records the
// detections each computes: SPEC §4 wants the same event under the same ID
// at both, from the data alone.
type detections struct {
	mu    sync.Mutex
	cores map[string]*coreWatch
}

type coreWatch struct {
	// seen: detection ID → when this core first and last published it.
	seen map[string]*seenDetection
	// gaps are the times this core's stream was not being read (the core's
	// RTS down, restarting, or partitioned from us): a detection it missed
	// then is no evidence against it.
	gaps    [][2]time.Time
	downAt  time.Time // start of the current gap; zero while connected
	lastErr string
}

type seenDetection struct {
	first, last  time.Time
	firstTrigger int64
	serial       uint32
}

func watchDetections(ctx context.Context, topo *topology) *detections {
	d := &detections{cores: map[string]*coreWatch{}}
	for _, site := range coreSites {
		w := &coreWatch{seen: map[string]*seenDetection{}, downAt: time.Now()}
		d.cores[site] = w
		go d.watch(ctx, w, topo.field(site, "rts", "grpc"), topo.grpc)
	}
	return d
}

func (d *detections) watch(ctx context.Context, w *coreWatch, addr string, creds credentials.TransportCredentials) {
	for ctx.Err() == nil {
		err := d.stream(ctx, w, addr, creds)
		d.mu.Lock()
		if w.downAt.IsZero() {
			w.downAt = time.Now()
		}
		if err != nil {
			w.lastErr = err.Error()
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (d *detections) stream(ctx context.Context, w *coreWatch, addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := rtsv1.NewRTSServiceClient(conn).Subscribe(sctx, &rtsv1.SubscribeRequest{Subscriber: "shindo-chaos"})
	if err != nil {
		return err
	}
	// A stream that delivers nothing for 3 s is as good as down.
	stall := time.AfterFunc(3*time.Second, cancel)
	defer stall.Stop()
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		stall.Reset(3 * time.Second)
		now := time.Now()
		d.mu.Lock()
		if !w.downAt.IsZero() {
			w.gaps = append(w.gaps, [2]time.Time{w.downAt, now})
			w.downAt = time.Time{}
		}
		for _, det := range r.GetSnapshot().GetDetections() {
			s := w.seen[det.GetId()]
			if s == nil {
				s = &seenDetection{first: now, firstTrigger: det.GetFirstTriggerMs()}
				w.seen[det.GetId()] = s
			}
			s.last, s.serial = now, max(s.serial, det.GetSerial())
		}
		d.mu.Unlock()
	}
}

// findings: a detection one core published while the other was being
// read throughout its life must be at the other too, under the same ID.
func (d *detections) findings(end time.Time) (ids, unverifiable int, violations []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := map[string]bool{}
	for _, w := range d.cores {
		if !w.downAt.IsZero() {
			w.gaps = append(w.gaps, [2]time.Time{w.downAt, end})
			w.downAt = time.Time{}
		}
		for id := range w.seen {
			all[id] = true
		}
	}
	var sorted []string
	for id := range all {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		for _, site := range coreSites {
			peer := coreSites[0]
			if site == peer {
				peer = coreSites[1]
			}
			s, ok := d.cores[site].seen[id]
			if !ok || d.cores[peer].seen[id] != nil {
				continue
			}
			// Its life from its first trigger to the last time it was seen.
			from := time.UnixMilli(s.firstTrigger)
			if from.IsZero() || from.After(s.first) {
				from = s.first
			}
			if overlaps(d.cores[peer].gaps, from, s.last) {
				unverifiable++
				continue
			}
			violations = append(violations, fmt.Sprintf("detection %s (serial %d, %s–%s) at %s only: %s was read throughout and never published it",
				id, s.serial, s.first.Format(time.TimeOnly), s.last.Format(time.TimeOnly), site, peer))
		}
	}
	return len(sorted), unverifiable, violations
}

func overlaps(gaps [][2]time.Time, a, b time.Time) bool {
	for _, g := range gaps {
		if !g[0].After(b) && !g[1].Before(a) {
			return true
		}
	}
	return false
}

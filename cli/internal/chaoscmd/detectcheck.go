package chaoscmd

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// detections watches both cores' RTS streams directly and records the
// detections each computes: SPEC §4 wants the same event under the same ID
// at both, from the data alone.
type detections struct {
	mu    sync.Mutex
	cores map[string]*coreWatch
	// most is the most stations a snapshot of either core listed: the
	// fleet, as far as the cores can see it.
	most int
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

	// The latest snapshot: when it came and how many stations it listed.
	latestAt time.Time
	stations int
	// finals: each detection this stream has listed as final, as it was
	// then; a final detection never changes again (rts.v1). A new stream
	// starts afresh: the core may have restarted.
	finals     map[string]*rtsv1.Detection
	finalsSeen int
	changed    []string
}

type seenDetection struct {
	first, last  time.Time
	firstTrigger int64
	serial       uint32
}

func watchDetections(ctx context.Context, topo *topology) *detections {
	d := &detections{cores: map[string]*coreWatch{}}
	for _, site := range coreSites {
		w := &coreWatch{seen: map[string]*seenDetection{}, downAt: time.Now(), finals: map[string]*rtsv1.Detection{}}
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
			w.finals = map[string]*rtsv1.Detection{}
		}
		w.latestAt, w.stations = now, len(r.GetSnapshot().GetStations())
		d.most = max(d.most, w.stations)
		for _, det := range r.GetSnapshot().GetDetections() {
			w.checkFinal(det, r.GetSnapshot().GetTimeMs())
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

// checkFinal records a detection listed as final, and a change of one
// listed as final before (reopened, or final with other content).
func (w *coreWatch) checkFinal(det *rtsv1.Detection, tickMs int64) {
	was, ok := w.finals[det.GetId()]
	switch {
	case !ok && det.GetFinal():
		w.finals[det.GetId()] = det
		w.finalsSeen++
	case ok && !proto.Equal(was, det):
		w.changed = append(w.changed, fmt.Sprintf("detection %s final at serial %d (tick %s), then serial %d final %t at tick %s",
			det.GetId(), was.GetSerial(), time.UnixMilli(was.GetUpdatedMs()).Format("15:04:05.0"),
			det.GetSerial(), det.GetFinal(), time.UnixMilli(tickMs).Format("15:04:05.0")))
		if det.GetFinal() {
			w.finals[det.GetId()] = det
		} else {
			delete(w.finals, det.GetId())
		}
	}
}

// blindAfter is how stale a core's latest snapshot may be, and sightedShare
// the share of the fleet it must list, for the core to count as whole: a
// restarted RTS that serves but sees no station is not.
const (
	blindAfter   = 2 * time.Second
	sightedShare = 0.9
)

// blind returns which core does not see the fleet now, or has sent no
// snapshot since the fault began at since (a killed RTS's last snapshot
// is still fresh for a moment after its restart), or "".
func (d *detections) blind(since time.Time) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, site := range coreSites {
		w := d.cores[site]
		switch {
		case !w.latestAt.After(since):
			return site + "'s RTS sent no snapshot since the fault"
		case time.Since(w.latestAt) > blindAfter:
			return fmt.Sprintf("%s's RTS sent no snapshot for %s", site, time.Since(w.latestAt).Round(100*time.Millisecond))
		case float64(w.stations) < sightedShare*float64(d.most):
			return fmt.Sprintf("%s's RTS lists %d of the %d stations seen", site, w.stations, d.most)
		}
	}
	return ""
}

// reopened returns the changes of final detections each core's stream
// showed.
func (d *detections) reopened() (finals int, violations []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, site := range coreSites {
		w := d.cores[site]
		finals += w.finalsSeen
		for _, c := range w.changed {
			violations = append(violations, site+": "+c)
		}
	}
	return finals, violations
}

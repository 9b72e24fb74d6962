// Package wavelive serves stations' live waveforms to an edge's clients
// (GET /v1/stream/waveform). A station's samples are fetched from the cores
// only while someone watches it: the first client opens a Live stream to
// every core, and chunks are published once each, in time order, whichever
// core delivered them first — so a core dying costs nothing, with no
// switching to get wrong. The streams close a while after the last client
// left, so a client reconnecting within that time resumes from the
// station's history.
package wavelive

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/svc-edge/internal/sse"
)

// Options tune the hub.
type Options struct {
	// SSE are the options of each station's event hub (its History is how
	// far back a reconnecting client resumes).
	SSE sse.Options
	// Linger is how long a station's streams stay open after its last
	// client left.
	Linger time.Duration
	// MaxStations caps the stations watched at once.
	MaxStations int
}

// ErrTooManyStations is returned when MaxStations are watched already.
var ErrTooManyStations = errors.New("too many stations watched on this edge")

// Hub holds the watched stations.
type Hub struct {
	opts    Options
	clients []waveformv1.WaveformServiceClient
	targets []string
	log     *slog.Logger

	mu       sync.Mutex
	stations map[string]*station
	ctx      context.Context
}

type station struct {
	hub    *sse.Hub
	refs   int
	cancel context.CancelFunc
	linger *time.Timer

	mu   sync.Mutex
	last int64 // first_sample_ms of the newest chunk published
}

// New returns a hub over the cores' waveform services; ctx bounds every
// stream it opens.
func New(ctx context.Context, targets []string, conns []*grpc.ClientConn, opts Options, log *slog.Logger) *Hub {
	h := &Hub{opts: opts, targets: targets, log: log, stations: map[string]*station{}, ctx: ctx}
	for _, c := range conns {
		h.clients = append(h.clients, waveformv1.NewWaveformServiceClient(c))
	}
	return h
}

// Watched returns how many stations are watched.
func (h *Hub) Watched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.stations)
}

// Acquire returns the event hub of a station, starting its streams if it
// was not watched; Release must follow.
func (h *Hub) Acquire(id string) (*sse.Hub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.stations[id]
	if !ok {
		if len(h.stations) >= h.opts.MaxStations {
			return nil, ErrTooManyStations
		}
		ctx, cancel := context.WithCancel(h.ctx)
		st = &station{hub: sse.NewHub(h.opts.SSE), cancel: cancel}
		h.stations[id] = st
		for i := range h.clients {
			go h.follow(ctx, st, id, i)
		}
	}
	if st.linger != nil {
		st.linger.Stop()
		st.linger = nil
	}
	st.refs++
	return st.hub, nil
}

// Release ends one client's interest in a station; after Linger without
// clients its streams close.
func (h *Hub) Release(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stations[id]
	if st == nil {
		return
	}
	if st.refs--; st.refs > 0 {
		return
	}
	st.linger = time.AfterFunc(h.opts.Linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if st.refs == 0 && h.stations[id] == st {
			st.cancel()
			delete(h.stations, id)
		}
	})
}

// follow streams a station's chunks from core i until ctx ends,
// reconnecting with backoff.
func (h *Hub) follow(ctx context.Context, st *station, id string, i int) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := h.clients[i].Live(ctx, &waveformv1.LiveRequest{StationIds: []string{id}})
		if err == nil {
			for {
				resp, err := stream.Recv()
				if err != nil {
					if ctx.Err() == nil {
						h.log.DebugContext(ctx, "live waveform stream ended", slog.String("core", h.targets[i]), slog.String("station", id), slog.Any("error", err))
					}
					break
				}
				backoff = 100 * time.Millisecond
				st.offer(resp.GetChunk())
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// offer publishes a chunk unless one at or after its time was published.
func (st *station) offer(c *waveformv1.Chunk) {
	if c == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	t := c.GetFirstSampleMs()
	if t <= st.last {
		return
	}
	st.last = t
	st.hub.Publish(sse.NewEventID("waveform", sse.ID(t, 0), "waveform", ChunkJSON(c)))
}

// chunkDoc is a chunk as clients read it.
type chunkDoc struct {
	Station string  `json:"station"`
	Time    int64   `json:"time"`
	Rate    uint32  `json:"rate"`
	Scale   float32 `json:"scale"`
	NS      []int32 `json:"ns"`
	EW      []int32 `json:"ew"`
	UD      []int32 `json:"ud"`
}

// ChunkJSON renders a chunk as the event's data:
// {"station","time","rate","scale","ns","ew","ud"}, counts × scale = gal.
func ChunkJSON(c *waveformv1.Chunk) []byte {
	b, _ := json.Marshal(chunkDoc{
		Station: c.GetStationId(), Time: c.GetFirstSampleMs(), Rate: c.GetRateHz(), Scale: c.GetScaleGal(),
		NS: nonNil(c.GetNs()), EW: nonNil(c.GetEw()), UD: nonNil(c.GetUd()),
	})
	return b
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

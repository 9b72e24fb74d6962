// Package links serves the link quality of GET /v1/links from every core's
// ingest: each core measures only the uplinks that reach it, and a reader
// of either core's data API wants both sides of every station — primary
// and backup — in one answer.
package links

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// Merged is an IngestService whose ListLinks asks this core's ingest and
// the other cores' at once and merges their answers.
type Merged struct {
	ingestv1.UnimplementedIngestServiceServer

	own   ingestv1.IngestServiceClient
	peers []ingestv1.IngestServiceClient
	// peerWait bounds a peer's answer: an unreachable or partitioned core
	// costs the reader this much, never more, and is left out.
	peerWait time.Duration
	log      *slog.Logger
}

// New returns the merged service: own is this core's ingest, peers the
// others'.
func New(own ingestv1.IngestServiceClient, peers []ingestv1.IngestServiceClient, peerWait time.Duration, log *slog.Logger) *Merged {
	return &Merged{own: own, peers: peers, peerWait: peerWait, log: log}
}

// ListLinks implements ingestv1.IngestServiceServer. This core's answer is
// required (its failure is the request's); a peer that fails or is slow is
// left out and logged, so the answer holds at least this core's links.
func (m *Merged) ListLinks(ctx context.Context, req *ingestv1.ListLinksRequest) (*ingestv1.ListLinksResponse, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		links []*ingestv1.Link
	)
	for _, p := range m.peers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, m.peerWait)
			defer cancel()
			resp, err := p.ListLinks(ctx, req)
			if err != nil {
				m.log.DebugContext(ctx, "a peer core's links left out", slog.Any("error", err))
				return
			}
			mu.Lock()
			links = append(links, resp.GetLinks()...)
			mu.Unlock()
		})
	}
	resp, err := m.own.ListLinks(ctx, req)
	wg.Wait()
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
			return nil, err
		}
		return nil, status.Error(codes.Unavailable, "this core's ingest is unavailable")
	}
	links = append(links, resp.GetLinks()...)
	slices.SortFunc(links, func(a, b *ingestv1.Link) int {
		return cmp.Or(cmp.Compare(a.GetStationId(), b.GetStationId()), cmp.Compare(a.GetSite(), b.GetSite()))
	})
	// A peer given twice, or this core listed as its own peer, must not
	// show a link twice.
	links = slices.CompactFunc(links, func(a, b *ingestv1.Link) bool {
		return a.GetStationId() == b.GetStationId() && a.GetSite() == b.GetSite()
	})
	return &ingestv1.ListLinksResponse{Links: links}, nil
}

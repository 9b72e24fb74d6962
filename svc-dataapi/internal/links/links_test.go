package links

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
)

// core answers ListLinks as one core's ingest would: its own links, after
// a delay, or an error.
type core struct {
	site  string
	ids   []string
	delay time.Duration
	err   error
}

func (c core) ListLinks(ctx context.Context, req *ingestv1.ListLinksRequest, _ ...grpc.CallOption) (*ingestv1.ListLinksResponse, error) {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	var out []*ingestv1.Link
	for _, id := range c.ids {
		if req.GetStationId() == "" || req.GetStationId() == id {
			out = append(out, &ingestv1.Link{StationId: id, Site: c.site})
		}
	}
	return &ingestv1.ListLinksResponse{Links: out}, nil
}

func render(resp *ingestv1.ListLinksResponse) string {
	var parts []string
	for _, l := range resp.GetLinks() {
		parts = append(parts, l.GetStationId()+"@"+l.GetSite())
	}
	return strings.Join(parts, " ")
}

// TestMerged: both cores' links in one list, by station then core; a
// slow or failing peer is left out within the wait; this core's failure
// is the request's; the station filter reaches every core.
func TestMerged(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	tnn := core{site: "TNN-1", ids: []string{"B", "A"}}
	tyo := core{site: "TYO-1", ids: []string{"A", "C"}}

	m := New(tnn, []ingestv1.IngestServiceClient{tyo}, time.Second, log)
	resp, err := m.ListLinks(ctx, &ingestv1.ListLinksRequest{})
	if got := render(resp); err != nil || got != "A@TNN-1 A@TYO-1 B@TNN-1 C@TYO-1" {
		t.Fatalf("merged %q, %v", got, err)
	}
	resp, _ = m.ListLinks(ctx, &ingestv1.ListLinksRequest{StationId: "A"})
	if got := render(resp); got != "A@TNN-1 A@TYO-1" {
		t.Fatalf("station A: %q", got)
	}

	// The peer partitioned away: left out after the wait, not longer.
	slow := tyo
	slow.delay = time.Minute
	m = New(tnn, []ingestv1.IngestServiceClient{slow}, 100*time.Millisecond, log)
	start := time.Now()
	resp, err = m.ListLinks(ctx, &ingestv1.ListLinksRequest{})
	if got := render(resp); err != nil || got != "A@TNN-1 B@TNN-1" {
		t.Fatalf("with the peer away: %q, %v", got, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("waited %s for the peer", took)
	}

	// The peer down.
	down := tyo
	down.err = status.Error(codes.Unavailable, "connection refused")
	m = New(tnn, []ingestv1.IngestServiceClient{down}, time.Second, log)
	if resp, err := m.ListLinks(ctx, &ingestv1.ListLinksRequest{}); err != nil || render(resp) != "A@TNN-1 B@TNN-1" {
		t.Fatalf("with the peer down: %q, %v", render(resp), err)
	}

	// This core's ingest down: the request fails as unavailable, even with
	// the peer up; a plain error becomes Unavailable too.
	for _, e := range []error{status.Error(codes.Unavailable, "refused"), errors.New("broken")} {
		own := tnn
		own.err = e
		m = New(own, []ingestv1.IngestServiceClient{tyo}, time.Second, log)
		if _, err := m.ListLinks(ctx, &ingestv1.ListLinksRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("own ingest failing with %v: %v", e, err)
		}
	}

	// A peer listed twice (or this core as its own peer) shows once.
	m = New(tnn, []ingestv1.IngestServiceClient{tyo, tyo, tnn}, time.Second, log)
	if resp, _ := m.ListLinks(ctx, &ingestv1.ListLinksRequest{}); render(resp) != "A@TNN-1 A@TYO-1 B@TNN-1 C@TYO-1" {
		t.Fatalf("repeated peers: %q", render(resp))
	}
}

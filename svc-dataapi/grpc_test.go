package dataapi

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"shindo.dev/devkit/pgtest"
	datav1 "shindo.dev/gen/shindo/data/v1"
)

// TestGRPCGuarded: the gRPC data API is no side door around the REST
// guard. Anonymous calls draw on the address's bucket, made-up keys reach
// the database no faster than the address's lookup bucket allows, a key
// draws on its own bucket, an admin token is not limited, and the health
// service is exempt; an empty bucket is ResourceExhausted with a
// retry-after trailer.
func TestGRPCGuarded(t *testing.T) {
	cfg := testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken,
		"-rate-limit-ip", "0.01", "-rate-burst-ip", "3", "-rate-limit-key", "0.01", "-rate-burst-key", "5")
	base := start(t, cfg)
	_, key := newClient(t, base, adminToken, "writer", nil)

	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := datav1.NewDataServiceClient(conn)
	call := func(cred string) (codes.Code, metadata.MD) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if cred != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cred)
		}
		var trailer metadata.MD
		_, err := data.ListReports(ctx, &datav1.ListReportsRequest{}, grpc.Trailer(&trailer))
		return status.Code(err), trailer
	}
	tally := func(cred func(i int) string, n int) map[codes.Code]int {
		got := map[codes.Code]int{}
		for i := range n {
			c, trailer := call(cred(i))
			got[c]++
			if c == codes.ResourceExhausted {
				if s, err := strconv.Atoi(firstOf(trailer.Get("retry-after"))); err != nil || s < 1 {
					t.Fatalf("ResourceExhausted without a retry-after trailer: %v", trailer)
				}
			}
		}
		return got
	}

	if got := tally(func(int) string { return adminToken }, 20); got[codes.OK] != 20 {
		t.Fatalf("admin token: %v, want 20 OK", got)
	}
	if got := tally(func(int) string { return "" }, 10); got[codes.OK] != 3 || got[codes.ResourceExhausted] != 7 {
		t.Fatalf("anonymous with a burst of 3: %v", got)
	}
	if got := tally(func(int) string { return key }, 8); got[codes.OK] != 5 || got[codes.ResourceExhausted] != 3 {
		t.Fatalf("a key with a burst of 5: %v", got)
	}
	// Well-formed keys nobody issued: each would cost a database lookup.
	// The real key's lookup drew one token of the address's lookup bucket.
	made := func(i int) string {
		return fmt.Sprintf("shk_%016x.%s", i, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	}
	if got := tally(made, 20); got[codes.Unauthenticated] != 2 || got[codes.ResourceExhausted] != 18 {
		t.Fatalf("made-up keys with a lookup burst of 3: %v", got)
	}
	health := healthpb.NewHealthClient(conn)
	for range 10 {
		if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check limited: %v", err)
		}
	}
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

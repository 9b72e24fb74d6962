package clients

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/svc-dataapi/internal/auth"
)

// store is an in-memory Store.
type store struct {
	created []metadb.NewClient
	clients map[string]*metadb.Client // by key
	err     error                     // of ClientsByKeys
	asked   [][]string
}

func (s *store) CreateClient(_ context.Context, nc metadb.NewClient) (*metadb.Client, string, error) {
	s.created = append(s.created, nc)
	topics, err := metadb.NormalizeTopics(nc.Topics)
	if err != nil {
		return nil, "", err
	}
	return &metadb.Client{KeyID: "shk_0123456789abcdef", Role: nc.Role, Topics: topics, CreatedAt: time.UnixMilli(1000)},
		"shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil
}

func (s *store) ListClients(context.Context) ([]metadb.Client, error) { return nil, nil }

func (s *store) RevokeClient(context.Context, string) (*metadb.Client, error) {
	return nil, metadb.ErrNotFound
}

func (s *store) ClientsByKeys(_ context.Context, keys []string) ([]*metadb.Client, error) {
	s.asked = append(s.asked, keys)
	if s.err != nil {
		return nil, s.err
	}
	out := make([]*metadb.Client, len(keys))
	for i, k := range keys {
		out[i] = s.clients[k]
	}
	return out, nil
}

// admins admits everyone as an admin.
type admins struct{}

func (admins) Require(context.Context, string) (auth.Principal, error) {
	return auth.Principal{Token: true, Role: metadb.RoleAdmin}, nil
}

func (admins) Forget(string) {}

func newServer(st Store) *Server {
	return New(st, admins{}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestCreateClientValidation(t *testing.T) {
	t.Parallel()
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, tc := range []struct {
		name string
		req  *datav1.CreateClientRequest
		want []string // topics created; nil: InvalidArgument
		text string   // in the refusal
	}{
		{"writer", &datav1.CreateClientRequest{Role: "writer"}, []string{}, ""},
		{"admin", &datav1.CreateClientRequest{Role: "admin"}, []string{}, ""},
		{"subscriber", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{"rts", "eew", "rts"}}, []string{"eew", "rts"}, ""},
		{"every topic", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{"*"}}, []string{"*"}, ""},
		{"32 after repeats", &datav1.CreateClientRequest{Role: "subscriber", Topics: append(many[:32:32], many[:32]...)}, nil, ""},
		{"no role", &datav1.CreateClientRequest{}, nil, "role"},
		{"unknown role", &datav1.CreateClientRequest{Role: "reader"}, nil, "role"},
		{"rate limit", &datav1.CreateClientRequest{Role: "writer", RateLimit: -1}, nil, "rate_limit"},
		{"rate burst", &datav1.CreateClientRequest{Role: "writer", RateBurst: 1000001}, nil, "rate_burst"},
		{"33 topics", &datav1.CreateClientRequest{Role: "subscriber", Topics: many}, nil, "at most 32"},
		{"empty topic", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{""}}, nil, "topics"},
		{"long topic", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{strings.Repeat("x", 65)}}, nil, "topics"},
		{"upper case", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{"RTS"}}, nil, "topics"},
		{"partial wildcard", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{"eew.*"}}, nil, "topics"},
		{"injection", &datav1.CreateClientRequest{Role: "subscriber", Topics: []string{"'; DROP TABLE api_clients; --"}}, nil, "topics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &store{}
			resp, err := newServer(st).CreateClient(context.Background(), tc.req)
			if tc.text != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.text) || len(st.created) != 0 {
					t.Fatalf("%v (store called %d times), want InvalidArgument about %s", err, len(st.created), tc.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = slices.Sorted(slices.Values(many[:32]))
			}
			if got := resp.GetClient().GetTopics(); !slices.Equal(got, want) || resp.GetClient().GetRole() != tc.req.GetRole() {
				t.Fatalf("created %+v, want topics %q", resp.GetClient(), want)
			}
		})
	}
}

func TestCheckKeys(t *testing.T) {
	t.Parallel()
	const (
		subKey     = "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		revokedKey = "shk_1123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	)
	revoked := time.UnixMilli(5000)
	st := &store{clients: map[string]*metadb.Client{
		subKey:     {KeyID: "shk_0123456789abcdef", Role: metadb.RoleSubscriber, Topics: []string{"rts"}, CreatedAt: time.UnixMilli(1000)},
		revokedKey: {KeyID: "shk_1123456789abcdef", Role: metadb.RoleSubscriber, CreatedAt: time.UnixMilli(1000), RevokedAt: &revoked},
	}}
	s := newServer(st)
	ctx := context.Background()
	resp, err := s.CheckKeys(ctx, &datav1.CheckKeysRequest{Keys: []string{"nope", subKey, revokedKey, subKey}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()
	if len(r) != 4 || r[0].GetKnown() || r[0].GetClient() != nil ||
		!r[1].GetKnown() || r[1].GetClient().GetKeyId() != "shk_0123456789abcdef" || !slices.Equal(r[1].GetClient().GetTopics(), []string{"rts"}) ||
		r[1].GetClient().GetRevokedMs() != 0 ||
		!r[2].GetKnown() || r[2].GetClient().GetRevokedMs() != 5000 ||
		!r[3].GetKnown() {
		t.Fatalf("results %v", r)
	}

	tooMany := make([]string, MaxCheckKeys+1)
	for _, tc := range []struct {
		name string
		keys []string
		err  error
		want codes.Code
	}{
		{"no keys", nil, nil, codes.InvalidArgument},
		{"501 keys", tooMany, nil, codes.InvalidArgument},
		{"500 keys", tooMany[:MaxCheckKeys], nil, codes.OK},
		{"database away", []string{subKey}, fmt.Errorf("clients by keys: %w: connection refused", metadb.ErrUnavailable), codes.Unavailable},
		{"database error", []string{subKey}, fmt.Errorf("clients by keys: %w: relation missing", metadb.ErrDatabase), codes.Unavailable},
		{"timed out", []string{subKey}, context.DeadlineExceeded, codes.Unavailable},
		{"caller left", []string{subKey}, context.Canceled, codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &store{err: tc.err}
			resp, err := newServer(st).CheckKeys(ctx, &datav1.CheckKeysRequest{Keys: tc.keys})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if tc.want == codes.InvalidArgument && len(st.asked) != 0 {
				t.Fatal("a refused request reached the store")
			}
			if err == nil && len(resp.GetResults()) != len(tc.keys) {
				t.Fatalf("%d results for %d keys", len(resp.GetResults()), len(tc.keys))
			}
		})
	}
	if _, err := New(nil, admins{}, time.Second, slog.Default()).CheckKeys(ctx, &datav1.CheckKeysRequest{Keys: []string{subKey}}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("without a database: %v", err)
	}
}

package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"shindo.dev/lib/metadb"
)

type keys struct {
	clients map[string]*metadb.Client
	lookups int
	down    bool
}

func (k *keys) ClientByKey(_ context.Context, key string) (*metadb.Client, error) {
	k.lookups++
	if k.down {
		return nil, fmt.Errorf("%w: connection refused", metadb.ErrUnavailable)
	}
	if c, ok := k.clients[key]; ok {
		return c, nil
	}
	return nil, metadb.ErrNotFound
}

const (
	writerKey     = "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	subscriberKey = "shk_1123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	token         = "bootstrap-token-0123456789"
)

// TestSubscriber: a subscriber key is identified with its topics, may
// subscribe to them only, and holds no role-bound call.
func TestSubscriber(t *testing.T) {
	t.Parallel()
	k := &keys{clients: map[string]*metadb.Client{subscriberKey: {KeyID: "shk_1123456789abcdef", Role: metadb.RoleSubscriber,
		Topics: []string{"eew", "rts"}}}}
	a := New([]string{token}, k)
	p, err := a.Identify(context.Background(), subscriberKey)
	if err != nil || p.Role != metadb.RoleSubscriber || len(p.Topics) != 2 {
		t.Fatalf("subscriber: %+v %v", p, err)
	}
	for _, tc := range []struct {
		topic string
		want  bool
	}{{"rts", true}, {"eew", true}, {"intensity", false}, {"*", false}} {
		if got := p.MaySubscribe(tc.topic); got != tc.want {
			t.Errorf("subscribe to %q: %v, want %v", tc.topic, got, tc.want)
		}
	}
	if p.Allows(metadb.RoleWriter) || p.Allows(metadb.RoleAdmin) {
		t.Error("a subscriber holds a writer's or an admin's calls")
	}
	admin, _ := a.Identify(context.Background(), token)
	if !admin.MaySubscribe("intensity") || !admin.Allows(metadb.RoleSubscriber) {
		t.Error("an admin token may not subscribe to every topic")
	}
}

func TestIdentify(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	k := &keys{clients: map[string]*metadb.Client{writerKey: {KeyID: "shk_0123456789abcdef", Role: metadb.RoleWriter, RateLimit: 3}}}
	a := New([]string{token}, k)
	a.now = func() time.Time { return now }
	ctx := context.Background()

	if p, err := a.Identify(ctx, token); err != nil || !p.Token || p.Role != metadb.RoleAdmin {
		t.Fatalf("token: %+v %v", p, err)
	}
	for range 3 {
		if p, err := a.Identify(ctx, writerKey); err != nil || p.Role != metadb.RoleWriter || p.RateLimit != 3 {
			t.Fatalf("key: %+v %v", p, err)
		}
	}
	if k.lookups != 1 {
		t.Fatalf("%d lookups, want 1 (cached)", k.lookups)
	}
	now = now.Add(CacheTTL + time.Second)
	a.Identify(ctx, writerKey)
	if k.lookups != 2 {
		t.Fatal("cache never expires")
	}
	if _, err := a.Identify(ctx, "shk_0123456789abcdef.BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown key: %v", err)
	}
	before := k.lookups
	if _, err := a.Identify(ctx, "' OR 1=1"); !errors.Is(err, ErrInvalid) || k.lookups != before {
		t.Fatalf("malformed key: %v, looked up: %v", err, k.lookups != before)
	}
	if _, err := a.Identify(ctx, ""); !errors.Is(err, ErrMissing) {
		t.Fatal(err)
	}
	revoked := time.Now()
	k.clients[writerKey].RevokedAt = &revoked
	a.Forget("shk_0123456789abcdef")
	if _, err := a.Identify(ctx, writerKey); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked: %v", err)
	}
	k.down = true
	if _, err := a.Identify(ctx, "shk_fedcba9876543210.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("database down: %v", err)
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	k := &keys{clients: map[string]*metadb.Client{writerKey: {KeyID: "shk_0123456789abcdef", Role: metadb.RoleWriter}}}
	a := New([]string{token}, k)
	call := func(header, role string) codes.Code {
		ctx := context.Background()
		if header != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", header))
		}
		_, err := a.Require(ctx, role)
		return status.Code(err)
	}
	for _, tc := range []struct {
		header, role string
		want         codes.Code
	}{
		{"", metadb.RoleWriter, codes.Unauthenticated},
		{"Bearer " + token, metadb.RoleAdmin, codes.OK},
		{"bearer " + token, metadb.RoleAdmin, codes.OK},
		{"Bearer " + writerKey, metadb.RoleWriter, codes.OK},
		{"Bearer " + writerKey, metadb.RoleAdmin, codes.PermissionDenied},
		{"Basic " + token, metadb.RoleAdmin, codes.Unauthenticated},
		{"Bearer ", metadb.RoleAdmin, codes.Unauthenticated},
		{"Bearer wrong-token-0123456789", metadb.RoleAdmin, codes.Unauthenticated},
	} {
		if got := call(tc.header, tc.role); got != tc.want {
			t.Errorf("%q for %s: %s, want %s", tc.header, tc.role, got, tc.want)
		}
	}
}

// FuzzCredential: any header is a credential, none, or an error.
func FuzzCredential(f *testing.F) {
	for _, s := range []string{"Bearer " + writerKey, "Bearer", "Basic x", "", " Bearer  x ", "Bearer\tx"} {
		f.Add(s)
	}
	a := New([]string{token}, &keys{})
	f.Fuzz(func(t *testing.T, header string) {
		cred, err := Credential(header)
		if err == nil && header != "" && cred == "" {
			t.Fatalf("%q: no credential and no error", header)
		}
		if err == nil && cred != "" {
			a.Identify(context.Background(), cred)
		}
	})
}

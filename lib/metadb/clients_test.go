package metadb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"shindo.dev/lib/metadb"
)

// FuzzParseKey: any text is refused or splits into a key ID and a secret
// that make the same key again.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "shk_", "",
		"shk_0123456789ABCDEF.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, ok := metadb.ParseKey(key)
		if !ok {
			return
		}
		if len(secret) != 32 || !strings.HasPrefix(key, id+".") || len(id) != 20 {
			t.Fatalf("%q → %q, %d bytes", key, id, len(secret))
		}
	})
}

func TestNormalizeTopics(t *testing.T) {
	t.Parallel()
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("t%02d", i)
	}
	for _, tc := range []struct {
		name   string
		topics []string
		want   []string // nil: ErrInvalid
	}{
		{"none", nil, []string{}},
		{"sorted and deduplicated", []string{"rts", "eew", "rts", "eew.tw"}, []string{"eew", "eew.tw", "rts"}},
		{"every character", []string{"a-z_0.9"}, []string{"a-z_0.9"}},
		{"wildcard", []string{"rts", "*"}, []string{"*", "rts"}},
		{"64 characters", []string{strings.Repeat("x", 64)}, []string{strings.Repeat("x", 64)}},
		{"32 after repeats", append(slices.Clone(many[:32]), many[:32]...), many[:32]},
		{"33", many, nil},
		{"empty", []string{""}, nil},
		{"65 characters", []string{strings.Repeat("x", 65)}, nil},
		{"upper case", []string{"RTS"}, nil},
		{"space", []string{"eew tw"}, nil},
		{"slash", []string{"eew/tw"}, nil},
		{"partial wildcard", []string{"eew.*"}, nil},
		{"not ASCII", []string{"地震"}, nil},
		{"control", []string{"rts\x00"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metadb.NormalizeTopics(tc.topics)
			if tc.want == nil {
				if !errors.Is(err, metadb.ErrInvalid) || !strings.Contains(err.Error(), "topic") {
					t.Fatalf("%q: %v, want ErrInvalid about topics", tc.topics, err)
				}
				return
			}
			if err != nil || got == nil || !slices.Equal(got, tc.want) {
				t.Fatalf("%q: %q %v, want %q", tc.topics, got, err, tc.want)
			}
		})
	}
}

func TestMaySubscribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role   string
		topics []string
		topic  string
		want   bool
	}{
		{metadb.RoleSubscriber, []string{"eew", "rts"}, "rts", true},
		{metadb.RoleSubscriber, []string{"eew", "rts"}, "intensity", false},
		{metadb.RoleSubscriber, nil, "rts", false},
		{metadb.RoleSubscriber, []string{"*"}, "intensity", true},
		{metadb.RoleSubscriber, []string{"*"}, "*", false}, // a subscription names one topic
		{metadb.RoleSubscriber, []string{"*"}, "", false},
		{metadb.RoleSubscriber, []string{"*"}, "RTS", false},
		{metadb.RoleWriter, nil, "rts", false},
		{metadb.RoleWriter, []string{"rts"}, "rts", true},
		{metadb.RoleAdmin, nil, "rts", true},
		{metadb.RoleAdmin, []string{"eew"}, "rts", true},
	} {
		if got := metadb.MaySubscribe(tc.role, tc.topics, tc.topic); got != tc.want {
			t.Errorf("%s with %q subscribing to %q: %v, want %v", tc.role, tc.topics, tc.topic, got, tc.want)
		}
	}
	revoked := time.Now()
	c := metadb.Client{Role: metadb.RoleAdmin, RevokedAt: &revoked}
	if c.MaySubscribe("rts") {
		t.Error("a revoked admin key may subscribe")
	}
}

func TestClientsByKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	sub, subKey, err := s.CreateClient(ctx, metadb.NewClient{Name: "app", Role: metadb.RoleSubscriber,
		Topics: []string{"rts", "eew", "rts"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sub.Topics, []string{"eew", "rts"}) {
		t.Fatalf("created with topics %q", sub.Topics)
	}
	_, writerKey, err := s.CreateClient(ctx, metadb.NewClient{Role: metadb.RoleWriter})
	if err != nil {
		t.Fatal(err)
	}
	unknown := "shk_0000000000000000." + subKey[len(subKey)-43:]
	wrongSecret := subKey[:len(subKey)-43] + strings.Repeat("A", 43)
	keys := []string{subKey, "", "nope", unknown, wrongSecret, writerKey, subKey, "' OR 1=1 --", subKey + "x"}
	got, err := s.ClientsByKeys(ctx, keys)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("%d results, %v", len(got), err)
	}
	for i, want := range []string{sub.KeyID, "", "", "", "", "writer", sub.KeyID, "", ""} {
		switch c := got[i]; {
		case want == "" && c != nil:
			t.Errorf("key %d (%q): client %+v, want none", i, keys[i], c)
		case want == "":
		case c == nil:
			t.Errorf("key %d (%q): no client", i, keys[i])
		case want == "writer" && (c.Role != metadb.RoleWriter || len(c.Topics) != 0):
			t.Errorf("writer: %+v", c)
		case want != "writer" && (c.KeyID != want || c.Role != metadb.RoleSubscriber || !slices.Equal(c.Topics, sub.Topics) || c.Revoked()):
			t.Errorf("subscriber: %+v", c)
		}
	}
	if got[0] == got[6] {
		t.Error("a repeated key shares its client with the first")
	}
	if one, err := s.ClientByKey(ctx, subKey); err != nil || !slices.Equal(one.Topics, sub.Topics) {
		t.Fatalf("by key: %+v %v", one, err)
	}
	if list, err := s.ListClients(ctx); err != nil || len(list) != 2 || !slices.Equal(list[0].Topics, sub.Topics) || list[1].Topics == nil {
		t.Fatalf("list: %+v %v", list, err)
	}

	if _, err := s.RevokeClient(ctx, sub.KeyID); err != nil {
		t.Fatal(err)
	}
	got, err = s.ClientsByKeys(ctx, []string{subKey})
	if err != nil || got[0] == nil || !got[0].Revoked() || !slices.Equal(got[0].Topics, sub.Topics) {
		t.Fatalf("revoked: %+v %v", got, err)
	}
	if got, err := s.ClientsByKeys(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("no keys: %v %v", got, err)
	}

	for _, nc := range []metadb.NewClient{
		{Role: "root"},
		{Role: metadb.RoleSubscriber, Topics: []string{"Bad Topic"}},
		{Role: metadb.RoleSubscriber, Topics: []string{""}},
	} {
		if _, _, err := s.CreateClient(ctx, nc); !errors.Is(err, metadb.ErrInvalid) || strings.Contains(err.Error(), "api_clients") {
			t.Errorf("%+v: %v, want ErrInvalid in the domain's words", nc, err)
		}
	}
}

// TestClientsByKeysMalformedStayOut: keys that cannot be keys are answered
// without the database, which is gone here; a well-formed one needs it.
func TestClientsByKeysMalformedStayOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	pool.Close()
	got, err := s.ClientsByKeys(ctx, []string{"", "shk_x", "shk_0123456789ABCDEF.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
	if err != nil || len(got) != 3 || got[0] != nil || got[1] != nil || got[2] != nil {
		t.Fatalf("malformed keys: %v %v", got, err)
	}
	if _, err := s.ClientsByKeys(ctx, []string{"shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}); !errors.Is(err, metadb.ErrUnavailable) {
		t.Fatalf("closed pool: %v, want ErrUnavailable", err)
	}
}

// TestClientSchemaConstraints: the schema refuses bad roles and topics
// that Go validation would, for writers other than Store.
func TestClientSchemaConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	c, _, err := s.CreateClient(ctx, metadb.NewClient{Role: metadb.RoleSubscriber, Topics: []string{"rts"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{
		`role = 'root'`,
		`topics = NULL`,
		`topics = '{""}'`,
		`topics = '{RTS}'`,
		`topics = '{"eew tw"}'`,
		`topics = '{"eew.*"}'`,
		`topics = ARRAY[repeat('x', 65)]`,
		`topics = '{rts,NULL}'`,
		`topics = '{{rts},{eew}}'`,
		`topics = array_fill('rts'::text, ARRAY[33])`,
	} {
		if _, err := pool.Exec(ctx, `UPDATE api_clients SET `+set+` WHERE key_id = $1`, c.KeyID); err == nil {
			t.Errorf("schema accepted %s", set)
		}
	}
	for _, set := range []string{
		`role = 'writer'`,
		`topics = '{}'`,
		`topics = '{*}'`,
		`topics = ARRAY['*', 'a-z_0.9', repeat('x', 64)]`,
		`topics = array_fill('rts'::text, ARRAY[32])`,
	} {
		if _, err := pool.Exec(ctx, `UPDATE api_clients SET `+set+` WHERE key_id = $1`, c.KeyID); err != nil {
			t.Errorf("schema refused %s: %v", set, err)
		}
	}
}

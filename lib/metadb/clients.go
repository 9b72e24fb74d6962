package metadb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Roles of API clients.
const (
	// RoleWriter may post reports.
	RoleWriter = "writer"
	// RoleAdmin may do everything: provision stations, manage clients,
	// post reports, and subscribe to every topic whatever its topics say.
	RoleAdmin = "admin"
	// RoleSubscriber may subscribe to its topics at the edges' WebSocket
	// API and do nothing else (its key reads public data like no key,
	// with a rate limit of its own).
	RoleSubscriber = "subscriber"
)

// Topics of API clients: the streams of the edges' WebSocket API a key
// may subscribe to.
const (
	// AllTopics in a client's topics stands for every topic.
	AllTopics = "*"
	// MaxTopics is the most topics a client holds.
	MaxTopics   = 32
	maxTopicLen = 64
)

// Key format: "shk_" + 16 hex digits (the key ID, public: it names the
// client in lists and logs) + "." + 43 base64url characters (32 random
// bytes, the secret). Only SHA-256 of the secret is stored: with 256 bits
// of entropy a plain hash is as strong as any slow one.
const (
	keyPrefix     = "shk_"
	keyIDHexLen   = 16
	secretBytes   = 32
	secretB64Len  = 43 // base64url without padding of 32 bytes
	keyLen        = len(keyPrefix) + keyIDHexLen + 1 + secretB64Len
	maxClientName = 200
)

// Client is an API client: who holds a key, what it may do, how fast.
type Client struct {
	KeyID     string
	Name      string
	Role      string
	RateLimit float64 // requests per second; 0: the service's default
	RateBurst int     // bucket size; 0: the service's default
	// Topics the key may subscribe to, sorted, without repeats; AllTopics
	// for every topic. An admin may subscribe to every topic whatever
	// they say (MaySubscribe).
	Topics    []string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Revoked reports whether the client's key no longer works.
func (c *Client) Revoked() bool { return c.RevokedAt != nil }

// MaySubscribe reports whether the client's key, if not revoked, may
// subscribe to topic.
func (c *Client) MaySubscribe(topic string) bool {
	return !c.Revoked() && MaySubscribe(c.Role, c.Topics, topic)
}

// MaySubscribe reports whether a key of role holding topics may subscribe
// to topic: an admin to every topic whatever its topics say, any other
// role to the topics of its list, and to every topic with AllTopics among
// them.
func MaySubscribe(role string, topics []string, topic string) bool {
	if role == RoleAdmin {
		return true
	}
	return ValidTopic(topic) && topic != AllTopics &&
		(slices.Contains(topics, AllTopics) || slices.Contains(topics, topic))
}

// NewClient describes a client to create.
type NewClient struct {
	Name      string
	Role      string   // RoleWriter, RoleSubscriber or RoleAdmin
	RateLimit float64  // requests per second, 0 for the default
	RateBurst int      // 0 for the default
	Topics    []string // at most MaxTopics, each ValidTopic; repeats are dropped
}

// ValidTopic reports whether t may be one of a client's topics: 1 to 64
// of a–z, 0–9, '.', '_' and '-', or AllTopics.
func ValidTopic(t string) bool {
	if t == AllTopics {
		return true
	}
	if t == "" || len(t) > maxTopicLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// NormalizeTopics checks a client's topics and returns them sorted and
// without repeats (never nil). It fails with ErrInvalid for a topic that
// is not ValidTopic or for more than MaxTopics different topics.
func NormalizeTopics(topics []string) ([]string, error) {
	for _, t := range topics {
		if !ValidTopic(t) {
			return nil, fmt.Errorf("%w: topic %q: want 1 to %d of a-z, 0-9, '.', '_' and '-', or %q for every topic",
				ErrInvalid, t, maxTopicLen, AllTopics)
		}
	}
	out := slices.Compact(slices.Sorted(slices.Values(topics)))
	if len(out) > MaxTopics {
		return nil, fmt.Errorf("%w: %d topics, at most %d", ErrInvalid, len(out), MaxTopics)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// ParseKey splits a key into its ID and secret; ok is false for anything
// that is not shaped like a key.
func ParseKey(key string) (keyID string, secret []byte, ok bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyPrefix) || key[len(keyPrefix)+keyIDHexLen] != '.' {
		return "", nil, false
	}
	keyID = key[:len(keyPrefix)+keyIDHexLen]
	if _, err := hex.DecodeString(keyID[len(keyPrefix):]); err != nil || strings.ToLower(keyID) != keyID {
		return "", nil, false
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(key[len(keyPrefix)+keyIDHexLen+1:])
	if err != nil || len(secret) != secretBytes {
		return "", nil, false
	}
	return keyID, secret, true
}

func hashSecret(secret []byte) []byte {
	h := sha256.Sum256(secret)
	return h[:]
}

func checkClient(nc NewClient) error {
	switch {
	case nc.Role != RoleWriter && nc.Role != RoleSubscriber && nc.Role != RoleAdmin:
		return fmt.Errorf("%w: role %q, want %q, %q or %q", ErrInvalid, nc.Role, RoleWriter, RoleSubscriber, RoleAdmin)
	case utf8.RuneCountInString(nc.Name) > maxClientName:
		return fmt.Errorf("%w: name longer than %d characters", ErrInvalid, maxClientName)
	case math.IsNaN(nc.RateLimit) || nc.RateLimit < 0 || nc.RateLimit > 100000:
		return fmt.Errorf("%w: rate limit %v outside 0..100000 per second", ErrInvalid, nc.RateLimit)
	case nc.RateBurst < 0 || nc.RateBurst > 1000000:
		return fmt.Errorf("%w: rate burst %d outside 0..1000000", ErrInvalid, nc.RateBurst)
	}
	return checkText("name", nc.Name)
}

// CreateClient creates a client with a new random key and returns both;
// the key is never stored and cannot be read back. The client's topics
// are nc's, sorted and without repeats. It fails with ErrInvalid for a bad
// value.
func (s *Store) CreateClient(ctx context.Context, nc NewClient) (*Client, string, error) {
	if err := checkClient(nc); err != nil {
		return nil, "", fmt.Errorf("create client: %w", err)
	}
	topics, err := NormalizeTopics(nc.Topics)
	if err != nil {
		return nil, "", fmt.Errorf("create client: %w", err)
	}
	idBytes := make([]byte, keyIDHexLen/2)
	secret := make([]byte, secretBytes)
	rand.Read(idBytes) // never fails
	rand.Read(secret)
	c := &Client{KeyID: keyPrefix + hex.EncodeToString(idBytes), Name: nc.Name, Role: nc.Role, RateLimit: nc.RateLimit, RateBurst: nc.RateBurst,
		Topics: topics}
	var limit *float64
	var burst *int32
	if nc.RateLimit > 0 {
		limit = &nc.RateLimit
	}
	if nc.RateBurst > 0 {
		b := int32(nc.RateBurst)
		burst = &b
	}
	err = s.pool.QueryRow(ctx, `INSERT INTO api_clients (key_id, secret_hash, name, role, rate_limit, rate_burst, topics)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
		c.KeyID, hashSecret(secret), c.Name, c.Role, limit, burst, topics).Scan(&c.CreatedAt)
	if err != nil {
		return nil, "", fmt.Errorf("create client: %w", translate(err))
	}
	return c, c.KeyID + "." + base64.RawURLEncoding.EncodeToString(secret), nil
}

const clientColumns = `key_id, name, role, coalesce(rate_limit, 0), coalesce(rate_burst, 0), topics, created_at, revoked_at`

func scanClient(row pgx.Row, c *Client, extra ...any) error {
	var burst int32
	err := row.Scan(append([]any{&c.KeyID, &c.Name, &c.Role, &c.RateLimit, &burst, &c.Topics, &c.CreatedAt, &c.RevokedAt}, extra...)...)
	c.RateBurst = int(burst)
	return err
}

// ClientByKey returns the client a key belongs to, revoked or not (the
// caller decides what a revoked key gets). It fails with ErrNotFound for a
// malformed key, an unknown key ID or a wrong secret alike.
func (s *Store) ClientByKey(ctx context.Context, key string) (*Client, error) {
	keyID, secret, ok := ParseKey(key)
	if !ok {
		return nil, fmt.Errorf("client by key: %w: malformed key", ErrNotFound)
	}
	var c Client
	var hash []byte
	err := scanClient(s.pool.QueryRow(ctx, `SELECT `+clientColumns+`, secret_hash FROM api_clients WHERE key_id = $1`, keyID), &c, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("client by key: %w: unknown key", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("client by key: %w", translate(err))
	}
	if subtle.ConstantTimeCompare(hash, hashSecret(secret)) != 1 {
		return nil, fmt.Errorf("client by key: %w: wrong secret", ErrNotFound)
	}
	return &c, nil
}

// ClientsByKeys looks up many keys at once: for each key, in order, the
// client it belongs to, revoked or not (the caller decides what a revoked
// key gets), or nil for a malformed key, an unknown key ID or a wrong
// secret alike. Malformed keys never reach the database; the others are
// read in one query, and each secret is compared in constant time.
//
// Unlike ClientByKey, which admits callers at the primary, it reads from
// the store's own member (NewReplicatedStore): its callers, the edges,
// ask at every connection and again every few seconds, so a read that
// costs no trip between sites and keeps working while a failover elects a
// new primary matters more than a revocation seen a moment later.
func (s *Store) ClientsByKeys(ctx context.Context, keys []string) ([]*Client, error) {
	type parsed struct {
		keyID  string
		secret []byte
	}
	given := make([]parsed, len(keys))
	var keyIDs []string
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		keyID, secret, ok := ParseKey(k)
		if !ok {
			continue
		}
		given[i] = parsed{keyID, secret}
		if !seen[keyID] {
			seen[keyID] = true
			keyIDs = append(keyIDs, keyID)
		}
	}
	out := make([]*Client, len(keys))
	if len(keyIDs) == 0 {
		return out, nil
	}
	type stored struct {
		c    Client
		hash []byte
	}
	rows, err := s.reader().Query(ctx, `SELECT `+clientColumns+`, secret_hash FROM api_clients WHERE key_id = ANY($1)`, keyIDs)
	if err != nil {
		return nil, fmt.Errorf("clients by keys: %w", translate(err))
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stored, error) {
		var st stored
		return st, scanClient(row, &st.c, &st.hash)
	})
	if err != nil {
		return nil, fmt.Errorf("clients by keys: %w", translate(err))
	}
	byID := make(map[string]*stored, len(found))
	for i := range found {
		byID[found[i].c.KeyID] = &found[i]
	}
	for i, g := range given {
		st, ok := byID[g.keyID]
		if g.keyID == "" || !ok || subtle.ConstantTimeCompare(st.hash, hashSecret(g.secret)) != 1 {
			continue
		}
		c := st.c
		c.Topics = slices.Clone(c.Topics)
		out[i] = &c
	}
	return out, nil
}

// ListClients returns every client, revoked ones too, by creation.
func (s *Store) ListClients(ctx context.Context) ([]Client, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+clientColumns+` FROM api_clients ORDER BY created_at, key_id`)
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", translate(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Client, error) {
		var c Client
		return c, scanClient(row, &c)
	})
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", translate(err))
	}
	return list, nil
}

// RevokeClient makes a client's key stop working for good and returns the
// client. Revoking a revoked client changes nothing. It fails with
// ErrNotFound.
func (s *Store) RevokeClient(ctx context.Context, keyID string) (*Client, error) {
	var c Client
	err := scanClient(s.pool.QueryRow(ctx, `UPDATE api_clients SET revoked_at = coalesce(revoked_at, now())
		WHERE key_id = $1 RETURNING `+clientColumns, keyID), &c)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("revoke client %q: %w: no client %q", keyID, ErrNotFound, keyID)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke client %q: %w", keyID, translate(err))
	}
	return &c, nil
}

package stationdb

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
	// post reports.
	RoleAdmin = "admin"
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
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Revoked reports whether the client's key no longer works.
func (c *Client) Revoked() bool { return c.RevokedAt != nil }

// NewClient describes a client to create.
type NewClient struct {
	Name      string
	Role      string  // RoleWriter or RoleAdmin
	RateLimit float64 // requests per second, 0 for the default
	RateBurst int     // 0 for the default
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
	case nc.Role != RoleWriter && nc.Role != RoleAdmin:
		return fmt.Errorf("%w: role %q, want %q or %q", ErrInvalid, nc.Role, RoleWriter, RoleAdmin)
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
// the key is never stored and cannot be read back. It fails with
// ErrInvalid for a bad value.
func (s *Store) CreateClient(ctx context.Context, nc NewClient) (*Client, string, error) {
	if err := checkClient(nc); err != nil {
		return nil, "", fmt.Errorf("create client: %w", err)
	}
	idBytes := make([]byte, keyIDHexLen/2)
	secret := make([]byte, secretBytes)
	rand.Read(idBytes) // never fails
	rand.Read(secret)
	c := &Client{KeyID: keyPrefix + hex.EncodeToString(idBytes), Name: nc.Name, Role: nc.Role, RateLimit: nc.RateLimit, RateBurst: nc.RateBurst}
	var limit *float64
	var burst *int32
	if nc.RateLimit > 0 {
		limit = &nc.RateLimit
	}
	if nc.RateBurst > 0 {
		b := int32(nc.RateBurst)
		burst = &b
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO api_clients (key_id, secret_hash, name, role, rate_limit, rate_burst)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
		c.KeyID, hashSecret(secret), c.Name, c.Role, limit, burst).Scan(&c.CreatedAt)
	if err != nil {
		return nil, "", fmt.Errorf("create client: %w", translate(err))
	}
	return c, c.KeyID + "." + base64.RawURLEncoding.EncodeToString(secret), nil
}

const clientColumns = `key_id, name, role, coalesce(rate_limit, 0), coalesce(rate_burst, 0), created_at, revoked_at`

func scanClient(row pgx.Row, c *Client, extra ...any) error {
	var burst int32
	err := row.Scan(append([]any{&c.KeyID, &c.Name, &c.Role, &c.RateLimit, &burst, &c.CreatedAt, &c.RevokedAt}, extra...)...)
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

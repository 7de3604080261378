package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

const keyColumns = `id::text, client_id::text, prefix, key_hash, created_at, revoked_at`

func scanKey(row pgx.Row) (*domain.APIKey, error) {
	var k domain.APIKey
	if err := row.Scan(&k.ID, &k.ClientID, &k.Prefix, &k.Hash, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	return &k, nil
}

// IssueKey creates a new random key for a client and returns it with its
// stored record. The key itself is returned only here; only its hash is stored.
func (db *DB) IssueKey(ctx context.Context, clientID string) (key string, rec *domain.APIKey, err error) {
	return db.issueKey(ctx, clientID, domain.NewKey)
}

// IssueSandboxKey is IssueKey for a sandbox key (msk_test_…); the stored
// prefix says it is one.
func (db *DB) IssueSandboxKey(ctx context.Context, clientID string) (key string, rec *domain.APIKey, err error) {
	return db.issueKey(ctx, clientID, domain.NewSandboxKey)
}

func (db *DB) issueKey(ctx context.Context, clientID string, newKey func() (string, error)) (key string, rec *domain.APIKey, err error) {
	if _, err := db.Client(ctx, clientID); err != nil {
		return "", nil, err
	}
	key, err = newKey()
	if err != nil {
		return "", nil, err
	}
	rec, err = scanKey(db.Pool.QueryRow(ctx, `INSERT INTO api_keys (client_id, key_hash, prefix)
		VALUES ($1, $2, $3) RETURNING `+keyColumns, clientID, domain.HashKey(key), domain.KeyDisplayPrefix(key)))
	if err != nil {
		return "", nil, translate(err, "api key")
	}
	return key, rec, nil
}

// RevokeKey marks a key revoked (idempotent: the first revocation time stays).
func (db *DB) RevokeKey(ctx context.Context, keyID string) (*domain.APIKey, error) {
	if !validUUID(keyID) {
		return nil, domain.Errorf(domain.ENOTFOUND, "api key %q not found", keyID)
	}
	k, err := scanKey(db.Pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
		WHERE id = $1 RETURNING `+keyColumns, keyID))
	if err != nil {
		return nil, translate(err, "api key")
	}
	return k, nil
}

// Keys lists the keys of a client (records only, never keys), oldest first.
func (db *DB) Keys(ctx context.Context, clientID string) ([]*domain.APIKey, error) {
	if _, err := db.Client(ctx, clientID); err != nil {
		return nil, err
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE client_id = $1 ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, translate(err, "api keys")
	}
	defer rows.Close()
	var out []*domain.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, translate(err, "api keys")
		}
		out = append(out, k)
	}
	return out, translate(rows.Err(), "api keys")
}

// Authenticate finds the key with the given hash and its client in one
// query. A revoked key is returned with RevokedAt set; the caller decides.
func (db *DB) Authenticate(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error) {
	row := db.Pool.QueryRow(ctx, `SELECT k.id::text, k.client_id::text, k.prefix, k.key_hash, k.created_at, k.revoked_at,
		c.id::text, c.org_name, c.tier, c.status, c.markets, c.rate_limit_override, c.quota_override,
		c.quota_unlimited, c.contract_expires_at, c.created_at, c.updated_at
		FROM api_keys k JOIN clients c ON c.id = k.client_id WHERE k.key_hash = $1`, keyHash)
	var (
		k  domain.APIKey
		cr clientRow
	)
	dest := append([]any{&k.ID, &k.ClientID, &k.Prefix, &k.Hash, &k.CreatedAt, &k.RevokedAt}, cr.dest()...)
	if err := row.Scan(dest...); err != nil {
		return nil, nil, translate(err, "api key")
	}
	if !domain.KeyHashEqual(k.Hash, keyHash) {
		return nil, nil, domain.Errorf(domain.ENOTFOUND, "api key not found")
	}
	return cr.client(), &k, nil
}

// KeyHashes lists the hashes of the keys created at or after since (every
// key for the zero time), revoked ones included: the api's directory of
// keys that exist.
func (db *DB) KeyHashes(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := db.Pool.Query(ctx, `SELECT key_hash FROM api_keys WHERE created_at >= $1`, since)
	if err != nil {
		return nil, translate(err, "api keys")
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return hashes, translate(err, "api keys")
}

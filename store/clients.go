package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

const clientColumns = `id::text, org_name, tier, status, markets, rate_limit_override, quota_override,
	quota_unlimited, contract_expires_at, created_at, updated_at`

// clientRow holds the scan destinations of clientColumns.
type clientRow struct {
	c       domain.Client
	tier    string
	status  string
	markets []string
	rate    *int32
}

func (r *clientRow) dest() []any {
	return []any{&r.c.ID, &r.c.OrgName, &r.tier, &r.status, &r.markets, &r.rate, &r.c.QuotaOverride,
		&r.c.QuotaUnlimited, &r.c.ContractExpiresAt, &r.c.CreatedAt, &r.c.UpdatedAt}
}

func (r *clientRow) client() *domain.Client {
	c := r.c
	c.Tier = domain.Tier(r.tier)
	c.Status = domain.ClientStatus(r.status)
	for _, m := range r.markets {
		c.Markets = append(c.Markets, domain.Market(m))
	}
	domain.SortMarkets(c.Markets)
	if r.rate != nil {
		n := int(*r.rate)
		c.RateLimitOverride = &n
	}
	if c.ContractExpiresAt != nil {
		t := c.ContractExpiresAt.UTC()
		c.ContractExpiresAt = &t
	}
	return &c
}

func scanClient(row pgx.Row) (*domain.Client, error) {
	var r clientRow
	if err := row.Scan(r.dest()...); err != nil {
		return nil, err
	}
	return r.client(), nil
}

// CreateClient validates and inserts a client; it fills ID and times.
func (db *DB) CreateClient(ctx context.Context, c *domain.Client) error {
	if err := c.Validate(); err != nil {
		return err
	}
	row := db.Pool.QueryRow(ctx, `INSERT INTO clients (org_name, tier, markets, rate_limit_override,
		quota_override, quota_unlimited, contract_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+clientColumns,
		c.OrgName, string(c.Tier), domain.MarketNames(c.Markets), c.RateLimitOverride, c.QuotaOverride,
		c.QuotaUnlimited, c.ContractExpiresAt)
	created, err := scanClient(row)
	if err != nil {
		return translate(err, "client")
	}
	*c = *created
	return nil
}

// Client returns one client by id.
func (db *DB) Client(ctx context.Context, id string) (*domain.Client, error) {
	if !validUUID(id) {
		return nil, domain.Errorf(domain.ENOTFOUND, "client %q not found", id)
	}
	c, err := scanClient(db.Pool.QueryRow(ctx, `SELECT `+clientColumns+` FROM clients WHERE id = $1`, id))
	if err != nil {
		return nil, translate(err, "client")
	}
	return c, nil
}

// Clients lists every client, oldest first.
func (db *DB) Clients(ctx context.Context) ([]*domain.Client, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+clientColumns+` FROM clients ORDER BY created_at, id`)
	if err != nil {
		return nil, translate(err, "clients")
	}
	defer rows.Close()
	var out []*domain.Client
	for rows.Next() {
		c, err := scanClient(rows)
		if err != nil {
			return nil, translate(err, "clients")
		}
		out = append(out, c)
	}
	return out, translate(rows.Err(), "clients")
}

// SetClientStatus sets a client's stored status (active or suspended).
func (db *DB) SetClientStatus(ctx context.Context, id string, status domain.ClientStatus) (*domain.Client, error) {
	if status != domain.StatusActive && status != domain.StatusSuspended {
		return nil, domain.Errorf(domain.EINVALID, "status must be active or suspended")
	}
	return db.updateClient(ctx, id, `status = $2`, string(status))
}

// SetClientTier changes a client's tier and markets; the new limits apply
// from the next request.
func (db *DB) SetClientTier(ctx context.Context, id string, tier domain.Tier, markets []domain.Market) (*domain.Client, error) {
	c, err := db.Client(ctx, id)
	if err != nil {
		return nil, err
	}
	c.Tier, c.Markets = tier, markets
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return db.updateClient(ctx, id, `tier = $2, markets = $3`, string(tier), domain.MarketNames(markets))
}

// SetClientLimits changes the contract overrides of a client.
func (db *DB) SetClientLimits(ctx context.Context, id string, rate *int, quota *int64, unlimited bool, expires *time.Time) (*domain.Client, error) {
	return db.updateClient(ctx, id, `rate_limit_override = $2, quota_override = $3, quota_unlimited = $4, contract_expires_at = $5`,
		rate, quota, unlimited, expires)
}

func (db *DB) updateClient(ctx context.Context, id, set string, args ...any) (*domain.Client, error) {
	if !validUUID(id) {
		return nil, domain.Errorf(domain.ENOTFOUND, "client %q not found", id)
	}
	c, err := scanClient(db.Pool.QueryRow(ctx, `UPDATE clients SET `+set+`, updated_at = now()
		WHERE id = $1 RETURNING `+clientColumns, append([]any{id}, args...)...))
	if err != nil {
		return nil, translate(err, "client")
	}
	return c, nil
}

// validUUID reports whether s looks like a UUID, so a mistyped id is a
// clean not-found rather than a driver error.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')) {
				return false
			}
		}
	}
	return true
}

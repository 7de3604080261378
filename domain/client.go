package domain

import (
	"fmt"
	"slices"
	"time"
)

// ClientStatus is the stored status of a client. "expired" is never stored:
// it is derived from ContractExpiresAt at request time.
type ClientStatus string

// Client statuses as shown in GET /usage.
const (
	StatusActive    ClientStatus = "active"
	StatusSuspended ClientStatus = "suspended"
	StatusExpired   ClientStatus = "expired"
)

// ClientStatuses lists every status GET /usage can show.
var ClientStatuses = []ClientStatus{StatusActive, StatusSuspended, StatusExpired}

// Client is an organisation with a contract. Its limits come from the tier
// unless the contract overrides them.
type Client struct {
	ID                string
	OrgName           string
	Tier              Tier
	Status            ClientStatus // active or suspended
	Markets           []Market
	RateLimitOverride *int   // requests per minute; nil = tier default
	QuotaOverride     *int64 // requests per month; nil = tier default
	QuotaUnlimited    bool   // contract override: unlimited quota
	ContractExpiresAt *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// RatePerMinute is the effective rate limit.
func (c *Client) RatePerMinute() int {
	if c.RateLimitOverride != nil {
		return *c.RateLimitOverride
	}
	return c.Tier.Limits().RatePerMinute
}

// MonthlyQuota is the effective monthly quota; nil means unlimited.
func (c *Client) MonthlyQuota() *int64 {
	if c.QuotaUnlimited {
		return nil
	}
	if c.QuotaOverride != nil {
		return c.QuotaOverride
	}
	return c.Tier.Limits().MonthlyQuota
}

// EffectiveStatus is the status at time now: a passed contract end makes an
// active client expired.
func (c *Client) EffectiveStatus(now time.Time) ClientStatus {
	if c.Status == StatusSuspended {
		return StatusSuspended
	}
	if c.ContractExpiresAt != nil && !now.Before(*c.ContractExpiresAt) {
		return StatusExpired
	}
	return StatusActive
}

// AllowsMarket reports whether the client's tier covers m.
func (c *Client) AllowsMarket(m Market) bool { return slices.Contains(c.Markets, m) }

// Validate checks the tier/market rules: starter has exactly one market,
// limits are positive.
func (c *Client) Validate() error {
	if c.OrgName == "" {
		return Errorf(EINVALID, "organisation name is required")
	}
	if !c.Tier.Valid() {
		return Errorf(EINVALID, "unknown tier %q", c.Tier)
	}
	if len(c.Markets) == 0 {
		return Errorf(EINVALID, "at least one market is required")
	}
	if c.Tier == Starter && len(c.Markets) != 1 {
		return Errorf(EINVALID, "the starter tier covers exactly one market (got %d)", len(c.Markets))
	}
	if c.RateLimitOverride != nil && *c.RateLimitOverride < 1 {
		return Errorf(EINVALID, "rate limit must be at least 1 request per minute")
	}
	if c.QuotaOverride != nil && *c.QuotaOverride < 1 {
		return Errorf(EINVALID, "monthly quota must be at least 1")
	}
	return nil
}

// Month returns the calendar month (UTC) of t as the first instant of it.
func Month(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// NextMonth returns the first instant of the month after t's (UTC).
func NextMonth(t time.Time) time.Time { return Month(t).AddDate(0, 1, 0) }

// Usage is the usage record of GET /usage.
type Usage struct {
	Client        *Client
	UsedThisMonth int64
}

// RateLimitText renders a rate limit as the spec's "<n>/minute".
func RateLimitText(n int) string { return fmt.Sprintf("%d/minute", n) }

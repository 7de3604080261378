package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
)

// UsageRecord is the body of GET /usage.
type UsageRecord struct {
	OrgName           string     `json:"org_name" doc:"Name of the client organisation" example:"Acme Capital"`
	Tier              string     `json:"tier" enum:"starter,business,enterprise" doc:"Tier of the client, lower-case" example:"business"`
	Status            string     `json:"status" enum:"active,suspended,expired" doc:"Client status; only active clients get past authentication" example:"active"`
	AllowedMarkets    []string   `json:"allowed_markets" doc:"Markets covered by the tier" example:"[\"crypto\",\"forex\",\"stocks\"]"`
	RateLimit         string     `json:"rate_limit" doc:"Requests per rolling minute, as <n>/minute" example:"120/minute"`
	MonthlyQuota      *int64     `json:"monthly_quota" nullable:"true" doc:"Requests per calendar month (UTC); null means unlimited" example:"150000"`
	UsedThisMonth     int64      `json:"used_this_month" doc:"Requests counted this calendar month, including this one" example:"1234"`
	ContractExpiresAt *time.Time `json:"contract_expires_at" nullable:"true" doc:"End of the contract (RFC 3339 UTC); null when it has no end" example:"2027-06-30T00:00:00Z"`
}

type usageOutput struct {
	Body UsageRecord
}

func (s *Server) registerUsage() {
	huma.Register(s.humaAPI, huma.Operation{
		OperationID: "get-usage",
		Method:      http.MethodGet,
		Path:        "/usage",
		Summary:     "Your tier, limits and usage this month",
		Description: "Returns the usage record of the calling client. Counts as one ordinary request against the monthly quota; `used_this_month` includes this request.",
		Tags:        []string{"Account"},
		Errors:      errorResponses(),
	}, func(ctx context.Context, _ *struct{}) (*usageOutput, error) {
		p := principalFrom(ctx)
		return &usageOutput{Body: usageRecord(p.Client, p.Used, s.cfg.Now())}, nil
	})
}

func usageRecord(c *domain.Client, used int64, now time.Time) UsageRecord {
	return UsageRecord{
		OrgName:           c.OrgName,
		Tier:              string(c.Tier),
		Status:            string(c.EffectiveStatus(now)),
		AllowedMarkets:    domain.MarketNames(c.Markets),
		RateLimit:         domain.RateLimitText(c.RatePerMinute()),
		MonthlyQuota:      c.MonthlyQuota(),
		UsedThisMonth:     used,
		ContractExpiresAt: c.ContractExpiresAt,
	}
}

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
)

// UsageRecord is the body of GET /usage.
type UsageRecord struct {
	OrgName           string              `json:"org_name" doc:"Name of the client organisation" example:"Acme Capital"`
	Tier              domain.Tier         `json:"tier" doc:"Tier of the client, lower-case" example:"business"`
	Status            domain.ClientStatus `json:"status" doc:"Client status; only active clients get past authentication" example:"active"`
	AllowedMarkets    []string            `json:"allowed_markets" doc:"Markets covered by the tier" example:"[\"crypto\",\"forex\",\"stocks\"]"`
	RateLimit         string              `json:"rate_limit" doc:"Requests per rolling minute, as <n>/minute" example:"120/minute"`
	MonthlyQuota      *int64              `json:"monthly_quota" nullable:"true" doc:"Requests per calendar month (UTC); null means unlimited" example:"150000"`
	UsedThisMonth     int64               `json:"used_this_month" doc:"Requests counted this calendar month, including this one" example:"1234"`
	ContractExpiresAt *time.Time          `json:"contract_expires_at" nullable:"true" doc:"End of the contract (RFC 3339 UTC); null when it has no end" example:"2027-06-30T00:00:00Z"`
}

// usageOutput is written as pre-encoded JSON (documented as UsageRecord).
// It changes with every request (used_this_month), so no cache keeps it.
type usageOutput struct {
	ContentType  string `header:"Content-Type"`
	CacheControl string `header:"Cache-Control" doc:"no-store: the record changes with every request" example:"no-store"`
	Body         []byte
}

func (s *Server) registerUsage() {
	register(s, huma.Operation{
		OperationID: "get-usage",
		Summary:     "Your tier, limits and usage this month",
		Description: "Returns the usage record of the calling client. Counts as one ordinary request against the monthly quota; `used_this_month` includes this request.",
		Tags:        []string{tagAccount},
		Errors:      errorResponses(),
		Responses:   s.jsonResponse(UsageRecord{}, "The usage record of the calling client"),
	}, s.getUsage)
}

func (s *Server) getUsage(ctx context.Context, _ *struct{}) (*usageOutput, error) {
	body, err := s.usageBody(ctx)
	if err != nil {
		return nil, err
	}
	return &usageOutput{ContentType: jsonContentType, CacheControl: noStore, Body: body}, nil
}

// usageBody is the body of GET /usage (its hot route writes it as is).
func (s *Server) usageBody(ctx context.Context) ([]byte, error) {
	p := principalFrom(ctx)
	// A sandbox key never counts: it shows the client's live count.
	used, err := s.usedThisMonth(ctx, p)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	body, err := s.usage.body(p.Client, used, s.now(ctx))
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return body, nil
}

func usageRecord(c *domain.Client, used int64, now time.Time) UsageRecord {
	return UsageRecord{
		OrgName:           c.OrgName,
		Tier:              c.Tier,
		Status:            c.EffectiveStatus(now),
		AllowedMarkets:    domain.MarketNames(c.Markets),
		RateLimit:         domain.RateLimitText(c.RatePerMinute()),
		MonthlyQuota:      c.MonthlyQuota(),
		UsedThisMonth:     used,
		ContractExpiresAt: c.ContractExpiresAt,
	}
}

// usageBodies encodes usage records: a client's record is encoded once
// (per loaded client value) around a marker, and each request splices its
// used_this_month into the two halves.
type usageBodies struct {
	mu sync.RWMutex
	m  map[string]*usageTemplate // by client id
}

type usageTemplate struct {
	client     *domain.Client // the value it was made from: a reload makes a new one
	status     domain.ClientStatus
	head, tail []byte
}

// usedMarker is what the template is split at: the only place where a
// quote is followed by used_this_month, since quotes inside JSON strings
// are escaped.
var usedMarker = []byte(`"used_this_month":0`)

func newUsageBodies() *usageBodies { return &usageBodies{m: make(map[string]*usageTemplate)} }

func (u *usageBodies) body(c *domain.Client, used int64, now time.Time) ([]byte, error) {
	status := c.EffectiveStatus(now)
	u.mu.RLock()
	t := u.m[c.ID]
	u.mu.RUnlock()
	if t == nil || t.client != c || t.status != status {
		b, err := json.Marshal(usageRecord(c, 0, now))
		if err != nil {
			return nil, err
		}
		i := bytes.Index(b, usedMarker)
		if i < 0 {
			return nil, fmt.Errorf("api: usage record without used_this_month: %s", b)
		}
		i += len(usedMarker) - 1
		t = &usageTemplate{client: c, status: status, head: b[:i], tail: b[i+1:]}
		u.mu.Lock()
		u.m[c.ID] = t
		u.mu.Unlock()
	}
	out := make([]byte, 0, len(t.head)+20+len(t.tail))
	out = append(out, t.head...)
	out = strconv.AppendInt(out, used, 10)
	return append(out, t.tail...), nil
}

package domain

import (
	"testing"
	"time"
)

func TestClientLimitsAndStatus(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	rate, quota := 1000, int64(50)
	tests := []struct {
		name       string
		c          Client
		wantRate   int
		wantQuota  *int64
		wantStatus ClientStatus
	}{
		{"starter", Client{Tier: Starter}, 30, ptr(int64(20000)), StatusActive},
		{"business", Client{Tier: Business}, 120, ptr(int64(150000)), StatusActive},
		{"enterprise unlimited", Client{Tier: Enterprise}, 600, nil, StatusActive},
		{"overrides", Client{Tier: Starter, RateLimitOverride: &rate, QuotaOverride: &quota}, 1000, &quota, StatusActive},
		{"unlimited override", Client{Tier: Business, QuotaUnlimited: true}, 120, nil, StatusActive},
		{"suspended", Client{Tier: Business, Status: StatusSuspended, ContractExpiresAt: &past}, 120, ptr(int64(150000)), StatusSuspended},
		{"expired at the instant", Client{Tier: Business, Status: StatusActive, ContractExpiresAt: &now}, 120, ptr(int64(150000)), StatusExpired},
		{"not yet expired", Client{Tier: Business, Status: StatusActive, ContractExpiresAt: &future}, 120, ptr(int64(150000)), StatusActive},
	}
	for _, tt := range tests {
		if got := tt.c.RatePerMinute(); got != tt.wantRate {
			t.Errorf("%s: rate %d, want %d", tt.name, got, tt.wantRate)
		}
		got := tt.c.MonthlyQuota()
		if (got == nil) != (tt.wantQuota == nil) || (got != nil && *got != *tt.wantQuota) {
			t.Errorf("%s: quota %v, want %v", tt.name, got, tt.wantQuota)
		}
		if st := tt.c.EffectiveStatus(now); st != tt.wantStatus {
			t.Errorf("%s: status %s, want %s", tt.name, st, tt.wantStatus)
		}
	}
}

func TestClientValidate(t *testing.T) {
	t.Parallel()
	zero := 0
	for name, c := range map[string]Client{
		"no org":          {Tier: Business, Markets: Markets},
		"bad tier":        {OrgName: "a", Tier: "gold", Markets: Markets},
		"starter 2":       {OrgName: "a", Tier: Starter, Markets: []Market{Crypto, Forex}},
		"no markets":      {OrgName: "a", Tier: Business},
		"zero rate limit": {OrgName: "a", Tier: Business, Markets: Markets, RateLimitOverride: &zero},
	} {
		if err := c.Validate(); ErrorCode(err) != EINVALID {
			t.Errorf("%s: Validate = %v, want invalid", name, err)
		}
	}
	ok := Client{OrgName: "a", Tier: Starter, Markets: []Market{Stocks}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMonth(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", -3600)) // 2027-01-01 00:59:59 UTC
	if got, want := Month(at), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Month = %s, want %s", got, want)
	}
	if got, want := NextMonth(at), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("NextMonth = %s, want %s", got, want)
	}
}

func TestNormalizeSymbol(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    Market
		in   string
		want string
		ok   bool
	}{
		{Crypto, "BTC_USDT", "BTC_USDT", true},
		{Crypto, "btc/usdt", "BTC_USDT", true},
		{Crypto, "BTCUSDT", "", false},
		{Crypto, "BTC_", "", false},
		{Crypto, "BTC/USDT/X", "", false},
		{Forex, "eur_usd", "EUR_USD", true},
		{Stocks, "aapl", "AAPL", true},
		{Stocks, "BRK.B", "BRK.B", true},
		{Stocks, "A A", "", false},
		{Crypto, "", "", false},
	}
	for _, tt := range tests {
		got, ok := NormalizeSymbol(tt.m, tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeSymbol(%s, %q) = %q, %v; want %q, %v", tt.m, tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

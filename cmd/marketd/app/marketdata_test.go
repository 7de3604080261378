package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestCatalogueCommand(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, map[string]string{"MARKET_REGION": "us"}, "catalogue", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got []domain.Combination
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(domain.Catalogue("us")) {
		t.Fatalf("us catalogue has %d rows, want %d", len(got), len(domain.Catalogue("us")))
	}
	hasSpot := false
	for _, c := range got {
		if c.Exchange == "binance" {
			t.Fatal("binance listed in the us region")
		}
		hasSpot = hasSpot || (c.Market == domain.Crypto && c.Instrument == "spot")
	}
	if !hasSpot {
		t.Fatal("no crypto spot exchange in the us region")
	}
	for _, region := range domain.Regions {
		out, _, _ := run(t, nil, "catalogue", "--region", region)
		if !strings.Contains(out, "crypto") || !strings.Contains(out, "spot") {
			t.Errorf("region %s lacks a crypto spot exchange:\n%s", region, out)
		}
	}
	if _, errs, code := run(t, nil, "catalogue", "--region", "mars"); code != 2 || !strings.Contains(errs, "--region") {
		t.Fatalf("unknown region: exit %d %q", code, errs)
	}
}

// TestBackfillCommand: plain progress lines when not a terminal, and a
// second run resumes instead of reloading.
func TestBackfillCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	out, errs, code := run(t, env, "backfill", "--market", "crypto", "--exchange", "binance",
		"--symbols", "btc_usdt,ETH/USDT", "--timeframe", "4h", "--days", "30")
	if code != 0 {
		t.Fatalf("backfill: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "backfill: 1/2 BTC_USDT") || !strings.Contains(errs, "backfill: 2/2 ETH_USDT") {
		t.Fatalf("progress lines missing:\n%s", errs)
	}
	var n int
	if _, err := fmt.Sscanf(out, "backfilled %d 4h candles", &n); err != nil || n < 2*30*6 || n > 2*(30*6+2) {
		t.Fatalf("summary %q: want about %d candles (30 days of 4h, two symbols)", out, 2*30*6)
	}
	_, errs, code = run(t, env, "backfill", "--market", "crypto", "--exchange", "binance",
		"--symbols", "BTC_USDT,ETH_USDT", "--timeframe", "4h", "--days", "30")
	if code != 0 || strings.Count(errs, "(resumed)") != 2 {
		t.Fatalf("second run did not resume: exit %d\n%s", code, errs)
	}
	for _, bad := range [][]string{
		{"backfill", "--market", "bonds", "--exchange", "binance", "--timeframe", "1h"},
		{"backfill", "--market", "crypto", "--exchange", "binance", "--timeframe", "2h"},
		{"backfill", "--market", "crypto", "--exchange", "kraken", "--timeframe", "1h"},
		{"backfill", "--market", "crypto", "--exchange", "binance", "--timeframe", "1h", "--days", "0"},
	} {
		if _, errs, code := run(t, env, bad...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errs)
		}
	}
}

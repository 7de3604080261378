package app_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/marketscreener/market/feeds/archivetest"
)

// TestImportCommand: marketd import reads the archive at MARKET_FEED_URLS'
// binance-archive, reports the refused file (exit 1), the gaps per series
// and the delisted symbols; a second run loads nothing again; bad flags
// exit 2 naming the flag.
func TestImportCommand(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(archivetest.Small())
	t.Cleanup(srv.Close)
	env := testEnv(t)
	env["MARKET_FEED_URLS"] = "binance-archive=" + srv.URL
	env["MARKET_CANDLE_RETENTION"] = "1h=forever,4h=forever"
	env["MARKET_LOG_LEVEL"] = "info"
	mustRun(t, env, "migrate")
	args := []string{"import", "--source", "binance-archive", "--market", "crypto", "--instrument", "spot",
		"--timeframes", "1d,4h,1h", "--from", "2024-11", "--to", "2025-02"}
	out, errs, code := run(t, env, args...)
	if code != 1 || !strings.Contains(errs, "1 file(s) refused") {
		t.Fatalf("import: exit %d, want 1 (a refused file): %s", code, errs)
	}
	for _, want := range []string{
		"imported 9 series: 107 files loaded, 0 loaded before",
		"crypto/binance/BTC_USDT/1d  data/spot/monthly/klines/BTCUSDT/1d/BTCUSDT-1d-2024-12.zip",
		"crypto/binance/ETH_USDT/1h  2024-12-10T00:00:00Z .. 2024-12-12T23:00:00Z  72 missing",
		"LUNA_USDT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, `"msg":"import progress"`) {
		t.Errorf("no structured progress in the log:\n%s", errs)
	}
	out, _, code = run(t, env, append(args, "--json")...)
	var rep struct {
		Files, Skipped int
		Refused        map[string][]struct{ Key string }
		Gaps           map[string][]struct{ Missing int }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	if rep.Files != 0 || rep.Skipped != 107 || len(rep.Refused["crypto/binance/BTC_USDT/1d"]) != 1 || rep.Gaps["crypto/binance/ETH_USDT/1h"][0].Missing != 72 {
		t.Errorf("second run: %+v, want 0 files loaded, 107 skipped, the refusal and gaps again", rep)
	}
	for _, bad := range [][]string{
		{"import", "--source", "kraken"},
		{"import", "--market", "stocks"},
		{"import", "--instrument", "perpetual"},
		{"import", "--timeframes", "1d,2h"},
		{"import", "--from", "2024"},
		{"import", "--from", "2025-01", "--to", "2024-12"},
		{"import", "--concurrency", "0"},
		{"import", "--symbols", "BTC USDT!"},
	} {
		if _, errs, code := run(t, env, bad...); code != 2 || !strings.Contains(errs, "--"+strings.TrimPrefix(bad[1], "--")) {
			t.Errorf("%v: exit %d (%s), want 2 naming the flag", bad, code, errs)
		}
	}
}

package feeds

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestBinanceFundamentals(t *testing.T) {
	t.Parallel()
	b, tb := setupBinance(t)
	tb.up.mux.Handle("/fapi/v1/premiumIndex", file(t, "binance/fapi_premiumIndex.json"))
	tb.up.mux.HandleFunc("/futures/data/openInterestHist", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("period") != "1d" || q.Get("limit") != "2" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		file(t, "binance/fapi_openInterestHist_"+q.Get("symbol")+".json")(w, r)
	})
	ctx := context.Background()

	got, err := b.Fundamentals(ctx, domain.Crypto, "BTC_USDT")
	if err != nil {
		t.Fatal(err)
	}
	// lastFundingRate 0.0001 per 8 h = 0.01 %; open interest 80 000 → 82 400 = +3 %.
	if math.Abs(got[FundamentalFundingRate]-0.01) > 1e-12 || math.Abs(got[FundamentalOpenInterestChg]-3) > 1e-9 || len(got) != 2 {
		t.Errorf("BTC_USDT fundamentals = %v, want funding 0.01 %% and open interest +3 %%", got)
	}

	// ETHUSDT's funding rate is empty and its open interest negative: both
	// dropped with a log line, so ETH_USDT has no inputs at all.
	if _, err := b.Fundamentals(ctx, domain.Crypto, "ETH_USDT"); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Errorf("ETH_USDT: err = %v, want ENOTFOUND (every input rejected)", err)
	}
	if n := tb.logs.count("dropping bad funding row") + tb.logs.count("dropping bad open-interest history"); n != 2 ||
		!strings.Contains(tb.logs.String(), "ETHUSDT") {
		t.Errorf("want the bad funding row and the bad history logged, got %d:\n%s", n, tb.logs)
	}
	// DOGE has a spot market but no perpetual here; forex is not Binance's.
	if _, err := b.Fundamentals(ctx, domain.Crypto, "DOGE_USDT"); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Errorf("DOGE_USDT: err = %v, want ENOTFOUND", err)
	}
	if _, err := b.Fundamentals(ctx, domain.Forex, "EUR_USD"); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Errorf("forex: err = %v, want ENOTFOUND", err)
	}
	// One premiumIndex download served every call of the minute.
	if n := len(tb.up.requestsTo("/fapi/v1/premiumIndex")); n != 1 {
		t.Errorf("premiumIndex fetched %d times, want 1", n)
	}
	var _ FundamentalsProvider = b
}

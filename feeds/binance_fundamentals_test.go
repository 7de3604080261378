package feeds

import (
	"context"
	"encoding/json"
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
	tb.up.mux.Handle("/fapi/v1/fundingInfo", body(http.StatusOK, "[]"))
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
	// lastFundingRate 0.0001 per 8 h = 0.01 %; open interest 80 000 → 82 400 = +3 %;
	// market cap: 19 960 112 BTC at 6 851 520 000 / 82 400 USDT.
	if math.Abs(got[FundamentalFundingRate]-0.01) > 1e-12 || math.Abs(got[FundamentalOpenInterestChg]-3) > 1e-9 ||
		math.Abs(got[FundamentalMarketCap]/(19960112*6851520000.0/82400)-1) > 1e-12 || len(got) != 3 {
		t.Errorf("BTC_USDT fundamentals = %v, want funding 0.01 %%, open interest +3 %% and a market cap", got)
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

// Documented payloads of the USDⓈ-M futures market-data endpoints. Rows
// marked "documented" are the docs' own examples verbatim; the others are
// rows of the same documented shape for the symbols under test.
const (
	// https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Exchange-Information
	// (the documented symbol object, trimmed to the fields the feed reads;
	// 1000PEPE, 1MBABYDOGE and 1INCH are base assets as Binance lists them).
	docFapiExchangeInfo = `{"timezone":"UTC","serverTime":1565246363776,"symbols":[
		{"symbol":"BLZUSDT","pair":"BLZUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BLZ","quoteAsset":"USDT","marginAsset":"USDT"},
		{"symbol":"BTCUSDT","pair":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT","marginAsset":"USDT"},
		{"symbol":"1000PEPEUSDT","pair":"1000PEPEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1000PEPE","quoteAsset":"USDT","marginAsset":"USDT"},
		{"symbol":"1MBABYDOGEUSDT","pair":"1MBABYDOGEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1MBABYDOGE","quoteAsset":"USDT","marginAsset":"USDT"},
		{"symbol":"1INCHUSDT","pair":"1INCHUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1INCH","quoteAsset":"USDT","marginAsset":"USDT"}]}`
	// https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Mark-Price
	// (BTCUSDT documented; the other rows copy its rate).
	docPremiumIndex = `[
		{"symbol":"BTCUSDT","markPrice":"11793.63104562","indexPrice":"11781.80495970","estimatedSettlePrice":"11781.16138815","lastFundingRate":"0.00038246","interestRate":"0.00010000","nextFundingTime":1597392000000,"time":1597370495002},
		{"symbol":"1000PEPEUSDT","markPrice":"0.0046123","indexPrice":"0.00461547","estimatedSettlePrice":"0.00462110","lastFundingRate":"0.00038246","interestRate":"0.00010000","nextFundingTime":1597392000000,"time":1597370495002},
		{"symbol":"1MBABYDOGEUSDT","markPrice":"0.0012","indexPrice":"0.0012","estimatedSettlePrice":"0.0012","lastFundingRate":"0.00038246","interestRate":"0.00010000","nextFundingTime":1597392000000,"time":1597370495002},
		{"symbol":"1INCHUSDT","markPrice":"0.2","indexPrice":"0.2","estimatedSettlePrice":"0.2","lastFundingRate":"0.00038246","interestRate":"0.00010000","nextFundingTime":1597392000000,"time":1597370495002}]`
	// https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Get-Funding-Rate-Info
	// (BLZUSDT documented: only symbols with an adjusted interval or cap
	// are listed; BTCUSDT and 1INCHUSDT are absent, so 8 h).
	docFundingInfo = `[
		{"symbol":"BLZUSDT","adjustedFundingRateCap":"0.02500000","adjustedFundingRateFloor":"-0.02500000","fundingIntervalHours":8,"disclaimer":false},
		{"symbol":"1000PEPEUSDT","adjustedFundingRateCap":"0.02000000","adjustedFundingRateFloor":"-0.02000000","fundingIntervalHours":4,"disclaimer":false},
		{"symbol":"1MBABYDOGEUSDT","adjustedFundingRateCap":"0.03000000","adjustedFundingRateFloor":"-0.03000000","fundingIntervalHours":1,"disclaimer":false}]`
	// https://developers.binance.com/docs/derivatives/usds-margined-futures/market-data/rest-api/Open-Interest-Statistics
	// (documented: timestamp as a string; the current revision of the
	// example carries CMCCirculatingSupply).
	docOpenInterestHist = `[
		{"symbol":"BTCUSDT","sumOpenInterest":"20403.63700000","sumOpenInterestValue":"150570784.07809979","CMCCirculatingSupply":"165880.538","timestamp":"1583127900000"},
		{"symbol":"BTCUSDT","sumOpenInterest":"20401.36700000","sumOpenInterestValue":"149940752.14464448","CMCCirculatingSupply":"165880.538","timestamp":"1583128200000"}]`
)

// setupBinanceDocs serves the documented futures payloads; openInterestHist
// answers with oi for every symbol.
func setupBinanceDocs(t *testing.T, oi http.HandlerFunc) (*binance, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.up.mux.Handle("/fapi/v1/exchangeInfo", body(http.StatusOK, docFapiExchangeInfo))
	tb.up.mux.Handle("/fapi/v1/premiumIndex", body(http.StatusOK, docPremiumIndex))
	tb.up.mux.Handle("/fapi/v1/fundingInfo", body(http.StatusOK, docFundingInfo))
	tb.up.mux.Handle("/futures/data/openInterestHist", oi)
	return newBinance(tb.cfg), tb
}

// TestBinanceFundamentalsFromDocumentedPayloads: multiplier perpetuals
// (1000PEPEUSDT, 1MBABYDOGEUSDT) serve their spot pair's fundamentals;
// funding rates are scaled from each symbol's interval to 8 h; the
// documented string timestamps parse; the circulating supply gives a
// market cap, priced per unit of the asset.
func TestBinanceFundamentalsFromDocumentedPayloads(t *testing.T) {
	t.Parallel()
	b, tb := setupBinanceDocs(t, body(http.StatusOK, docOpenInterestHist))
	ctx := context.Background()
	const rate = 0.00038246 * 100 // percent per funding interval
	const oiChange = (20401.367/20403.637 - 1) * 100
	const btcPrice = 149940752.14464448 / 20401.367 // per contract unit
	for _, tt := range []struct {
		symbol, perp string
		per8h, mcap  float64
	}{
		{"BTC_USDT", "BTCUSDT", rate, 165880.538 * btcPrice},                       // absent from fundingInfo: 8 h
		{"PEPE_USDT", "1000PEPEUSDT", rate * 2, 165880.538 * btcPrice / 1000},      // 4 h; a contract unit is 1,000 PEPE
		{"BABYDOGE_USDT", "1MBABYDOGEUSDT", rate * 8, 165880.538 * btcPrice / 1e6}, // 1 h; a unit is a million
		{"1INCH_USDT", "1INCHUSDT", rate, 165880.538 * btcPrice},                   // 1INCH is an asset, not a multiplier
	} {
		got, err := b.Fundamentals(ctx, domain.Crypto, tt.symbol)
		if err != nil {
			t.Fatalf("%s: %v", tt.symbol, err)
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b)) }
		if !near(got[FundamentalFundingRate], tt.per8h) || !near(got[FundamentalOpenInterestChg], oiChange) ||
			!near(got[FundamentalMarketCap], tt.mcap) || len(got) != 3 {
			t.Errorf("%s = %v, want funding %v %%/8h, open interest %v %%, market cap %v", tt.symbol, got, tt.per8h, oiChange, tt.mcap)
		}
		if rs := tb.up.requestsTo("/futures/data/openInterestHist"); rs[len(rs)-1].URL.Query().Get("symbol") != tt.perp {
			t.Errorf("%s: open interest asked for %s, want %s", tt.symbol, rs[len(rs)-1].URL.Query().Get("symbol"), tt.perp)
		}
	}
	// 1000PEPE_USDT is not a spot pair of its own here: the perpetual's
	// canonical name is matched exactly, never re-scaled twice.
	if got, err := b.Fundamentals(ctx, domain.Crypto, "1000PEPE_USDT"); err != nil || math.Abs(got[FundamentalFundingRate]-rate*2) > 1e-12 {
		t.Errorf("1000PEPE_USDT = %v, %v; want the 1000PEPEUSDT rate per 8 h", got, err)
	}
	if n := len(tb.up.requestsTo("/fapi/v1/fundingInfo")); n != 1 {
		t.Errorf("fundingInfo fetched %d times, want 1 (cached)", n)
	}
}

// TestBinanceFundamentalsInputsFailAlone: a failed open-interest call keeps
// the funding rate, and a failed fundingInfo (rates cannot be labelled)
// keeps the open interest.
func TestBinanceFundamentalsInputsFailAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, tb := setupBinanceDocs(t, body(http.StatusBadRequest, `{"code":-1121,"msg":"Invalid symbol."}`))
	got, err := b.Fundamentals(ctx, domain.Crypto, "PEPE_USDT")
	if err != nil || len(got) != 1 || math.Abs(got[FundamentalFundingRate]-0.00038246*200) > 1e-12 {
		t.Errorf("open interest failing: %v, %v; want the funding rate alone", got, err)
	}
	if tb.logs.count("fundamentals input unavailable") != 1 {
		t.Errorf("want the failed input logged:\n%s", tb.logs)
	}

	tb2 := setup(t)
	tb2.up.mux.Handle("/fapi/v1/exchangeInfo", body(http.StatusOK, docFapiExchangeInfo))
	tb2.up.mux.Handle("/fapi/v1/premiumIndex", body(http.StatusOK, docPremiumIndex))
	tb2.up.mux.Handle("/fapi/v1/fundingInfo", body(http.StatusForbidden, `{"code":-2015,"msg":"forbidden"}`))
	tb2.up.mux.Handle("/futures/data/openInterestHist", body(http.StatusOK, docOpenInterestHist))
	got, err = newBinance(tb2.cfg).Fundamentals(ctx, domain.Crypto, "BTC_USDT")
	if _, funding := got[FundamentalFundingRate]; err != nil || funding || got[FundamentalOpenInterestChg] == 0 {
		t.Errorf("fundingInfo failing: %v, %v; want open interest and market cap, no unlabelled funding rate", got, err)
	}

	tb3 := setup(t)
	tb3.up.mux.Handle("/fapi/v1/exchangeInfo", body(http.StatusOK, docFapiExchangeInfo))
	tb3.up.mux.Handle("/fapi/v1/premiumIndex", body(http.StatusForbidden, `{}`))
	tb3.up.mux.Handle("/futures/data/openInterestHist", body(http.StatusForbidden, `{}`))
	tb3.up.mux.Handle("/fapi/v1/fundingInfo", body(http.StatusOK, docFundingInfo))
	if _, err := newBinance(tb3.cfg).Fundamentals(ctx, domain.Crypto, "BTC_USDT"); err == nil || domain.ErrorCode(err) == domain.ENOTFOUND {
		t.Errorf("every input failing: err %v, want the upstream error (not ENOTFOUND)", err)
	}
}

// FuzzBinanceOpenInterest: whatever openInterestHist answers, the inputs
// derived from it are finite, and a market cap is never negative.
func FuzzBinanceOpenInterest(f *testing.F) {
	f.Add([]byte(docOpenInterestHist), 1000.0)
	f.Add([]byte(`[{"sumOpenInterest":"1","timestamp":1},{"sumOpenInterest":"1e308","sumOpenInterestValue":"1e308","CMCCirculatingSupply":"1e308","timestamp":"2"}]`), 1.0)
	f.Add([]byte(`[{"sumOpenInterest":"0","timestamp":"x"},{"sumOpenInterest":"NaN","timestamp":null}]`), 1e6)
	f.Fuzz(func(t *testing.T, data []byte, multiplier float64) {
		var hist []binanceOpenInterest
		if json.Unmarshal(data, &hist) != nil {
			return
		}
		if chg, err := openInterestChange(hist); err == nil && (math.IsNaN(chg) || math.IsInf(chg, 0)) {
			t.Fatalf("change %v from %s", chg, data)
		}
		if len(hist) > 0 {
			if mcap, ok := openInterestMarketCap(hist[len(hist)-1], multiplier); ok && (math.IsNaN(mcap) || math.IsInf(mcap, 0) || mcap <= 0) {
				t.Fatalf("market cap %v from %s ×%v", mcap, data, multiplier)
			}
		}
	})
}

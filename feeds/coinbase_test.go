package feeds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func setupCoinbase(t *testing.T) (*coinbase, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.up.mux.Handle("/products", file(t, "coinbase/products.json"))
	tb.up.mux.Handle("/api/v3/brokerage/market/products", body(http.StatusOK, docPublicProducts))
	tb.up.mux.Handle("/products/BTC-USD/candles", file(t, "coinbase/candles_BTC-USD_3600.json"))
	return newCoinbase(tb.cfg), tb
}

// docPublicProducts is Advanced Trade's List Public Products response:
// https://docs.cdp.coinbase.com/api-reference/advanced-trade-api/rest-api/public/list-public-products
// BTC-USD is the documented example product (trimmed to its scalar
// fields; its change written "9.43%" as the docs do); ETH-USD, ETH-BTC,
// SOL-USD and DOGE-USD are rows of the same shape as the live API writes
// them ("-0.8", no percent sign). SOL-USD lacks a price, DOGE-USD's change
// is not a number, BTC-EUR is not a listed quote.
const docPublicProducts = `{"products":[
	{"product_id":"BTC-USD","price":"140.21","price_percentage_change_24h":"9.43%","volume_24h":"1908432","volume_percentage_change_24h":"9.43%",
	 "base_increment":"0.00000001","quote_increment":"0.00000001","quote_min_size":"0.00000001","quote_max_size":"1000","base_min_size":"0.00000001",
	 "base_max_size":"1000","base_name":"Bitcoin","quote_name":"US Dollar","watched":true,"is_disabled":false,"new":true,"status":"<string>",
	 "cancel_only":true,"limit_only":true,"post_only":true,"trading_disabled":false,"auction_mode":true,"product_type":"SPOT",
	 "quote_currency_id":"USD","base_currency_id":"BTC","mid_market_price":"140.22","alias":"BTC-USD","alias_to":["BTC-USDC"],
	 "base_display_symbol":"BTC","quote_display_symbol":"USD","view_only":true,"price_increment":"0.00000001","display_name":"BTC PERP",
	 "product_venue":"neptune","approximate_quote_24h_volume":"1908432","new_at":"2021-07-01T00:00:00.000Z"},
	{"product_id":"ETH-USD","price":"2976","price_percentage_change_24h":"-0.8","volume_24h":"150000.5","product_type":"SPOT"},
	{"product_id":"ETH-BTC","price":"0.03545","price_percentage_change_24h":"-0.58","volume_24h":"2201.84","approximate_quote_24h_volume":"78.05","product_type":"SPOT"},
	{"product_id":"SOL-USD","price_percentage_change_24h":"1.2","volume_24h":"1000","product_type":"SPOT"},
	{"product_id":"DOGE-USD","price":"0.16","price_percentage_change_24h":"n/a","volume_24h":"1000","product_type":"SPOT"},
	{"product_id":"BTC-EUR","price":"71000","price_percentage_change_24h":"1","volume_24h":"10","product_type":"SPOT"}],
	"num_products":6}`

func TestCoinbaseSymbolsAndTickers(t *testing.T) {
	t.Parallel()
	c, tb := setupCoinbase(t)
	ctx := context.Background()
	syms, err := c.Symbols(ctx, coinbaseSpot)
	if err != nil {
		t.Fatal(err)
	}
	// BTC-EUR is outside the listed quotes, RGT-USD delisted.
	if want := []string{"BTC_USD", "DOGE_USD", "ETH_BTC", "ETH_USD", "SOL_USD"}; !slices.Equal(syms, want) {
		t.Errorf("symbols %v, want %v", syms, want)
	}
	got, err := c.Tickers(ctx, coinbaseSpot)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "BTC_USD", Price: 140.21, ChangePct: 9.43, Volume: 1908432, UpdatedAt: testNow},
		{Symbol: "ETH_USD", Price: 2976, ChangePct: -0.8, Volume: 150000.5 * 2976, UpdatedAt: testNow},
		{Symbol: "ETH_BTC", Price: 0.03545, ChangePct: -0.58, Volume: 78.05, UpdatedAt: testNow},
	}
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("tickers:\ngot  %+v\nwant %+v", got, want)
	}
	// SOL-USD lacks a price, DOGE-USD's change is not a number.
	if n := tb.logs.count("dropping bad ticker row"); n != 2 {
		t.Errorf("%d dropped rows logged, want 2:\n%s", n, tb.logs)
	}
	// One request for every product, none per product.
	if n := len(tb.up.requestsTo("/api/v3/brokerage/market/products")); n != 1 || len(tb.up.requests) != 2 {
		t.Errorf("%d product-list requests of %d in all, want 1 (and the /products listing)", n, len(tb.up.requests))
	}
}

func TestCoinbaseCandles(t *testing.T) {
	t.Parallel()
	c, tb := setupCoinbase(t)
	ctx := context.Background()
	since := ms(1763805600000) // 10:00
	got, err := c.Candles(ctx, coinbaseSpot, "BTC_USD", domain.TF1h, since, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: since, Open: 83512, High: 83790.1, Low: 83305.5, Close: 83650.01, Volume: 212.33811},
		{Time: since.Add(time.Hour), Open: 83650.01, High: 83921, Low: 83480, Close: 83499.99, Volume: 168.01233},
		{Time: since.Add(2 * time.Hour), Open: 83500, High: 83610.44, Low: 82917.13, Close: 83022.55, Volume: 294.91122},
		{Time: since.Add(3 * time.Hour), Open: 83022.56, High: 83300, Low: 82977, Close: 83148.49, Volume: 81.71900214},
	}
	if !slices.EqualFunc(got, want, candleEqual) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	q := tb.up.requestsTo("/products/BTC-USD/candles")[0].URL.Query()
	if q.Get("granularity") != "3600" || q.Get("start") != "2025-11-22T10:00:00Z" {
		t.Errorf("query %v", q)
	}

	// 4h is aggregated from hourly candles.
	four, err := c.Candles(ctx, coinbaseSpot, "BTC_USD", domain.TF4h, ms(1763798400000), 10) // 08:00
	if err != nil {
		t.Fatal(err)
	}
	wantFour := []domain.Candle{
		{Time: ms(1763798400000), Open: 83512, High: 83921, Low: 83305.5, Close: 83499.99, Volume: 212.33811 + 168.01233},
		{Time: ms(1763812800000), Open: 83500, High: 83610.44, Low: 82917.13, Close: 83148.49, Volume: 294.91122 + 81.71900214},
	}
	if !slices.EqualFunc(four, wantFour, candleEqual) {
		t.Errorf("4h got %+v\nwant %+v", four, wantFour)
	}
	if _, err := c.Candles(ctx, coinbaseSpot, "BTC_EUR", domain.TF1h, since, 4); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unlisted symbol: %v", err)
	}
}

func TestCoinbaseRejectsCorruptCandles(t *testing.T) {
	t.Parallel()
	rejectsCorrupt(t, NameCoinbase, map[string]string{
		"NaN string":   `[[1763816400, 82977, 83300, "NaN", 83148.49, 81.7]]`,
		"negative vol": `[[1763816400, 82977, 83300, 83022.56, 83148.49, -81.7]]`,
		"missing":      `[[1763816400, 82977, 83300, 83022.56, 83148.49]]`,
		"non-numeric":  `[[1763816400, 82977, "x", 83022.56, 83148.49, 81.7]]`,
		"oldest first": `[[1763812800, 82917.13, 83610.44, 83500, 83022.55, 294.9], [1763816400, 82977, 83300, 83022.56, 83148.49, 81.7]]`,
	}, func(t *testing.T, bad string) error {
		c, tb := setupCoinbase(t)
		tb.up.mux.Handle("/products/ETH-USD/candles", body(http.StatusOK, bad))
		_, err := c.Candles(context.Background(), coinbaseSpot, "ETH_USD", domain.TF1h, ms(1763812800000), 4)
		return err
	})
}

// TestCoinbaseCandlesPrecedingStart: Coinbase documents that a candles
// response "may contain as many as 300 candles and some of those candles
// may precede your declared start value"
// (https://docs.cdp.coinbase.com/api-reference/exchange-api/rest-api/products/get-product-candles).
// Page 2 of a long request repeats the end of page 1: the repeats are
// dropped, not a failure of the request.
func TestCoinbaseCandlesPrecedingStart(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.Handle("/products", file(t, "coinbase/products.json"))
	tb.up.mux.HandleFunc("/products/ETH-USD/candles", func(w http.ResponseWriter, r *http.Request) {
		start, err1 := time.Parse(time.RFC3339, r.URL.Query().Get("start"))
		end, err2 := time.Parse(time.RFC3339, r.URL.Query().Get("end"))
		if err1 != nil || err2 != nil {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		// Newest first, [time, low, high, open, close, volume], with three
		// candles before start.
		var rows []string
		for ts := end.Truncate(time.Hour); !ts.Before(start.Add(-3 * time.Hour)); ts = ts.Add(-time.Hour) {
			if !ts.After(testNow) {
				rows = append(rows, fmt.Sprintf("[%d, 2950.1, 2990.5, 2960, 2975.25, 120.5]", ts.Unix()))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s]", strings.Join(rows, ","))
	})
	c := newCoinbase(tb.cfg)
	since := domain.TF1h.Truncate(testNow).Add(-399 * time.Hour)
	got, err := c.Candles(context.Background(), coinbaseSpot, "ETH_USD", domain.TF1h, since, 400)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 400 || !got[0].Time.Equal(since) || domain.ValidateCandles(got) != nil {
		t.Fatalf("got %d candles from %v, want 400 in order from %v", len(got), got[0].Time, since)
	}
	if n := len(tb.up.requestsTo("/products/ETH-USD/candles")); n != 2 {
		t.Errorf("%d candle requests, want 2 pages", n)
	}
}

// FuzzCoinbasePublicProducts: whatever the product list holds, the rows
// kept are valid tickers.
func FuzzCoinbasePublicProducts(f *testing.F) {
	f.Add([]byte(docPublicProducts))
	f.Add([]byte(`{"products":[{"product_id":"BTC-USD","price":"1e308","price_percentage_change_24h":"-100%","approximate_quote_24h_volume":"1e308"}]}`))
	f.Add([]byte(`{"products":[{"product_id":"BTC-USD","price":"-1","price_percentage_change_24h":"%","volume_24h":"NaN"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var page coinbasePublicProducts
		if decodeJSON(data, &page) != nil {
			return
		}
		for _, p := range page.Products {
			tk, err := p.ticker("BTC_USD", testNow)
			if err == nil && tk.Validate() != nil {
				t.Fatalf("kept an invalid ticker %+v from %s", tk, data)
			}
		}
	})
}

// TestCoinbaseTickersPageShorterThanAsked: List Public Products documents
// limit and offset but no maximum page size
// (docs.cdp.coinbase.com/api-reference/advanced-trade-api/rest-api/public/list-public-products),
// so a server serving fewer rows than the 250 asked must not end the list
// early: the pages go on until num_products.
func TestCoinbaseTickersPageShorterThanAsked(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.Handle("/products", file(t, "coinbase/products.json"))
	rows := []string{
		`{"product_id":"BTC-USD","price":"140.21","price_percentage_change_24h":"9.43","volume_24h":"10","approximate_quote_24h_volume":"1402.1","product_type":"SPOT"}`,
		`{"product_id":"BTC-EUR","price":"71000","price_percentage_change_24h":"1","volume_24h":"10","product_type":"SPOT"}`,
		`{"product_id":"ETH-USD","price":"2976","price_percentage_change_24h":"-0.8","volume_24h":"1","product_type":"SPOT"}`,
		`{"product_id":"ETH-BTC","price":"0.03545","price_percentage_change_24h":"-0.58","volume_24h":"2201.84","approximate_quote_24h_volume":"78.05","product_type":"SPOT"}`,
		`{"product_id":"SOL-USD","price":"150","price_percentage_change_24h":"1.2","volume_24h":"2","product_type":"SPOT"}`,
	}
	tb.up.mux.HandleFunc("/api/v3/brokerage/market/products", func(w http.ResponseWriter, r *http.Request) {
		offset := 0
		fmt.Sscan(r.URL.Query().Get("offset"), &offset)
		end := min(offset+2, len(rows)) // at most 2 a page, whatever the limit asked
		fmt.Fprintf(w, `{"products":[%s],"num_products":%d}`, strings.Join(rows[min(offset, len(rows)):end], ","), len(rows))
	})
	c := newCoinbase(tb.cfg)
	got, err := c.Tickers(context.Background(), coinbaseSpot)
	if err != nil {
		t.Fatal(err)
	}
	var syms []string
	for _, tk := range got {
		syms = append(syms, tk.Symbol)
	}
	if want := []string{"BTC_USD", "ETH_USD", "ETH_BTC", "SOL_USD"}; !slices.Equal(syms, want) {
		t.Errorf("tickers of %v, want %v", syms, want)
	}
	if n := len(tb.up.requestsTo("/api/v3/brokerage/market/products")); n != 3 {
		t.Errorf("%d pages asked, want 3 of at most 2 rows", n)
	}
}

package feeds

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func setupCoinbase(t *testing.T) (*coinbase, *testBundle) {
	t.Helper()
	tb := setup(t)
	tb.up.mux.Handle("/products", file(t, "coinbase/products.json"))
	for _, id := range []string{"BTC-USD", "ETH-USD", "ETH-BTC", "SOL-USD", "DOGE-USD"} {
		tb.up.mux.Handle("/products/"+id+"/stats", file(t, "coinbase/stats_"+id+".json"))
	}
	tb.up.mux.Handle("/products/BTC-USD/candles", file(t, "coinbase/candles_BTC-USD_3600.json"))
	return newCoinbase(tb.cfg), tb
}

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
		{Symbol: "BTC_USD", Price: 83148.49, ChangePct: (83148.49/84602.01 - 1) * 100, Volume: 9876.54321098 * 83148.49, UpdatedAt: testNow},
		{Symbol: "ETH_BTC", Price: 0.03545, ChangePct: (0.03545/0.03566 - 1) * 100, Volume: 2201.84 * 0.03545, UpdatedAt: testNow},
		{Symbol: "ETH_USD", Price: 2976, ChangePct: -0.8, Volume: 150000.5 * 2976, UpdatedAt: testNow},
	}
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("tickers:\ngot  %+v\nwant %+v", got, want)
	}
	// SOL-USD lacks "last", DOGE-USD has a non-numeric volume.
	if n := tb.logs.count("dropping bad ticker row"); n != 2 {
		t.Errorf("%d dropped rows logged, want 2:\n%s", n, tb.logs)
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

package feeds

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

func setupOKX(t *testing.T) (*okx, *testBundle) {
	t.Helper()
	tb := setup(t)
	byType := func(prefix string) http.HandlerFunc {
		spot, swap := file(t, "okx/"+prefix+"_SPOT.json"), file(t, "okx/"+prefix+"_SWAP.json")
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("instType") == "SWAP" {
				swap(w, r)
				return
			}
			spot(w, r)
		}
	}
	tb.up.mux.Handle("/api/v5/public/instruments", byType("instruments"))
	tb.up.mux.Handle("/api/v5/market/tickers", byType("tickers"))
	tb.up.mux.Handle("/api/v5/market/candles", file(t, "okx/candles_BTC-USDT_1H.json"))
	return newOKX(tb.cfg), tb
}

func TestOKXSymbolsAndTickers(t *testing.T) {
	t.Parallel()
	o, tb := setupOKX(t)
	ctx := context.Background()
	spot, err := o.Symbols(ctx, okxSpot)
	if err != nil || !slices.Equal(spot, []string{"BTC_USDT", "ETH_USDT", "OKB_USDT"}) {
		t.Errorf("spot symbols %v, %v", spot, err)
	}
	perp, err := o.Symbols(ctx, okxPerp)
	if err != nil || !slices.Equal(perp, []string{"BTC_USDT"}) {
		t.Errorf("perpetual symbols %v, %v (inverse swaps excluded)", perp, err)
	}
	got, err := o.Tickers(ctx, okxSpot)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Ticker{
		{Symbol: "BTC_USDT", Price: 83150.1, ChangePct: (83150.1/84600 - 1) * 100, Volume: 1045123456.789, UpdatedAt: ms(1763820000123)},
		{Symbol: "ETH_USDT", Price: 2976.5, ChangePct: (2976.5/3016 - 1) * 100, Volume: 612345678.9, UpdatedAt: ms(1763820000124)},
	}
	if !slices.EqualFunc(got, want, tickerClose) {
		t.Errorf("spot tickers\ngot  %+v\nwant %+v", got, want)
	}
	if tb.logs.count("dropping bad ticker row") != 1 || !strings.Contains(tb.logs.String(), "OKB-USDT") {
		t.Errorf("logs:\n%s", tb.logs)
	}
	swaps, err := o.Tickers(ctx, okxPerp)
	if err != nil || len(swaps) != 1 || !tickerClose(swaps[0], domain.Ticker{Symbol: "BTC_USDT", Price: 83110.5,
		ChangePct: (83110.5/84550.1 - 1) * 100, Volume: 120345.67 * 83110.5, UpdatedAt: ms(1763820000200)}) {
		t.Errorf("swap tickers %+v, %v", swaps, err)
	}
}

func TestOKXCandles(t *testing.T) {
	t.Parallel()
	o, tb := setupOKX(t)
	got, err := o.Candles(context.Background(), okxSpot, "BTC_USDT", domain.TF1h, time.Time{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Candle{
		{Time: ms(1763809200000), Open: 83650, High: 83921, Low: 83480, Close: 83500, Volume: 468.01},
		{Time: ms(1763812800000), Open: 83500, High: 83610.4, Low: 82917.1, Close: 83022.5, Volume: 734.12},
		{Time: ms(1763816400000), Open: 83022.5, High: 83300, Low: 82977, Close: 83150.1, Volume: 201.33},
	}
	if !slices.EqualFunc(got, want, candleEqual) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if q := tb.up.requestsTo("/api/v5/market/candles")[0].URL.Query(); q.Get("instId") != "BTC-USDT" || q.Get("bar") != "1H" || q.Get("limit") != "3" {
		t.Errorf("query %v", q)
	}
}

func TestOKXRejectsCorruptCandles(t *testing.T) {
	t.Parallel()
	rejectsCorrupt(t, NameOKX, map[string]string{
		"NaN":          `{"code":"0","msg":"","data":[["1763816400000","NaN","83300","82977","83150.1","201.33","1","1","0"]]}`,
		"negative vol": `{"code":"0","msg":"","data":[["1763816400000","83022.5","83300","82977","83150.1","-201.33","1","1","0"]]}`,
		"missing":      `{"code":"0","msg":"","data":[["1763816400000","83022.5","83300","82977"]]}`,
		"oldest first": `{"code":"0","msg":"","data":[["1763812800000","83500","83610.4","82917.1","83022.5","734.12","1","1","1"],["1763816400000","83022.5","83300","82977","83150.1","201.33","1","1","0"]]}`,
		"error code":   `{"code":"51001","msg":"Instrument ID does not exist","data":[]}`,
	}, func(t *testing.T, bad string) error {
		tb := setup(t)
		tb.up.mux.Handle("/api/v5/public/instruments", file(t, "okx/instruments_SPOT.json"))
		tb.up.mux.Handle("/api/v5/market/candles", body(http.StatusOK, bad))
		o := newOKX(tb.cfg)
		_, err := o.Candles(context.Background(), okxSpot, "BTC_USDT", domain.TF1h, time.Time{}, 3)
		return err
	})
}

package exchangesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/marketscreener/market/e2e/exchangesim"
)

// TestStatsSinceMark: POST /sim/stats/mark starts each budget's
// since_mark figures: a window open at the mark counts whole (the peak
// never understates), a later window counts alone, and the refusals and
// requests count from the mark; the whole run's figures are unchanged.
func TestStatsSinceMark(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim := alpaca(clock, exchangesim.AlpacaConfig{DataLimit: 10})
	const q = "/v2/stocks/bars/latest?symbols=AAPL"
	for range 11 { // 10 admitted, one 429
		alpacaGet(sim, q)
	}
	kline := func() {
		sim.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=2", nil))
	}
	kline()
	kline() // weight 4 in the spot window
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/sim/stats/mark", nil))
	var marked exchangesim.Stats
	if err := json.Unmarshal(rec.Body.Bytes(), &marked); rec.Code != 200 || err != nil {
		t.Fatalf("mark: %d %v", rec.Code, err)
	}
	if marked.MarkedAt == nil || !marked.MarkedAt.Equal(tuesday) {
		t.Errorf("marked at %v, want the simulator's clock %v", marked.MarkedAt, tuesday)
	}
	if d := marked.Alpaca.Data.SinceMark; d.PeakRequests != 10 || d.Refused429 != 0 || d.Requests != 0 {
		t.Errorf("at the mark: alpaca data %+v, want the open window's 10, no 429, no request", d)
	}
	if s := marked.Spot.SinceMark; s.PeakWeight != 4 || s.Requests != 0 {
		t.Errorf("at the mark: spot %+v, want the open window's weight 4", s)
	}
	if marked.Oanda.SinceMark == nil {
		t.Error("at the mark: no oanda since_mark")
	}

	clock.Set(tuesday.Add(time.Minute)) // the next windows
	for range 3 {
		alpacaGet(sim, q)
	}
	kline()
	st := sim.Stats()
	if d := st.Alpaca.Data.SinceMark; d.PeakRequests != 10 || d.Requests != 3 || d.Refused429 != 0 {
		t.Errorf("after the mark: alpaca data %+v, want peak 10 (the window open at the mark), 3 requests, no 429", d)
	}
	if st.Alpaca.Data.PeakRequests != 10 || st.Alpaca.Data.Refused429 != 1 || st.Alpaca.Data.Requests != 14 {
		t.Errorf("whole run: alpaca data %+v, want peak 10, one 429, 14 requests", st.Alpaca.Data)
	}

	sim.Mark() // again: a fresh start, in the window of 3
	for range 11 {
		alpacaGet(sim, q)
	}
	st = sim.Stats()
	if d := st.Alpaca.Data.SinceMark; d.PeakRequests != 10 || d.Requests != 11 || d.Refused429 != 4 {
		t.Errorf("second mark: alpaca data %+v, want peak 10, 11 requests, 4 429s", d)
	}
	if s := st.Spot.SinceMark; s.PeakWeight != 2 || s.Requests != 0 {
		t.Errorf("second mark: spot %+v, want the open window's weight 2, no request", s)
	}
}

// TestStockBarCounts: the counts are the bars GET /v2/stocks/bars serves
// page after page, and no key's budget is spent.
func TestStockBarCounts(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: tuesday}
	sim := alpaca(clock, exchangesim.AlpacaConfig{})
	from := tuesday.AddDate(0, 0, -20)
	got, err := sim.StockBarCounts("iex", "1Hour", []string{"MSFT", "AAPL", "AAPL"}, from, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sym := range []string{"AAPL", "MSFT"} {
		rec := alpacaGet(sim, "/v2/stocks/bars?feed=iex&timeframe=1Hour&limit=10000&symbols="+sym+"&start="+from.Format(time.RFC3339))
		var page struct {
			Bars map[string][]json.RawMessage `json:"bars"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != 200 {
			t.Fatalf("%s: %d %v", sym, rec.Code, err)
		}
		if n := len(page.Bars[sym]); n == 0 || got[sym] != n {
			t.Errorf("%s: counted %d, served %d", sym, got[sym], n)
		}
	}
	if st := sim.Stats().Alpaca.Data; st.Requests != 2 {
		t.Errorf("data requests %d: want the test's 2 alone", st.Requests)
	}
	if _, err := sim.StockBarCounts("iex", "7Parsecs", []string{"AAPL"}, from, time.Time{}); err == nil {
		t.Error("a bad timeframe: no error")
	}
}

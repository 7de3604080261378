package feeds

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// okxReplay serves an hourly BTC-USDT series the way OKX documents its two
// candle endpoints: /api/v5/market/candles holds only the latest 1,440
// rows (at most 300 a request), /api/v5/market/history-candles every row
// (at most 100 a request); both newest first, older than `after`.
// https://www.okx.com/docs-v5/en/#public-data-rest-api-get-candlesticks and
// #public-data-rest-api-get-candlesticks-history. Each row is the documented
// example row ["1597026383085","3.721","3.743","3.677","3.708","8422410",
// "22698348.04828491","12698348.04828491","1"] with its own open time.
func okxReplay(opens []time.Time) (recent, history http.HandlerFunc) {
	serve := func(rows []time.Time, pageMax int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			n, _ := strconv.Atoi(q.Get("limit"))
			n = min(max(n, 1), pageMax)
			after := int64(1) << 62
			if v := q.Get("after"); v != "" {
				after, _ = strconv.ParseInt(v, 10, 64)
			}
			var out []string
			for i := len(rows) - 1; i >= 0 && len(out) < n; i-- {
				if ts := rows[i].UnixMilli(); ts < after {
					out = append(out, fmt.Sprintf(`["%d","3.721","3.743","3.677","3.708","8422410","22698348.04828491","12698348.04828491","1"]`, ts))
				}
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"code":"0","msg":"","data":[%s]}`, strings.Join(out, ","))
		}
	}
	return serve(opens[max(0, len(opens)-okxRecentRows):], okxPage), serve(opens, okxHistoryPage)
}

// TestOKXBackfillReadsHistoryCandles: a 120-day 1h backfill (the worker's
// pages of 1,000 from the start, forward) gets every candle; the pages
// older than the latest 1,440 rows come from history-candles.
func TestOKXBackfillReadsHistoryCandles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.Handle("/api/v5/public/instruments", file(t, "okx/instruments_SPOT.json"))
	last := domain.TF1h.Truncate(testNow)
	var opens []time.Time
	for ts := last.Add(-200 * 24 * time.Hour); !ts.After(last); ts = ts.Add(time.Hour) {
		opens = append(opens, ts)
	}
	recent, history := okxReplay(opens)
	tb.up.mux.Handle("/api/v5/market/candles", recent)
	tb.up.mux.Handle("/api/v5/market/history-candles", history)
	o := newOKX(tb.cfg)

	since := last.Add(-120 * 24 * time.Hour)
	var got []domain.Candle
	for {
		cs, err := o.Candles(context.Background(), okxSpot, "BTC_USDT", domain.TF1h, since, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cs...)
		if len(cs) < 1000 {
			break
		}
		since = cs[len(cs)-1].Time.Add(time.Hour)
	}
	if want := 120*24 + 1; len(got) != want || !got[0].Time.Equal(last.Add(-120*24*time.Hour)) || !got[len(got)-1].Time.Equal(last) {
		t.Fatalf("120-day backfill: %d candles from %v to %v, want %d from 120 days ago to %v", len(got), got[0].Time, got[len(got)-1].Time, want, last)
	}
	if err := domain.ValidateCandles(got); err != nil {
		t.Fatalf("backfilled series: %v", err)
	}
	if got[0].Open != 3.721 || got[0].Volume != 8422410 {
		t.Errorf("first candle %+v, want the documented row's values", got[0])
	}
	if n := len(tb.up.requestsTo("/api/v5/market/history-candles")); n < 120*24/okxHistoryPage-15 {
		t.Errorf("history-candles asked %d times, want the older pages from it", n)
	}
	for _, r := range tb.up.requestsTo("/api/v5/market/history-candles") {
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err != nil || n > okxHistoryPage {
			t.Errorf("history-candles limit %s, want at most %d", r.URL.Query().Get("limit"), okxHistoryPage)
		}
	}
}

// TestOKXEmptyRecentPageAsksHistory: when /market/candles has nothing
// older than the asked time (its 1,440 rows end there), the page is asked
// of history-candles before the series is taken as ending.
func TestOKXEmptyRecentPageAsksHistory(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.up.mux.Handle("/api/v5/public/instruments", file(t, "okx/instruments_SPOT.json"))
	last := domain.TF1h.Truncate(testNow)
	var opens []time.Time
	for ts := last.Add(-3000 * time.Hour); !ts.After(last); ts = ts.Add(time.Hour) {
		opens = append(opens, ts)
	}
	_, history := okxReplay(opens)
	tb.up.mux.Handle("/api/v5/market/candles", body(http.StatusOK, `{"code":"0","msg":"","data":[]}`))
	tb.up.mux.Handle("/api/v5/market/history-candles", history)
	o := newOKX(tb.cfg)
	since := last.Add(-50 * time.Hour) // within the recent window: /market/candles is asked first
	got, err := o.Candles(context.Background(), okxSpot, "BTC_USDT", domain.TF1h, since, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 || !got[0].Time.Equal(since) {
		t.Fatalf("got %d candles from %v, want 20 from %v", len(got), got[0].Time, since)
	}
	if len(tb.up.requestsTo("/api/v5/market/candles")) == 0 || len(tb.up.requestsTo("/api/v5/market/history-candles")) == 0 {
		t.Errorf("want the recent endpoint asked, then the history")
	}
}

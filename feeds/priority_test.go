package feeds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
)

// TestTickersGetThroughACatchUp: against the Binance simulator, a
// catch-up's klines pages (bulk work) fill the spot budget as far as they
// may and queue for the next minute; the screener's ticker refresh
// (ticker/24hr for every symbol, weight 80, urgent) is still sent in the
// current minute. Had the catch-up been urgent work too, the refresh would
// have had to wait for the next minute: the case of the control.
//
// The spot limit is a tenth of Binance's 6,000 (planned 480, bulk work's
// 360), so the test sends a few hundred requests, not thousands. The
// clock stands still a second into a minute, and Sleep never waits:
// a bulk caller that would wait blocks until the test ends it, an urgent
// one fails, so nothing depends on how fast the machine is.
func TestTickersGetThroughACatchUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		catchUp      hostbudget.Class
		tickersWait  bool
		catchUpShare int // of the planned 480
	}{
		{"catch-up is bulk", hostbudget.Bulk, false, 360},
		{"control: catch-up is urgent", hostbudget.Urgent, true, 480},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.Date(2026, 11, 26, 15, 0, 1, 0, time.UTC)
			clock := func() time.Time { return now }
			sim := exchangesim.New(exchangesim.Config{Seed: 3, Spot: 200, Perpetual: 10, Now: clock})
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			t.Cleanup(sim.Close)
			var waiting atomic.Int64 // bulk callers booked in a later window
			sleep := func(ctx context.Context, d time.Duration) error {
				if d <= 0 {
					return ctx.Err()
				}
				if hostbudget.ClassOf(ctx) == hostbudget.Urgent && ctx.Value(catchUpKey{}) == nil {
					return fmt.Errorf("the ticker refresh would wait %s for the budget", d)
				}
				waiting.Add(1)
				<-ctx.Done()
				return ctx.Err()
			}
			b := newBinance(Config{
				BaseURLs:   map[string]string{NameBinance: srv.URL, binanceFuturesHost: srv.URL},
				HTTPClient: srv.Client(),
				Logger:     slog.New(slog.DiscardHandler),
				Now:        clock,
				Sleep:      sleep,
				Budget:     hostbudget.New(hostbudget.Options{Redis: redistest.Client(t), Prefix: redistest.Prefix(t)}),
				Limits:     map[string]hostbudget.Limit{NameBinance: {Window: time.Minute, Max: 600}},
			})
			syms, err := b.Symbols(context.Background(), binanceSpot) // exchangeInfo: 20
			if err != nil {
				t.Fatal(err)
			}

			// The catch-up: 8 callers walking the universe's 1m klines
			// until each is queued for the next minute.
			catchUp, stop := context.WithCancel(context.WithValue(hostbudget.WithClass(context.Background(), tc.catchUp), catchUpKey{}, true))
			var pages atomic.Int64
			var wg sync.WaitGroup
			const callers = 8
			for i := range callers {
				wg.Go(func() {
					for j := i; ; j += callers {
						_, err := b.Candles(catchUp, binanceSpot, syms[j%len(syms)], domain.TF1m, time.Time{}, 5)
						if errors.Is(err, context.Canceled) {
							return
						}
						if err != nil {
							t.Errorf("catch-up page: %v", err)
							return
						}
						pages.Add(1)
					}
				})
			}
			for waiting.Load() < callers {
				time.Sleep(5 * time.Millisecond)
			}
			if got := 20 + 2*int(pages.Load()); got != tc.catchUpShare {
				t.Errorf("the catch-up filled %d of the minute's weight, want %d", got, tc.catchUpShare)
			}

			tickers, err := b.Tickers(context.Background(), binanceSpot)
			stop()
			wg.Wait()
			if tc.tickersWait {
				if err == nil || !strings.Contains(err.Error(), "would wait") {
					t.Errorf("tickers: %v, want a wait for the next minute beside an urgent catch-up", err)
				}
				return
			}
			if err != nil || len(tickers) != len(syms) {
				t.Fatalf("tickers: %d rows, %v; want %d rows in the current minute", len(tickers), err, len(syms))
			}
			st := sim.Stats().Spot
			if st.PeakWeight != 360+80 || st.Refused429 != 0 || st.Banned418 != 0 {
				t.Errorf("simulator: peak %d (want 360 of the catch-up + 80), 429s %d, 418s %d", st.PeakWeight, st.Refused429, st.Banned418)
			}
		})
	}
}

// catchUpKey marks the catch-up's context, so the test's Sleep tells its
// waits from the ticker refresh's in the control, where both are urgent.
type catchUpKey struct{}

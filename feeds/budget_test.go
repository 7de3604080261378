package feeds

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/redistest"
)

// weightServer stands in for Binance's spot host on the real clock: it
// counts the documented weight of what reaches it per window, as Binance
// does per IP, and records when each klines request arrived.
type weightServer struct {
	*upstream
	window time.Duration

	mu       sync.Mutex
	used     map[int64]int // window number → weight
	arrivals []time.Time
}

func newWeightServer(t *testing.T, window time.Duration, klines http.HandlerFunc) *weightServer {
	t.Helper()
	s := &weightServer{upstream: newUpstream(t), window: window, used: map[int64]int{}}
	s.mux.Handle("/api/v3/exchangeInfo", file(t, "binance/exchangeInfo.json"))
	s.mux.HandleFunc("/api/v3/klines", func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		s.mu.Lock()
		s.arrivals = append(s.arrivals, now)
		idx := now.UnixNano() / int64(s.window)
		s.used[idx] += binanceSpotWeightOf(r.URL.Path, r.URL.Query())
		used := s.used[idx]
		s.mu.Unlock()
		w.Header().Set("X-MBX-USED-WEIGHT-1M", fmt.Sprint(used))
		klines(w, r)
	})
	return s
}

func (s *weightServer) peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := 0
	for _, u := range s.used {
		p = max(p, u)
	}
	return p
}

func (s *weightServer) arrivedIn(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.arrivals {
		if !a.Before(from) && a.Before(to) {
			n++
		}
	}
	return n
}

// process is one worker process of a deployment: its own adapter and its
// own budget object, on the deployment's Redis prefix.
func process(t *testing.T, up *upstream, prefix string, limit hostbudget.Limit, logs *logBuffer) *binance {
	t.Helper()
	budget := hostbudget.New(hostbudget.Options{Redis: redistest.Client(t), Prefix: prefix})
	return newBinance(Config{
		BaseURLs:   map[string]string{NameBinance: up.URL, binanceFuturesHost: up.URL},
		HTTPClient: up.Client(),
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		Now:        time.Now,
		Sleep:      sleepCtx,
		Budget:     budget,
		Limits:     map[string]hostbudget.Limit{NameBinance: limit},
	})
}

// burst has callers goroutines of each process fetch candles until n
// requests are done in all.
func burst(t *testing.T, procs []*binance, callers, n int) {
	t.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for _, b := range procs {
		for range callers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if _, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4); err != nil {
						t.Errorf("candles: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// untilStopped has callers goroutines of each process fetch candles until
// stop is set.
func untilStopped(t *testing.T, procs []*binance, callers int, stop *atomic.Bool) {
	t.Helper()
	var wg sync.WaitGroup
	for _, b := range procs {
		for range callers {
			wg.Go(func() {
				for !stop.Load() {
					if _, err := b.Candles(context.Background(), binanceSpot, "BTC_USDT", domain.TF1h, time.Time{}, 4); err != nil {
						t.Errorf("candles: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// TestBinanceBudgetSharedByProcesses: two processes hammering one host
// together stay within its limit in every window of the host's clock
// (a window shortened to a second so the test takes seconds).
func TestBinanceBudgetSharedByProcesses(t *testing.T) {
	t.Parallel()
	klines, err := os.ReadFile("testdata/binance/klines_BTCUSDT_1h.json")
	if err != nil {
		t.Fatal(err)
	}
	limit := hostbudget.Limit{Window: time.Second, Max: 100}
	srv := newWeightServer(t, limit.Window, func(w http.ResponseWriter, r *http.Request) { w.Write(klines) })
	prefix := redistest.Prefix(t)
	logs := &logBuffer{}
	procs := []*binance{process(t, srv.upstream, prefix, limit, logs), process(t, srv.upstream, prefix, limit, logs)}
	burst(t, procs, 8, 120) // 240 weight: three windows' planned 80
	if p := srv.peak(); p > limit.Max {
		t.Errorf("peak weight %d in a window, over the limit %d", p, limit.Max)
	} else {
		t.Logf("peak weight %d in a window (limit %d, planned %d)", p, limit.Max, limit.Max*8/10)
	}
}

// refusalBody is Binance's documented -1003 TOO_MANY_REQUESTS body of a
// 429 and of a 418 (binance-spot-api-docs errors.md).
var refusalBody = map[int]string{
	http.StatusTooManyRequests: `{"code":-1003,"msg":"Too much request weight used; current limit is 6000 request weight per 1 MINUTE. Please use WebSocket Streams for live updates to avoid polling the API."}`,
	http.StatusTeapot:          `{"code":-1003,"msg":"Way too much request weight used; IP banned until 1764170000000. Please use WebSocket Streams for live updates to avoid bans."}`,
}

// TestBinanceRefusalPausesEveryCaller: a 429's or a 418's Retry-After,
// received by one caller of one process, holds every caller of both
// processes: no request reaches the host inside the window (after a grace
// for requests sent before the refusal reached the callers), and they all
// resume after it.
func TestBinanceRefusalPausesEveryCaller(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusTeapot} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			klines, err := os.ReadFile("testdata/binance/klines_BTCUSDT_1h.json")
			if err != nil {
				t.Fatal(err)
			}
			const retryAfter = 2 * time.Second
			var refusedAt atomic.Int64
			var n atomic.Int64
			srv := newWeightServer(t, time.Minute, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 20 {
					refusedAt.Store(time.Now().UnixNano())
					w.Header().Set("Retry-After", fmt.Sprint(int(retryAfter.Seconds())))
					w.WriteHeader(status)
					w.Write([]byte(refusalBody[status]))
					return
				}
				w.Write(klines)
			})
			prefix := redistest.Prefix(t)
			logs := &logBuffer{}
			limit := hostbudget.Limit{Window: time.Second, Max: 100} // 40 klines a second in all
			procs := []*binance{process(t, srv.upstream, prefix, limit, logs), process(t, srv.upstream, prefix, limit, logs)}
			// The callers keep asking until half a second after the
			// Retry-After has passed.
			var stop atomic.Bool
			go func() {
				for refusedAt.Load() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(time.Until(time.Unix(0, refusedAt.Load()).Add(retryAfter + 500*time.Millisecond)))
				stop.Store(true)
			}()
			untilStopped(t, procs, 4, &stop)
			at := time.Unix(0, refusedAt.Load())
			const grace = 500 * time.Millisecond // for requests booked before the refusal, still in transit
			if got := srv.arrivedIn(at.Add(grace), at.Add(retryAfter)); got != 0 {
				t.Errorf("%d requests reached the host inside the %s Retry-After", got, retryAfter)
			}
			t.Logf("%d requests arrived in the %s after the refusal (sent before the callers knew of it)", srv.arrivedIn(at, at.Add(grace)), grace)
			if got := srv.arrivedIn(at.Add(retryAfter), at.Add(time.Hour)); got == 0 {
				t.Error("no request after the Retry-After: the callers did not resume")
			}
			if status == http.StatusTeapot && !strings.Contains(logs.String(), "BANNED") {
				t.Errorf("a 418 was not logged loudly:\n%s", logs)
			}
		})
	}
}

// TestBinanceFuturesDataHasItsOwnLimit: /futures/data/* weighs 0 against
// the fapi weight but is booked against its own documented limit (1,000
// requests per 5 minutes, here shortened to 2): past it, a caller fails
// fast rather than waiting minutes, and nothing reaches the host.
func TestBinanceFuturesDataHasItsOwnLimit(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.cfg.Limits = map[string]hostbudget.Limit{binanceFuturesDataHost: {Window: 5 * time.Minute, Max: 2}}
	tb.up.mux.Handle("/futures/data/openInterestHist", file(t, "binance/fapi_openInterestHist_BTCUSDT.json"))
	b := newBinance(tb.cfg)
	ctx := context.Background()
	q := map[string][]string{"symbol": {"BTCUSDT"}, "period": {"1d"}, "limit": {"2"}}
	if _, err := b.futures.get(ctx, "/futures/data/openInterestHist", q); err != nil {
		t.Fatal(err)
	}
	_, err := b.futures.get(ctx, "/futures/data/openInterestHist", q)
	if err == nil || !strings.Contains(err.Error(), "rate limited until 2025-11-22T14:05:00Z") {
		t.Errorf("second request: %v, want rate limited until the 5-minute window ends", err)
	}
	if n := len(tb.up.requestsTo("/futures/data/openInterestHist")); n != 1 {
		t.Errorf("%d requests reached the host, want 1", n)
	}
}

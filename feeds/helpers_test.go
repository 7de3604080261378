package feeds

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The combinations the adapter tests ask for.
var (
	binanceSpot    = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	binancePerp    = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"}
	binanceFutures = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "futures"}
	okxSpot        = domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "spot"}
	okxPerp        = domain.Combination{Market: domain.Crypto, Exchange: "okx", Instrument: "perpetual"}
	coinbaseSpot   = domain.Combination{Market: domain.Crypto, Exchange: "coinbase", Instrument: "spot"}
	oandaMajor     = domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "major"}
	oandaMinor     = domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "minor"}
	nasdaq         = domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	nyse           = domain.Combination{Market: domain.Stocks, Exchange: "nyse", Instrument: "stock"}
)

// testNow is the fixed clock of the adapter tests: the recorded responses
// were captured around it.
var testNow = time.Date(2025, 11, 22, 14, 0, 30, 0, time.UTC)

// upstream is an httptest server standing in for a provider, recording
// every request it gets.
type upstream struct {
	*httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex
	requests []*http.Request
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{mux: http.NewServeMux()}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.requests = append(u.requests, r.Clone(context.Background()))
		u.mu.Unlock()
		u.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// requestsTo returns the recorded requests whose path is path.
func (u *upstream) requestsTo(path string) []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*http.Request
	for _, r := range u.requests {
		if r.URL.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// file serves a recorded response from testdata.
func file(t *testing.T, name string) http.HandlerFunc {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}
}

// body serves a literal response.
func body(status int, s string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(s))
	}
}

// sequence answers the n-th request with handlers[n] and repeats the last.
func sequence(handlers ...http.HandlerFunc) http.HandlerFunc {
	var mu sync.Mutex
	n := 0
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handlers[min(n, len(handlers)-1)]
		n++
		mu.Unlock()
		h(w, r)
	}
}

// sleeps records the waits of the retry logic instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ds)
}

// logBuffer collects log output so tests can check what was dropped.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) count(substr string) int { return strings.Count(l.String(), substr) }

// testBundle is what an adapter test works with.
type testBundle struct {
	cfg    Config
	up     *upstream
	sleeps *sleeps
	logs   *logBuffer
}

// setup starts a fake upstream and a Config pointing every provider at it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	up := newUpstream(t)
	s := &sleeps{}
	logs := &logBuffer{}
	urls := map[string]string{}
	for _, n := range HostNames() {
		urls[n] = up.URL
	}
	return &testBundle{
		up: up, sleeps: s, logs: logs,
		cfg: Config{
			OandaToken: "test-oanda-token", OandaAccountID: "101-004-1234567-001",
			AlpacaKeyID: "test-key-id", AlpacaSecret: "test-secret",
			BaseURLs:   urls,
			HTTPClient: up.Client(),
			Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Now:        func() time.Time { return testNow },
			Sleep:      s.sleep,
		},
	}
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

func candleEqual(a, b domain.Candle) bool {
	return a.Time.Equal(b.Time) && a.Open == b.Open && a.High == b.High && a.Low == b.Low && a.Close == b.Close && a.Volume == b.Volume
}

// tickerClose compares tickers allowing float rounding in derived fields.
func tickerClose(a, b domain.Ticker) bool {
	near := func(x, y float64) bool {
		return x == y || (x-y)/max(abs(x), abs(y)) < 1e-12 && (y-x)/max(abs(x), abs(y)) < 1e-12
	}
	return a.Symbol == b.Symbol && near(a.Price, b.Price) && near(a.ChangePct, b.ChangePct) && near(a.Volume, b.Volume) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func abs(x float64) float64 { return max(x, -x) }

// rejectsCorrupt runs fetch in a parallel subtest per bad upstream
// response and wants each to fail with the feed's error prefix.
func rejectsCorrupt(t *testing.T, feed string, cases map[string]string, fetch func(t *testing.T, bad string) error) {
	t.Helper()
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := fetch(t, bad)
			if err == nil || !strings.HasPrefix(err.Error(), "feeds: "+feed+": ") {
				t.Errorf("err %v", err)
			}
		})
	}
}

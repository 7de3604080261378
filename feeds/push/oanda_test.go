package push

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/obs"
)

// testdata/oanda_pricing_stream.jsonl is the v20 docs' example of GET
// /v3/accounts/{accountID}/pricing/stream (developer.oanda.com/
// rest-live-v20/pricing-ep/; kept as hootnot/oanda-api-v20's
// endpoints/responses/pricing.py), one object a line as the stream
// sends it: EUR_JPY, a heartbeat, EUR_USD, EUR_JPY.

func TestParseOandaLine(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/oanda_pricing_stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Price
	heartbeats := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, isPrice, err := parseOandaLine(sc.Bytes())
		switch {
		case err != nil:
			t.Fatalf("%s: %v", sc.Text(), err)
		case isPrice:
			got = append(got, p)
		default:
			heartbeats++
		}
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, s); return t }
	want := []Price{
		{Symbol: "EUR_JPY", Price: (114.295 + 114.312) / 2, Time: at("2016-10-27T08:38:43.094548890Z"), Tradeable: true},
		{Symbol: "EUR_USD", Price: (1.09177 + 1.09188) / 2, Time: at("2016-10-27T08:38:45.664613867Z"), Tradeable: true},
		{Symbol: "EUR_JPY", Price: (114.298 + 114.315) / 2, Time: at("2016-10-27T08:38:45.681572782Z"), Tradeable: true},
	}
	if diff := cmp.Diff(want, got); diff != "" || heartbeats != 1 {
		t.Errorf("prices (-want +got):\n%s\nheartbeats %d, want 1", diff, heartbeats)
	}

	// No liquidity on a side (pricing-df allows empty lists): the closeout
	// prices; tradeable read from the flag, else from the deprecated status.
	p, ok, err := parseOandaLine([]byte(`{"type":"PRICE","instrument":"USD_TRY","time":"2025-11-22T12:00:00Z","tradeable":false,"status":"tradeable","bids":[],"asks":[],"closeoutBid":"42.1","closeoutAsk":"42.3"}`))
	if err != nil || !ok || p.Price != 42.2 || p.Tradeable {
		t.Errorf("closeout price: %+v %v %v", p, ok, err)
	}
	for _, bad := range []string{
		`{"type":"PRICE","instrument":"EUR_USD","time":"2025-11-22T12:00:00Z","bids":[{"price":"NaN"}],"asks":[{"price":"1.1"}]}`,
		`{"type":"PRICE","instrument":"EUR_USD","time":"yesterday","bids":[{"price":"1.1"}],"asks":[{"price":"1.1"}]}`,
		`{"type":"PRICE","instrument":"EUR_USD","time":"2025-11-22T12:00:00Z","bids":[],"asks":[]}`,
		`{"type":"PRICE","instrument":"","time":"2025-11-22T12:00:00Z","bids":[{"price":"1.1"}],"asks":[{"price":"1.1"}]}`,
		`{"type":"HEARTBEAT","time":""}`,
		`{"type":"ORDER_FILL"}`,
		`{"type":"PRICE",`,
		`not json`,
	} {
		if _, _, err := parseOandaLine([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzParseOandaLine: any line is a price with a positive finite price,
// a heartbeat, or an error; never a panic.
func FuzzParseOandaLine(f *testing.F) {
	f.Add(`{"type":"HEARTBEAT","time":"2016-10-27T08:38:44.327443673Z"}`)
	f.Add(`{"type":"PRICE","instrument":"EUR_USD","time":"2025-11-22T12:00:00Z","bids":[{"price":"1.1"}],"asks":[{"price":"1.2"}]}`)
	f.Fuzz(func(t *testing.T, line string) {
		p, isPrice, err := parseOandaLine([]byte(line))
		if err == nil && isPrice && (p.Price <= 0 || p.Symbol == "" || p.Time.IsZero()) {
			t.Fatalf("%+v", p)
		}
	})
}

var (
	oandaMajor = domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "major"}
	oandaMinor = domain.Combination{Market: domain.Forex, Exchange: "oanda", Instrument: "minor"}
)

// fakePricing stands in for the feed: each Open returns a pipe the test
// writes lines into, and Tickers completes prices with a fixed change.
type fakePricing struct {
	mu      sync.Mutex
	conns   []*io.PipeWriter
	asked   [][]string
	failing atomic.Bool

	rowsMu sync.Mutex
	rows   map[domain.Combination]map[string]domain.Ticker
}

func (f *fakePricing) open(ctx context.Context, symbols []string) (io.ReadCloser, error) {
	r, w := io.Pipe()
	f.mu.Lock()
	f.conns = append(f.conns, w)
	f.asked = append(f.asked, symbols)
	f.mu.Unlock()
	return r, nil
}

func (f *fakePricing) opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// write sends lines on the newest connection.
func (f *fakePricing) write(lines ...string) error {
	f.mu.Lock()
	w := f.conns[len(f.conns)-1]
	f.mu.Unlock()
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

func (f *fakePricing) tickers(_ context.Context, _ domain.Combination, prices []Price) ([]domain.Ticker, error) {
	if f.failing.Load() {
		return nil, errors.New("no reference")
	}
	out := make([]domain.Ticker, len(prices))
	for i, p := range prices {
		out[i] = domain.Ticker{Symbol: p.Symbol, Price: p.Price, ChangePct: 1, Volume: 100, UpdatedAt: p.Time}
	}
	return out, nil
}

func (f *fakePricing) onTickers(c domain.Combination, rows []domain.Ticker) {
	f.rowsMu.Lock()
	defer f.rowsMu.Unlock()
	if f.rows == nil {
		f.rows = map[domain.Combination]map[string]domain.Ticker{}
	}
	if f.rows[c] == nil {
		f.rows[c] = map[string]domain.Ticker{}
	}
	for _, r := range rows {
		f.rows[c][r.Symbol] = r
	}
}

func (f *fakePricing) row(c domain.Combination, sym string) (domain.Ticker, bool) {
	f.rowsMu.Lock()
	defer f.rowsMu.Unlock()
	r, ok := f.rows[c][sym]
	return r, ok
}

// syncLog is a log sink safe for the source's goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// countingMetrics counts reconnects.
type countingMetrics struct {
	noMetrics
	reconnects atomic.Int64
	open       atomic.Int64
}

func (m *countingMetrics) Connections(_ string, d int) { m.open.Add(int64(d)) }
func (m *countingMetrics) Reconnect(string)            { m.reconnects.Add(1) }

func runOandaPricing(t *testing.T, cfg OandaPricingConfig) (*OandaPricing, *fakePricing, *syncLog) {
	t.Helper()
	f := &fakePricing{}
	logs := &syncLog{}
	cfg.Open, cfg.Tickers, cfg.OnTickers = f.open, f.tickers, f.onTickers
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.EmitEvery = 10 * time.Millisecond
	cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, 20*time.Millisecond
	p := NewOandaPricing(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = p.Run(ctx, []Plan{
			{Combination: oandaMajor, Tickers: true, Symbols: []string{"EUR_USD", "USD_JPY"}},
			{Combination: oandaMinor, Tickers: true, Symbols: []string{"EUR_JPY"}},
			{Combination: oandaMinor, Series: []Series{{"EUR_JPY", domain.TF1m}}}, // candles are not its business
		})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return p, f, logs
}

// TestOandaPricingDelivers: one connection for every plan's symbols; the
// docs' stream example becomes rows of the right combinations; a
// malformed line is logged once and skipped, the connection kept.
func TestOandaPricingDelivers(t *testing.T) {
	t.Parallel()
	p, f, logs := runOandaPricing(t, OandaPricingConfig{StaleAfter: time.Minute})
	pushtest.Eventually(t, "connected", func() bool { return f.opened() == 1 })
	if diff := cmp.Diff([]string{"EUR_USD", "USD_JPY", "EUR_JPY"}, f.asked[0]); diff != "" {
		t.Errorf("instruments asked (-want +got):\n%s", diff)
	}
	doc, err := os.ReadFile("testdata/oanda_pricing_stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.write(`{"type":"PRICE","instrument":`, `{"type":"SOMETHING_NEW"}`); err != nil {
		t.Fatal(err)
	}
	if err := f.write(strings.Split(strings.TrimSpace(string(doc)), "\n")...); err != nil {
		t.Fatal(err)
	}
	pushtest.Eventually(t, "rows of both combinations", func() bool {
		jpy, ok1 := f.row(oandaMinor, "EUR_JPY")
		_, ok2 := f.row(oandaMajor, "EUR_USD")
		return ok1 && ok2 && jpy.Price == (114.298+114.315)/2
	})
	if _, ok := f.row(oandaMajor, "EUR_JPY"); ok {
		t.Error("EUR_JPY delivered as a major")
	}
	if !p.Live(oandaMajor) || !p.Live(oandaMinor) || p.Live(domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}) {
		t.Error("Live: want the plans' combinations while connected")
	}
	if n := logs.count("undecodable line"); n != 1 || f.opened() != 1 {
		t.Errorf("%d undecodable-line warnings (want 1), %d connections (want 1)", n, f.opened())
	}
}

// TestOandaPricingReconnects: a connection silent past StaleAfter (no
// heartbeat) is closed and another opened after a back-off, counted as a
// reconnect; a dropped one likewise.
func TestOandaPricingReconnects(t *testing.T) {
	t.Parallel()
	m := &countingMetrics{}
	_, f, logs := runOandaPricing(t, OandaPricingConfig{StaleAfter: 50 * time.Millisecond, Metrics: m})
	pushtest.Eventually(t, "a silent connection replaced", func() bool { return f.opened() >= 2 })
	if logs.count("silent for 50ms") == 0 {
		t.Error("the drop does not say the connection was silent")
	}
	pushtest.Eventually(t, "a reconnect counted", func() bool { return m.reconnects.Load() >= 1 })
	f.mu.Lock()
	f.conns[len(f.conns)-1].CloseWithError(errors.New("reset by peer"))
	n := len(f.conns)
	f.mu.Unlock()
	pushtest.Eventually(t, "a dropped connection replaced", func() bool { return f.opened() > n })
}

// TestOandaPricingWeekend: while the market is closed OANDA sends
// heartbeats alone: the connection is kept, nothing is delivered and
// nothing is logged; prices resume on the same connection.
func TestOandaPricingWeekend(t *testing.T) {
	t.Parallel()
	_, f, logs := runOandaPricing(t, OandaPricingConfig{StaleAfter: 200 * time.Millisecond})
	pushtest.Eventually(t, "connected", func() bool { return f.opened() == 1 })
	// Heartbeats every 20 ms for longer than StaleAfter several times over.
	for i := range 40 {
		if err := f.write(`{"type":"HEARTBEAT","time":"2025-11-22T12:00:` + twoDigits(i) + `.000000000Z"}`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f.opened() != 1 || logs.count("level=") != 0 {
		t.Fatalf("%d connections (want 1), logs:\n%s", f.opened(), logs.buf.String())
	}
	f.rowsMu.Lock()
	delivered := len(f.rows)
	f.rowsMu.Unlock()
	if delivered != 0 {
		t.Errorf("rows delivered from heartbeats: %v", f.rows)
	}
	if err := f.write(`{"type":"PRICE","instrument":"EUR_USD","time":"2025-11-23T22:00:01Z","tradeable":true,"bids":[{"price":"1.1"}],"asks":[{"price":"1.2"}]}`); err != nil {
		t.Fatal(err)
	}
	pushtest.Eventually(t, "prices resume", func() bool { _, ok := f.row(oandaMajor, "EUR_USD"); return ok })
}

// TestOandaPricingRetriesCompletion: when the prices cannot be completed
// (no daily reference yet) they are kept and tried again, and the failure
// is logged once a minute, not on every push.
func TestOandaPricingRetriesCompletion(t *testing.T) {
	t.Parallel()
	_, f, logs := runOandaPricing(t, OandaPricingConfig{StaleAfter: time.Minute})
	pushtest.Eventually(t, "connected", func() bool { return f.opened() == 1 })
	f.failing.Store(true)
	if err := f.write(`{"type":"PRICE","instrument":"USD_JPY","time":"2025-11-21T14:00:00Z","tradeable":true,"bids":[{"price":"156.1"}],"asks":[{"price":"156.2"}]}`); err != nil {
		t.Fatal(err)
	}
	pushtest.Eventually(t, "the failure logged", func() bool { return logs.count("completing prices failed") == 1 })
	f.failing.Store(false)
	pushtest.Eventually(t, "the kept price delivered", func() bool { _, ok := f.row(oandaMajor, "USD_JPY"); return ok })
	if n := logs.count("completing prices failed"); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}

// TestOandaEndpointIsMetricsLabel: the pricing stream's label is exported
// from the start like the exchanges' websocket endpoints.
func TestOandaEndpointIsMetricsLabel(t *testing.T) {
	t.Parallel()
	found := false
	for _, ep := range obs.PushEndpoints {
		found = found || ep == oandaEndpoint
	}
	if !found {
		t.Errorf("%q is not in obs.PushEndpoints %v", oandaEndpoint, obs.PushEndpoints)
	}
}

func twoDigits(i int) string { return string([]byte{byte('0' + i/10%10), byte('0' + i%10)}) }

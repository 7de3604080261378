package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// TestRESTAndPushStoreAlike: a candle read over REST (an ingest task) and
// the same candle pushed (the push sink) take the one path of candles
// (candleWrite, recordCandleHealth): the same upsert (the one returning
// what changed, 1h being scored), the same announcement to the score
// trigger, the same api caches dropped and the same feed-health row marked
// healthy. So do screener rows (storeTickers).
func TestRESTAndPushStoreAlike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 15, 4, 30, 0, time.UTC)
	c := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	key := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: "BTC_USDT", Timeframe: domain.TF1h}

	rest := newWriteBench(t, now)
	if err := rest.in.HandleIngestCandles(ctx, NewIngestCandlesTask(c, key.Timeframe, now)); err != nil {
		t.Fatal(err)
	}
	if err := rest.in.HandleIngestTickers(ctx, NewIngestTickersTask(c, now)); err != nil {
		t.Fatal(err)
	}
	candle, ok := rest.store.lastClosed(key, now)
	if !ok {
		t.Fatalf("REST stored no closed candle of %v", key)
	}
	row := rest.store.tickers[c][0]

	pushed := newWriteBench(t, now)
	s := &PushIngest{In: pushed.in}
	candles, tickers := newCandleSink(s), newTickerSink(s)
	candles.release(c, []push.Series{{Symbol: key.Symbol, Timeframe: key.Timeframe}})
	candles.add(push.CandleUpdate{Combination: c, Symbol: key.Symbol, Timeframe: key.Timeframe, Candle: candle, Closed: true})
	candles.flush(ctx)
	tickers.add(c, []domain.Ticker{row})
	tickers.flush(ctx)

	want := writeOutcome{
		Upsert:    "changed",
		Final:     candle.Time.Format(time.RFC3339), // the newest closed candle: REST read it after its end, the push closed it
		Announced: true,
		Caches:    []string{fmt.Sprint(readcache.Candles(c.Market, c.Exchange)), fmt.Sprint(readcache.Tickers(c))},
		Health:    []string{"crypto/binance/candles candles:1h", "crypto/binance/spot tickers"},
	}
	for name, b := range map[string]*writeBench{"REST": rest, "push": pushed} {
		if diff := cmp.Diff(want, b.outcome(key)); diff != "" {
			t.Errorf("%s write of %v (-want +got):\n%s", name, key, diff)
		}
	}
}

// TestPushSinkReloadsCandlesDroppedFromItsRetries: while Postgres refuses
// the writes, the push sink keeps the newest closed candles of a series
// for a retry (2 here) and drops the older ones; once a write succeeds,
// the dropped ones are read again over REST and stored, so none is lost.
func TestPushSinkReloadsCandlesDroppedFromItsRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 15, 4, 30, 0, time.UTC)
	c := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	key := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: "BTC_USDT", Timeframe: domain.TF1m}
	b := newWriteBench(t, now)
	candles := newCandleSink(&PushIngest{In: b.in})
	candles.retryMax = 2
	candles.release(c, []push.Series{{Symbol: key.Symbol, Timeframe: key.Timeframe}})
	at := func(i int) time.Time { return now.Truncate(time.Minute).Add(time.Duration(i-6) * time.Minute) }
	push1 := func(i int) {
		candles.add(push.CandleUpdate{Combination: c, Symbol: key.Symbol, Timeframe: key.Timeframe, Closed: true,
			Candle: domain.Candle{Time: at(i), Open: 1, High: 2, Low: 1, Close: 2, Volume: 1}})
		candles.flush(ctx)
	}
	b.store.fail.Store(true)
	for i := range 5 {
		push1(i)
	}
	stored := func(t time.Time) bool {
		b.store.mu.Lock()
		defer b.store.mu.Unlock()
		for _, c := range b.store.candles[key] {
			if c.Time.Equal(t) {
				return true
			}
		}
		return false
	}
	if stored(at(0)) {
		t.Fatal("a candle was stored while every write failed")
	}
	b.store.fail.Store(false)
	push1(5)
	deadline := time.Now().Add(20 * time.Second)
	for i := range 3 { // the three dropped from the retries
		for !stored(at(i)) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !stored(at(i)) {
			t.Errorf("the closed candle of %s, dropped from the retries, was never stored", at(i).Format("15:04"))
		}
	}
	if !stored(at(5)) {
		t.Error("the closed candle pushed after the writes came back was not stored")
	}
}

// writeOutcome is what a write of one series did, as the test compares it.
type writeOutcome struct {
	Upsert    string   // "changed" or "plain"
	Final     string   // the open time of the newest candle written final (store.UpsertChangedCandles)
	Announced bool     // told to the score trigger as changed
	Caches    []string // api cache scopes dropped, sorted, once each
	Health    []string // feed-health successes recorded, sorted, once each
}

// writeBench is an Ingester on the synthetic feed over an in-memory store,
// with a score trigger that wants the 1h candles.
type writeBench struct {
	in    *Ingester
	store *memIngestStore

	mu        sync.Mutex
	announced map[store.CandleKey]bool
	caches    map[string]bool
}

func newWriteBench(t *testing.T, now time.Time) *writeBench {
	t.Helper()
	reg, err := feeds.New(feeds.Config{Names: []string{"synthetic"}, Now: func() time.Time { return now }, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	b := &writeBench{store: &memIngestStore{upserts: map[store.CandleKey]string{}, final: map[store.CandleKey]time.Time{},
		candles: map[store.CandleKey][]domain.Candle{},
		tickers: map[domain.Combination][]domain.Ticker{}, health: map[string]bool{}},
		announced: map[store.CandleKey]bool{}, caches: map[string]bool{}}
	b.in = &Ingester{Store: b.store, Feeds: reg, Now: func() time.Time { return now }, Changes: changeRecorder{b},
		Notify: func(_ context.Context, s readcache.Scope) { b.mu.Lock(); b.caches[fmt.Sprint(s)] = true; b.mu.Unlock() }}
	return b
}

func (b *writeBench) outcome(key store.CandleKey) writeOutcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	sorted := func(set map[string]bool) []string {
		var out []string
		for k := range set {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	final := ""
	if t, ok := b.store.final[key]; ok {
		final = t.Format(time.RFC3339)
	}
	return writeOutcome{Upsert: b.store.upserts[key], Final: final, Announced: b.announced[key], Caches: sorted(b.caches),
		Health: sorted(b.store.health)}
}

// changeRecorder is a score trigger that wants the 1h candles and records
// what it is told.
type changeRecorder struct{ b *writeBench }

func (r changeRecorder) WantsCandles(_ domain.Market, _ string, tf domain.Timeframe) bool {
	return tf == domain.TF1h
}

func (r changeRecorder) CandlesChanged(_ context.Context, changed []store.CandleKey) {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	for _, k := range changed {
		r.b.announced[k] = true
	}
}

func (changeRecorder) FundamentalsChanged(context.Context, domain.Market, []string) {}

// memIngestStore keeps what ingest writes in memory: the upsert each series
// went through, the candles, the screener rows and the feed successes.
type memIngestStore struct {
	IngestStore // the methods the test does not reach

	fail atomic.Bool // every candle write fails while set

	mu      sync.Mutex
	upserts map[store.CandleKey]string
	final   map[store.CandleKey]time.Time // the newest final open time written, by series
	candles map[store.CandleKey][]domain.Candle
	tickers map[domain.Combination][]domain.Ticker
	health  map[string]bool
}

func (s *memIngestStore) keep(series map[store.CandleKey][]domain.Candle, upsert string) {
	for k, cs := range series {
		s.upserts[k] = upsert
		s.candles[k] = append(s.candles[k], cs...)
	}
}

func (s *memIngestStore) UpsertCandleSeries(_ context.Context, series map[store.CandleKey][]domain.Candle) error {
	if s.fail.Load() {
		return errors.New("write refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(series, "plain")
	return nil
}

func (s *memIngestStore) UpsertChangedCandles(_ context.Context, series map[store.CandleKey][]domain.Candle, final map[store.CandleKey]time.Time) ([]store.CandleKey, error) {
	if s.fail.Load() {
		return nil, errors.New("write refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(series, "changed")
	for k, t := range final {
		if t.After(s.final[k]) {
			s.final[k] = t
		}
	}
	var keys []store.CandleKey
	for k := range series {
		keys = append(keys, k)
	}
	return keys, nil
}

func (s *memIngestStore) lastClosed(key store.CandleKey, now time.Time) (domain.Candle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last domain.Candle
	ok := false
	for _, c := range s.candles[key] {
		if !c.Time.Add(key.Timeframe.Duration()).After(now) && c.Time.After(last.Time) {
			last, ok = c, true
		}
	}
	return last, ok
}

func (s *memIngestStore) LatestCandleTimes(context.Context, domain.Market, string, domain.Timeframe, []string) (map[string]time.Time, error) {
	return map[string]time.Time{}, nil
}

func (s *memIngestStore) CandleCounts(context.Context, domain.Market, string, domain.Timeframe, []string, int) (map[string]int, error) {
	return map[string]int{}, nil
}

func (s *memIngestStore) ReplaceTickers(_ context.Context, c domain.Combination, rows []domain.Ticker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickers[c] = slices.Clone(rows)
	return nil
}

func (s *memIngestStore) Tickers(_ context.Context, c domain.Combination) ([]domain.Ticker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tickers[c]), nil
}

func (s *memIngestStore) SyncListings(context.Context, domain.Combination, []string, time.Time) (int, int, error) {
	return 0, 0, nil
}

func (s *memIngestStore) RecordFeedSuccess(_ context.Context, c domain.Combination, kind string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health[c.String()+" "+kind] = true
	return nil
}

func (s *memIngestStore) RecordFeedError(_ context.Context, c domain.Combination, kind string, _ time.Time, msg string) error {
	return fmt.Errorf("feed error recorded for %s %s: %s", c, kind, msg)
}

func (s *memIngestStore) FeedHealthOf(_ context.Context, c domain.Combination, kind string) (store.FeedHealth, error) {
	return store.FeedHealth{Combination: c, Kind: kind}, nil
}

// finalThrough: a candle read after it ended is final; a candle holding
// its market's session close has ended at the bell (a stock's 4h bar read
// at 16:00:05 New York, though its timeframe runs to 22:00 UTC); one
// still open is not.
func TestFinalThrough(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	bell := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC) // 16:00 New York
	sched := domain.Schedule{Market: domain.Stocks, First: day, Last: day,
		Sessions: []domain.Session{{Day: day, Open: time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC), Close: bell}}}
	cal, err := domain.NewSessionCalendar(sched)
	if err != nil {
		t.Fatal(err)
	}
	in := &Ingester{Hours: domain.Calendars{domain.Stocks: cal}}
	bars := []domain.Candle{{Time: bell.Add(-7 * time.Hour)}, {Time: bell.Add(-3 * time.Hour)}} // 14:00 and 18:00 UTC
	cases := []struct {
		m      domain.Market
		asked  time.Time
		want   time.Time
		wantOK bool
	}{
		{domain.Stocks, bell.Add(5 * time.Second), bars[1].Time, true},   // after the bell: the 18:00 bar has ended
		{domain.Stocks, bell.Add(-5 * time.Second), bars[0].Time, true},  // before it: only the 14:00 bar
		{domain.Crypto, bell.Add(5 * time.Second), bars[0].Time, true},   // no session: the 18:00 bar runs to 22:00
		{domain.Crypto, bars[0].Time.Add(time.Hour), time.Time{}, false}, // within the first bar: none
	}
	for _, c := range cases {
		got, ok := in.finalThrough(c.m, domain.TF4h, bars, c.asked)
		if ok != c.wantOK || !got.Equal(c.want) {
			t.Errorf("%s read at %s: final through %s (%v), want %s (%v)", c.m, c.asked.Format("15:04:05"), got.Format("15:04"), ok,
				c.want.Format("15:04"), c.wantOK)
		}
	}
}

package worker

import (
	"context"
	"errors"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// The one path of each kind of market-data write. Candles and screener
// rows reach the store the same way whether REST read them (the ingest
// tasks, the push feeds' catch-up and gap repairs) or an exchange pushed
// them (the push sinks): how they are written, who hears of it and what
// the feed's health says are decided here, not by the caller.

// candleWrite stores candles and announces what they changed. Its store
// writes the series scoring reads (ChangeSink.WantsCandles) with the
// upsert that returns the series it changed, the others with the plain
// upsert (most timeframes are display-only: their writes need not say
// what changed), and drops the api caches of the exchanges written right
// after each commit (readers wait for it). What changed is kept until
// announce tells the score trigger: REST announces once a task (one
// scoring per task and style, not one per batch), a push sink after every
// write.
type candleWrite struct {
	in      *Ingester
	changed []store.CandleKey
	// step, when set, is told of each upsert done (the push sink's timing
	// log): "stored" (display-only series) or "stored scored".
	step func(step string, series int)
}

func (in *Ingester) newCandleWrite() *candleWrite { return &candleWrite{in: in} }

// store upserts series, of any markets, exchanges and timeframes; final
// holds, by series, the open time of its newest candle the feed had closed
// (store.UpsertChangedCandles: a scored series' final state is marked).
// Both upserts are tried; a failure is this service's (ourSide), never the
// feed's.
func (w *candleWrite) store(ctx context.Context, series map[store.CandleKey][]domain.Candle, final map[store.CandleKey]time.Time) error {
	in := w.in
	wanted, other := map[store.CandleKey][]domain.Candle{}, map[store.CandleKey][]domain.Candle{}
	for key, cs := range series {
		if in.Changes != nil && in.Changes.WantsCandles(key.Market, key.Exchange, key.Timeframe) {
			wanted[key] = cs
		} else {
			other[key] = cs
		}
	}
	var errs []error
	if len(other) > 0 {
		err := in.Store.UpsertCandleSeries(ctx, other)
		if err == nil {
			in.dropCandleCaches(ctx, other)
		}
		errs = append(errs, err)
		w.stepDone("stored", len(other))
	}
	if len(wanted) > 0 {
		changed, err := in.Store.UpsertChangedCandles(ctx, wanted, final)
		w.changed = append(w.changed, changed...)
		if err == nil {
			in.dropCandleCaches(ctx, wanted)
		}
		errs = append(errs, err)
		w.stepDone("stored scored", len(wanted))
	}
	return ours(errors.Join(errs...))
}

func (w *candleWrite) stepDone(step string, series int) {
	if w.step != nil {
		w.step(step, series)
	}
}

// announce tells the score trigger which series changed since the last
// announce.
func (w *candleWrite) announce(ctx context.Context) {
	if len(w.changed) > 0 && w.in.Changes != nil {
		w.in.Changes.CandlesChanged(ctx, w.changed)
	}
	w.changed = nil
}

// dropCandleCaches drops the api caches of the exchanges written.
func (in *Ingester) dropCandleCaches(ctx context.Context, written map[store.CandleKey][]domain.Candle) {
	seen := map[readcache.Scope]bool{}
	for key := range written {
		sc := readcache.Candles(key.Market, key.Exchange)
		if !seen[sc] {
			seen[sc] = true
			in.notify(ctx, sc)
		}
	}
}

// recordCandleHealth records the outcome of loading the candles of a
// market's exchange and timeframe (store.CandleFeed) in its feed health:
// a failure of the feed as its error (one on this side is only logged:
// recordError), a success as its last success, which is the candles'
// updated_at in the api, so the exchange's cached candles are dropped.
func (in *Ingester) recordCandleHealth(ctx context.Context, m domain.Market, exchange string, tf domain.Timeframe, err error) {
	feed := store.CandleFeed(m, exchange, tf)
	if err != nil {
		in.recordError(feed.Combination, feed.Kind, err)
		return
	}
	_ = in.Store.RecordFeedSuccess(ctx, feed.Combination, feed.Kind, in.Now())
	in.notify(ctx, readcache.Candles(m, exchange))
}

// storeTickers replaces the screener rows of a combination, counts them,
// records the feed's success and drops the api caches of the rows. A
// failure is this service's (ourSide); the caller records or logs it.
func (in *Ingester) storeTickers(ctx context.Context, c domain.Combination, rows []domain.Ticker) error {
	if err := in.Store.ReplaceTickers(ctx, c, rows); err != nil {
		return ours(err)
	}
	observeRows(c, store.FeedKindTickers, len(rows))
	_ = in.Store.RecordFeedSuccess(ctx, c, store.FeedKindTickers, in.Now())
	in.notify(ctx, readcache.Tickers(c))
	return nil
}

// finalThrough is the open time of the newest of cs (sorted by time) that
// had ended when it was read at asked: its state is the final one. A
// candle ends at its timeframe's end, or at its market's session close
// within it (store's rule: a stock's 4h bar holding the 16:00 New York
// close has ended at the bell). ok is false when none had.
func (in *Ingester) finalThrough(m domain.Market, tf domain.Timeframe, cs []domain.Candle, asked time.Time) (open time.Time, ok bool) {
	sessionClose := domain.StateAt(in.Hours, m, asked).Session.Close
	for i := len(cs) - 1; i >= 0; i-- {
		start := cs[i].Time
		end := start.Add(tf.Duration())
		if sessionClose.After(start) && sessionClose.Before(end) {
			end = sessionClose
		}
		if !end.After(asked) {
			return start, true
		}
	}
	return time.Time{}, false
}

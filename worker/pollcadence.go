package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// The scheduled REST poll of a display-only timeframe (one scoring does
// not read, other than 1m) runs at every tick only when something is due:
// a candle that was forming at the last complete poll has closed since,
// or pollRefresh(tf) has passed since the deployment's last successful
// poll of it (the feed health's, shared by every worker). In between, the
// forming candle of a 1h or 1d series is at most pollRefresh old.
//
// Why: a whole stock market on a plan of 200 requests a minute. Every
// timeframe of every exchange polled every minute took ≈ 130 requests a
// minute (11,000 symbols: a dozen multi-symbol requests per exchange set
// and timeframe), left nothing for the scored timeframe's poll at the
// 16:00 close (its bars were stored two minutes late) and kept the 1m
// poll behind the same backlog. At this cadence the display-only
// timeframes take ≈ 25 requests a minute between closes.
//
// The 1m series and the timeframes scoring reads keep being polled at
// every tick, and so is any poll this process has not completed yet (a
// new process, a cold start whose display-only history waits for the
// scored one, a poll that failed): it learns where the candles close.

// pollRefresh is how often the forming candle of a display-only
// timeframe is read again between closes: a quarter of the timeframe,
// within a minute and a quarter of an hour (under the MarketdFeedStale
// thresholds of 30 minutes and 2 hours).
func pollRefresh(tf domain.Timeframe) time.Duration {
	return min(max(tf.Duration()/4, time.Minute), 15*time.Minute)
}

// pollState is what this process's last complete scheduled poll of a
// combination's timeframe saw.
type pollState struct {
	// nextClose is the earliest close of the candles that were forming
	// when they were asked for (zero: none was, e.g. an illiquid set).
	nextClose time.Time
}

// closeTracker finds a poll's nextClose from the series it read.
type closeTracker struct {
	tf   domain.Timeframe
	next time.Time
}

// saw notes a series' candles as asked for at asked.
func (t *closeTracker) saw(cs []domain.Candle, asked time.Time) {
	if len(cs) == 0 {
		return
	}
	end := cs[len(cs)-1].Time.Add(t.tf.Duration())
	if end.After(asked) && (t.next.IsZero() || end.Before(t.next)) {
		t.next = end
	}
}

// cadenced reports whether a scheduled poll of tf of c follows the
// cadence: a periodic task (not a closed market's catch-up, not a manual
// enqueue) of a display-only timeframe other than 1m whose series are
// all polled over REST.
func (in *Ingester) cadenced(ctx context.Context, t *asynq.Task, c domain.Combination, tf domain.Timeframe) bool {
	if t.Headers()[HeaderSeries] == "" || tf == domain.TF1m {
		return false
	}
	if in.Changes != nil && in.Changes.WantsCandles(c.Market, c.Exchange, tf) {
		return false
	}
	return !in.pushed(ctx, c, tf).Any()
}

// pollDue reports whether the cadenced poll of tf of c is due now, and
// why not when it is not (for the debug log).
func (in *Ingester) pollDue(ctx context.Context, c domain.Combination, tf domain.Timeframe) (bool, string) {
	v, ok := in.polls.Load(pollKey(c, tf))
	if !ok {
		return true, ""
	}
	st := v.(pollState)
	now := in.Now()
	if !st.nextClose.IsZero() && !now.Before(st.nextClose) {
		return true, ""
	}
	feed := store.CandleFeed(c.Market, c.Exchange, tf)
	h, err := in.Store.FeedHealthOf(ctx, feed.Combination, feed.Kind)
	if err != nil || h.LastSuccessAt == nil || now.Sub(*h.LastSuccessAt) >= pollRefresh(tf) {
		return true, ""
	}
	return false, "polled " + now.Sub(*h.LastSuccessAt).Round(time.Second).String() + " ago, next close " + st.nextClose.UTC().Format(time.RFC3339)
}

// liveRead reports whether a scheduled poll of tf of c reads candles that
// have just closed (hostbudget.Live): the 1m bars at every tick, another
// timeframe once a candle this process saw forming at its last complete
// poll has closed (a scored timeframe's closing read). A first poll, and a
// closed market's catch-up, are not.
func (in *Ingester) liveRead(t *asynq.Task, c domain.Combination, tf domain.Timeframe) bool {
	if t.Headers()[HeaderSeries] == "" {
		return false
	}
	if tf == domain.TF1m {
		return true
	}
	v, ok := in.polls.Load(pollKey(c, tf))
	if !ok {
		return false
	}
	next := v.(pollState).nextClose
	return !next.IsZero() && !in.Now().Before(next)
}

// pollKey names a combination's timeframe in the per-process poll maps.
func pollKey(c domain.Combination, tf domain.Timeframe) string { return c.String() + "/" + string(tf) }

package feeds

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// Refresh periods of the daily references.
const (
	// oandaReferenceEvery bounds a reference's age when no trading-day
	// close is known (over the weekend): the next close is otherwise when
	// it is fetched again.
	oandaReferenceEvery = time.Hour
	// oandaReferenceRetry spaces the attempts for a pair whose reference
	// could not be fetched, so an outage costs one request (and one log
	// line) a minute per pair, not one per ticker push.
	oandaReferenceRetry = time.Minute
)

// oandaReference is what a screener row of a pair needs besides its price:
// the close and the tick volume of its last complete trading day.
type oandaReference struct {
	close, volume float64
	day           time.Time // the trading day's open time
	validUntil    time.Time // the next trading-day close, or fetched + oandaReferenceEvery
	retryAt       time.Time // after a failed refresh
}

// oandaReferences caches each pair's daily reference. Forex has no 24-hour
// session like a crypto exchange's: a screener row's change is the change
// since the last trading-day close, and its volume the tick volume of that
// trading day, both read from the last two daily candles of OANDA's own
// trading day (dailyAlignment=17, alignmentTimezone=America/New_York, the
// v20 defaults of GET /v3/instruments/{instrument}/candles:
// https://developer.oanda.com/rest-live-v20/instrument-ep/), whose day
// ends at the 17:00 New York close, so a week has five trading days and no
// short Sunday one. The stored daily candles keep the UTC days the rest of
// the system reads; these two candles are not stored.
//
// A reference is fetched again when its trading day is over (the open
// candle's open time plus 24 hours) or after oandaReferenceEvery when no
// day is open (the weekend), so each pair costs one request a day and a
// few over a weekend, not one per ticker.
type oandaReferences struct {
	o *oanda

	fetchMu sync.Mutex // one refresh at a time
	mu      sync.Mutex
	bySym   map[string]oandaReference
}

func newOandaReferences(o *oanda) *oandaReferences {
	return &oandaReferences{o: o, bySym: map[string]oandaReference{}}
}

// get returns the references of syms: fresh ones from the cache, stale or
// missing ones fetched (oandaConcurrency at a time). A pair whose fetch
// fails keeps its stale reference; the failures are logged once per call
// and the pair is not asked again before oandaReferenceRetry. It fails
// only when syms has no reference at all.
func (r *oandaReferences) get(ctx context.Context, syms []string) (map[string]oandaReference, error) {
	out, due := r.cached(syms)
	if len(due) == 0 {
		return out, nil
	}
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	out, due = r.cached(syms) // a concurrent caller may have fetched them
	if len(due) == 0 {
		return out, nil
	}
	fetched := make([]oandaReference, len(due))
	errs := make([]error, len(due))
	sem := make(chan struct{}, oandaConcurrency)
	var wg sync.WaitGroup
	for i, sym := range due {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fetched[i], errs[i] = r.fetch(ctx, sym)
		})
	}
	wg.Wait()
	now := r.o.now()
	var failed []string
	var lastErr error
	r.mu.Lock()
	for i, sym := range due {
		if errs[i] != nil {
			failed, lastErr = append(failed, sym), errs[i]
			old := r.bySym[sym]
			old.retryAt = now.Add(oandaReferenceRetry)
			r.bySym[sym] = old
			if old.close > 0 {
				out[sym] = old
			}
			continue
		}
		r.bySym[sym] = fetched[i]
		out[sym] = fetched[i]
	}
	r.mu.Unlock()
	if len(failed) > 0 {
		r.o.log.Warn("feeds: oanda: daily references failed, stale ones kept", "pairs", len(failed), "first", failed[0],
			"retry_in", oandaReferenceRetry.String(), "err", lastErr)
	}
	if len(out) == 0 && len(syms) > 0 {
		return nil, fmt.Errorf("feeds: oanda: no daily reference for %d pairs: %w", len(syms), lastErr)
	}
	return out, nil
}

// cached splits syms into the references to use now and the pairs to
// fetch (missing or past their day, and not waiting for a retry).
func (r *oandaReferences) cached(syms []string) (map[string]oandaReference, []string) {
	now := r.o.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]oandaReference, len(syms))
	var due []string
	for _, s := range syms {
		ref, ok := r.bySym[s]
		if ok && ref.close > 0 {
			out[s] = ref
		}
		if (!ok || !now.Before(ref.validUntil)) && !now.Before(ref.retryAt) {
			due = append(due, s)
		}
	}
	return out, due
}

// fetch reads the last two trading-day candles of a pair.
func (r *oandaReferences) fetch(ctx context.Context, sym string) (oandaReference, error) {
	q := url.Values{"count": {"2"}, "dailyAlignment": {"17"}, "alignmentTimezone": {"America/New_York"}}
	cs, err := r.o.fetch(ctx, sym, "D", q)
	if err != nil {
		return oandaReference{}, err
	}
	return oandaReferenceOf(sym, cs, r.o.now())
}

// oandaReferenceOf picks the newest complete candle of cs (oldest first)
// as the reference; it is valid until the open candle after it closes, or
// for oandaReferenceEvery when there is none (the market is closed).
func oandaReferenceOf(sym string, cs []oandaCandle, now time.Time) (oandaReference, error) {
	ref := oandaReference{validUntil: now.Add(oandaReferenceEvery)}
	for i := len(cs) - 1; i >= 0; i-- {
		if !cs[i].complete {
			if end := cs[i].Time.Add(24 * time.Hour); end.After(now) && end.Before(ref.validUntil) {
				ref.validUntil = end
			}
			continue
		}
		ref.close, ref.volume, ref.day = cs[i].Close, cs[i].Volume, cs[i].Time
		return ref, nil
	}
	return oandaReference{}, fmt.Errorf("feeds: oanda: %s: no complete daily candle among %d: %w", sym, len(cs), errBadField)
}

// tickerOf completes a price into a screener row.
func (ref oandaReference) tickerOf(q Quote, now time.Time) (domain.Ticker, error) {
	at := q.Time
	if at.IsZero() || at.After(now) {
		at = now
	}
	t := domain.Ticker{Symbol: q.Symbol, Price: q.Price, ChangePct: (q.Price/ref.close - 1) * 100, Volume: ref.volume, UpdatedAt: at.UTC()}
	return t, t.Validate()
}

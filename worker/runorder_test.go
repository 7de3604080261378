package worker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// orderProbe is the store with the runs' decisions held until every run
// of the close has started deciding (so each knows of the others, as runs
// started together at a close do), and the candle reads recorded by
// timeframe in the order they were made.
type orderProbe struct {
	*store.DB
	deciding sync.WaitGroup
	mu       sync.Mutex
	reads    []domain.Timeframe
}

func (p *orderProbe) RescoreCandidates(ctx context.Context, q store.RescoreQuery) ([]store.RescoreCandidate, int, error) {
	out, n, err := p.DB.RescoreCandidates(ctx, q)
	p.deciding.Done()
	p.deciding.Wait()
	return out, n, err
}

func (p *orderProbe) CachedCandlesOf(ctx context.Context, cache *store.CandleCache, m domain.Market, exchange string, tf domain.Timeframe,
	symbols []string, limit int) (map[string]*domain.Bars, store.CandleReads, error) {
	p.mu.Lock()
	p.reads = append(p.reads, tf)
	p.mu.Unlock()
	return p.DB.CachedCandlesOf(ctx, cache, m, exchange, tf, symbols, limit)
}

// TestRunsOfACloseOrderedByTheirAlerts: at a close of two styles with
// alerts that read only one (the default style's fields), the other
// style's run waits for it: every candle read of the scalp run comes after
// the swing run's last. Both runs store every report.
func TestRunsOfACloseOrderedByTheirAlerts(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	src := domain.AnalyticsSources("global", domain.Crypto, nil)[0]
	styles := []analytics.Style{analytics.Swing, analytics.Scalp}
	syms := make([]string, 300) // several saves and a dozen reads a run
	for i := range syms {
		syms[i] = fmt.Sprintf("A%05d_USDT", i)
	}
	close0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	seedCloseUniverse(t, db, src, styles, syms, close0)
	c := &domain.Client{OrgName: "Order", Tier: domain.Enterprise, Markets: domain.Markets}
	if err := db.CreateClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i, expr := range []string{`verdict == "growth"`, `overall_score > 10`} { // the default style's
		if _, err := db.CreateAlert(ctx, domain.Alert{ClientID: c.ID, Name: fmt.Sprintf("swing%d", i), Market: domain.Crypto,
			Expression: expr}, c.Tier); err != nil {
			t.Fatal(err)
		}
	}
	probe := &orderProbe{DB: db}
	sc := &worker.Scorer{Store: probe, Region: "global", Logger: discard(), Alerts: &alerting.Matcher{},
		Candles: store.NewCandleCache(len(syms) * len(styles))}
	rescore := func(now time.Time) {
		sc.Now = func() time.Time { return now }
		probe.deciding.Add(len(styles))
		var wg sync.WaitGroup
		for _, st := range styles {
			wg.Go(func() {
				if _, _, err := sc.ScoreSymbols(ctx, domain.Crypto, st, syms); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	rescore(close0.Add(time.Minute)) // the first reports (and this process's copy of the alerts)
	next := close0.Add(24 * time.Hour)
	appendCloseCandles(t, db, src, styles, syms, next)
	probe.mu.Lock()
	probe.reads = nil
	probe.mu.Unlock()
	rescore(next.Add(time.Second))

	lastSwing := slices.Index(probe.reads, analytics.Swing.Timeframe())
	for i, tf := range probe.reads {
		if tf == analytics.Swing.Timeframe() {
			lastSwing = i
		}
	}
	firstScalp := slices.Index(probe.reads, analytics.Scalp.Timeframe())
	if lastSwing < 0 || firstScalp < 0 {
		t.Fatalf("reads %v: want both styles' candles read", probe.reads)
	}
	if firstScalp < lastSwing {
		t.Errorf("the scalp run read candles (read %d) before the swing run's last read (%d): reads %v", firstScalp, lastSwing, probe.reads)
	}
	for _, st := range styles {
		list, err := db.AnalyticsList(ctx, domain.Crypto, st)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if !r.CandleTime.Equal(next) {
				t.Fatalf("%s %s: report of the candle at %v, want the new one at %v", st, r.Symbol, r.CandleTime, next)
			}
		}
		if len(list) != len(syms) {
			t.Errorf("%s: %d reports, want %d", st, len(list), len(syms))
		}
	}
}

package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/e2e/exchangesim"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/feeds/push"
	"github.com/marketscreener/market/feeds/push/pushtest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// The tests of this file force one fault each while the push ingest
// follows the simulator's Binance streams, across a real minute close (the
// simulator's candles follow the wall clock), and then compare every
// stored closed 1m candle with the simulator's candle of the same open
// time, read over its REST klines: present, and with exactly its OHLCV.
// 15 spot symbols make 121 streams a connection, 21 of them subscribed by
// message (acknowledged), the rest in the URL.

// finalRig is the push ingest of the eu region against a simulator.
type finalRig struct {
	sim   *exchangesim.Sim
	db    *store.DB
	in    *worker.Ingester
	reg   *feeds.Registry
	combs []domain.Combination
	live  time.Time // when every combination was first marked live
}

func startFinalRig(t *testing.T, simCfg exchangesim.Config, pcfg push.Config) *finalRig {
	t.Helper()
	simCfg.Spot, simCfg.Perpetual = 15, 1
	sim := exchangesim.New(simCfg)
	t.Cleanup(sim.Close)
	db, in, reg := runPushIngestWith(t, sim, pcfg, 50*time.Millisecond, 500*time.Millisecond)
	r := &finalRig{sim: sim, db: db, in: in, reg: reg, combs: []domain.Combination{
		{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"},
		{Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"},
	}}
	ctx := context.Background()
	pushtest.Eventually(t, "every combination live", func() bool {
		for _, c := range r.combs {
			if !in.Pushed(ctx, c, domain.TF1m).All {
				return false
			}
		}
		return true
	})
	r.live = time.Now()
	return r
}

// nextClose is the next minute close at least lead away, and the open
// time of the candle closing then.
func nextClose(lead time.Duration) (closeAt, open time.Time) {
	closeAt = time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute)
	return closeAt, closeAt.Add(-time.Minute)
}

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// mismatches compares every closed 1m candle of every series opened from
// from through the candle closing at through with the simulator's: a
// missing or different stored candle is a mismatch.
func (r *finalRig) mismatches(t *testing.T, from, through time.Time) (checked int, bad []string) {
	t.Helper()
	ctx := context.Background()
	// A series is stored by market, exchange, symbol and timeframe: a
	// perpetual of a symbol also listed spot shares the spot one's rows
	// (both feeds write them), so only the others are compared.
	seen := map[string]bool{}
	for _, c := range r.combs {
		p, _ := r.reg.For(c)
		syms, err := p.Symbols(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, sym := range syms {
			if seen[sym] {
				continue
			}
			seen[sym] = true
			want, err := p.Candles(ctx, c, sym, domain.TF1m, from, 100)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := r.db.Candles(ctx, store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: domain.TF1m}, 200)
			if err != nil {
				t.Fatal(err)
			}
			byTime := map[time.Time]domain.Candle{}
			for _, s := range stored {
				byTime[s.Time.UTC()] = s
			}
			for _, w := range want {
				if w.Time.Before(from) || w.Time.Add(time.Minute).After(through) {
					continue
				}
				checked++
				got, ok := byTime[w.Time.UTC()]
				switch {
				case !ok:
					bad = append(bad, fmt.Sprintf("%s %s %s: missing", c.Instrument, sym, w.Time.Format("15:04")))
				case got != w && !(got.Time.Equal(w.Time) && got.Open == w.Open && got.High == w.High && got.Low == w.Low && got.Close == w.Close && got.Volume == w.Volume):
					bad = append(bad, fmt.Sprintf("%s %s %s: stored %+v, the exchange's %+v", c.Instrument, sym, w.Time.Format("15:04"), got, w))
				}
			}
		}
	}
	return checked, bad
}

// requireFinal waits up to within for every closed 1m candle from from
// through the close at through to be stored in its final form.
func (r *finalRig) requireFinal(t *testing.T, from, through time.Time, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		checked, bad := r.mismatches(t, from, through)
		if len(bad) == 0 {
			if checked == 0 {
				t.Fatal("no closed candle checked")
			}
			t.Logf("%d closed 1m candles from %s through the close at %s stored final", checked, from.Format("15:04"), through.Format("15:04:05"))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d closed 1m candles not stored final; first: %v", len(bad), checked, bad[:min(len(bad), 5)])
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPushIngestRepairsTheGapOfADrop: the simulator cuts every connection
// after 20 s, and every connection is also dropped just before a minute
// close, reconnecting only seconds after it (the close's push is lost):
// the repair reads each series from the last candle seen before the drop,
// though the new connection has stored newer ones by then.
func TestPushIngestRepairsTheGapOfADrop(t *testing.T) {
	t.Parallel()
	r := startFinalRig(t, exchangesim.Config{StreamMaxAge: 20 * time.Second, KlineEvery: 500 * time.Millisecond},
		push.Config{MinBackoff: 6 * time.Second, MaxBackoff: 8 * time.Second})
	closeAt, _ := nextClose(3 * time.Second)
	sleepUntil(closeAt.Add(-300 * time.Millisecond))
	r.sim.DropStreams()
	r.requireFinal(t, r.live.Truncate(time.Minute).Add(-2*time.Minute), closeAt, 40*time.Second)
}

// TestPushIngestRetriesRefusedCloses: Postgres refuses every 1m row of
// one close's open time for 15 s (a NOT VALID CHECK constraint, added
// just before the close and dropped after): the closed candles of that
// close are kept and written once Postgres takes them again.
func TestPushIngestRetriesRefusedCloses(t *testing.T) {
	t.Parallel()
	r := startFinalRig(t, exchangesim.Config{KlineEvery: 500 * time.Millisecond}, push.Config{})
	ctx := context.Background()
	closeAt, open := nextClose(3 * time.Second)
	sleepUntil(closeAt.Add(-time.Second))
	if _, err := r.db.Pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE candles ADD CONSTRAINT refuse_close
		CHECK (timeframe <> '1m' OR open_time <> '%s') NOT VALID`, open.UTC().Format(time.RFC3339))); err != nil {
		t.Fatal(err)
	}
	sleepUntil(closeAt.Add(15 * time.Second))
	if _, err := r.db.Pool.Exec(ctx, `ALTER TABLE candles DROP CONSTRAINT refuse_close`); err != nil {
		t.Fatal(err)
	}
	r.requireFinal(t, r.live.Truncate(time.Minute).Add(-2*time.Minute), closeAt, 45*time.Second)
}

// TestPushIngestKeepsTheOldConnectionForAnUnreadySuccessor: connections
// are replaced every 8 s, and from then on the simulator acknowledges no
// SUBSCRIBE until after a minute close: every successor is given up after
// ReadyTimeout, the old connections keep delivering every stream, and the
// candles of that close (of the streams subscribed by message too) are
// stored final.
func TestPushIngestKeepsTheOldConnectionForAnUnreadySuccessor(t *testing.T) {
	t.Parallel()
	r := startFinalRig(t, exchangesim.Config{KlineEvery: 500 * time.Millisecond},
		push.Config{MaxAge: 8 * time.Second, ReadyTimeout: 2 * time.Second, MaxBackoff: 3 * time.Second})
	release := r.sim.HoldSubscriptions()
	t.Cleanup(release)
	closeAt, _ := nextClose(10 * time.Second)
	sleepUntil(closeAt.Add(3 * time.Second))
	release()
	r.requireFinal(t, r.live.Truncate(time.Minute).Add(-2*time.Minute), closeAt, 30*time.Second)
}

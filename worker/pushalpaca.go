package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds/push"
)

// provisionalReplan is how soon the Alpaca symbols are picked again when
// they were picked without every exchange's screener volumes (no tickers
// stored yet, a cold start): the ticker refresh stores them within a
// minute, and the hour of ReplanEvery would follow arbitrary symbols.
const provisionalReplan = 2 * time.Minute

// limitAlpaca keeps the Alpaca plans within the plan's stream symbol limit
// (push.AlpacaConfig.SymbolLimit: the free plan's 30; none on SIP).
// One connection carries every stock exchange, so the limit is shared:
// the symbols kept are the highest screener volumes (dollar volume, which
// compares across exchanges) of all the exchanges together, ties in
// catalogue and symbol order. A combination left with fewer symbols than
// it has is Partial: it is never marked live, REST keeps polling every
// series, and the push feed only shortens the latency of the closed minute
// bars of the symbols it carries. It reports whether a combination had no
// screener rows to rank by.
func (s *PushIngest) limitAlpaca(ctx context.Context, plans []push.Plan) (bool, error) {
	type candidate struct {
		plan   int
		symbol string
		volume float64
	}
	var cands []candidate
	var alpaca []int
	for i, p := range plans {
		if sourceOf(s.In.Feeds, p.Combination) != alpacaPush {
			continue
		}
		alpaca = append(alpaca, i)
		for _, se := range p.Series {
			if se.Timeframe == domain.TF1m {
				cands = append(cands, candidate{plan: i, symbol: se.Symbol})
			}
		}
	}
	limit := s.Push.Alpaca.SymbolLimit()
	if limit <= 0 || len(cands) <= limit {
		return false, nil
	}
	provisional := false
	volume := map[int]map[string]float64{}
	for _, i := range alpaca {
		rows, err := s.In.Store.Tickers(ctx, plans[i].Combination)
		if err != nil {
			return false, fmt.Errorf("worker: ranking the Alpaca push feed's symbols: %w", err)
		}
		provisional = provisional || len(rows) == 0
		volume[i] = make(map[string]float64, len(rows))
		for _, r := range rows {
			volume[i][r.Symbol] = r.Volume
		}
	}
	for k := range cands {
		cands[k].volume = volume[cands[k].plan][cands[k].symbol]
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].volume > cands[b].volume })
	kept := map[int]map[string]bool{}
	for _, c := range cands[:limit] {
		if kept[c.plan] == nil {
			kept[c.plan] = map[string]bool{}
		}
		kept[c.plan][c.symbol] = true
	}
	for _, i := range alpaca {
		all := plans[i].Series
		plans[i].Series = nil
		for _, se := range all {
			if kept[i][se.Symbol] {
				plans[i].Series = append(plans[i].Series, se)
			}
		}
		plans[i].Partial = len(plans[i].Series) < len(all)
	}
	s.logger().Info("push: alpaca: the plan allows fewer symbols than the stock exchanges list; following the highest volumes, REST polls every series",
		"symbol_limit", limit, "symbols", len(cands), "ranked_without_volumes", provisional)
	return provisional, nil
}

// repairBatch loads the gaps of Alpaca's series after a reconnect, one
// REST pass per combination and timeframe reading many symbols a
// request: each series from where its gap began (the last bar the push
// feed delivered), not from its newest stored candle, which the new
// connection may have moved past the gap.
func (s *PushIngest) repairBatch(ctx context.Context, gaps []push.Gap) error {
	type group struct {
		c  domain.Combination
		tf domain.Timeframe
	}
	symbols := map[group][]string{}
	since := map[group]map[string]time.Time{}
	var order []group
	for _, g := range gaps {
		k := group{g.Combination, g.Timeframe}
		if symbols[k] == nil {
			order = append(order, k)
			since[k] = map[string]time.Time{}
		}
		symbols[k] = append(symbols[k], g.Symbol)
		since[k][g.Symbol] = g.Since
	}
	var errs []error
	for _, k := range order {
		if _, err := s.In.IngestCandlesFrom(ctx, k.c, k.tf, symbols[k], since[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

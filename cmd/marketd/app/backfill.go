package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/worker"
)

// cmdBackfill loads candle history of a market/exchange from the configured
// feeds: a progress bar on a terminal, plain progress lines otherwise.
// Progress is saved after every page; running the same command again after
// an interruption resumes.
func (m *Main) cmdBackfill(ctx context.Context, fs *flag.FlagSet, args []string) error {
	market := fs.String("market", "", "crypto, forex or stocks")
	exchange := fs.String("exchange", "", "exchange of the region's catalogue")
	symbolsFlag := fs.String("symbols", "", "comma-separated symbols (default: every symbol of the exchange)")
	tfFlag := fs.String("timeframe", "", "1m, 5m, 15m, 30m, 1h, 4h, 1d or 1w")
	days := fs.Int("days", 30, "days of history")
	asJSON := fs.Bool("json", false, "print a JSON summary")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("backfill takes flags only, got %q", pos)
	}
	mk, ok := domain.ParseMarket(*market)
	if !ok {
		return usagef("--market: must be crypto, forex or stocks")
	}
	tf, ok := domain.ParseTimeframe(*tfFlag)
	if !ok {
		return usagef("--timeframe: must be one of 1m, 5m, 15m, 30m, 1h, 4h, 1d, 1w")
	}
	if *days < 1 || *days > 3650 {
		return usagef("--days: must be between 1 and 3650")
	}
	db, cfg, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	served := cfg.served()
	var combos []domain.Combination
	for _, c := range domain.Catalogue(cfg.Region) {
		if c.Market == mk && c.Exchange == *exchange && c.HasCandles() && served.Has(c) {
			combos = append(combos, c)
		}
	}
	if len(combos) == 0 {
		return usagef("--exchange: no %s exchange %q with candles served in region %s by MARKET_FEEDS (available: %s)", mk, *exchange, cfg.Region, domain.DescribeAvailable(cfg.Region, mk, served))
	}
	// The backfill spends the same provider budgets as the running workers.
	opts, err := rediskeys.ClientOptions(cfg.RedisURL)
	if err != nil {
		return err
	}
	rdb := opts.NewClient()
	defer rdb.Close()
	reg, err := feeds.New(cfg.feedsConfig(rdb, m.logger(cfg)))
	if err != nil {
		return err
	}
	in := &worker.Ingester{Store: db, Feeds: reg, Logger: m.logger(cfg), Now: cfg.now(), Retention: cfg.CandleRetention}
	var symbols []string
	for _, s := range strings.Split(*symbolsFlag, ",") {
		if s = strings.TrimSpace(s); s != "" {
			norm, ok := domain.NormalizeSymbol(mk, s)
			if !ok {
				return usagef("--symbols: %q is not a %s symbol", s, mk)
			}
			symbols = append(symbols, norm)
		}
	}
	start := in.Now().AddDate(0, 0, -*days)
	if kept := in.RetainedStart(tf, start); kept.After(start) {
		// Candles older than the retention would be deleted within the
		// quarter hour: they are not loaded.
		fmt.Fprintf(m.Stderr, "%s candles are kept %s (MARKET_CANDLE_RETENTION): loading from %s, not %d days back\n",
			tf, formatRetention(cfg.CandleRetention[tf]), kept.Format(time.RFC3339), *days)
		start = kept
	}
	report := m.backfillReporter(tf, start)
	total := 0
	for _, c := range combos {
		syms := symbols
		if len(combos) > 1 && len(symbols) > 0 {
			// Forex majors and minors are separate combinations: give each its own symbols.
			syms = filterSymbols(ctx, reg, c, symbols)
			if len(syms) == 0 {
				continue
			}
		}
		n, err := in.Backfill(ctx, db, c, tf, syms, start, report)
		total += n
		if err != nil {
			report(worker.BackfillEvent{SkippedCause: err.Error()})
			return fmt.Errorf("stopped after %d candles (run the same command to resume): %w", total, err)
		}
	}
	report(worker.BackfillEvent{SymbolDone: true, Total: total, SkippedCause: "done"})
	if *asJSON {
		return m.printJSON(map[string]any{"market": mk, "exchange": *exchange, "timeframe": tf, "days": *days, "candles": total})
	}
	fmt.Fprintf(m.Stdout, "backfilled %d %s candles of %s/%s over %d days\n", total, tf, mk, *exchange, *days)
	return nil
}

func filterSymbols(ctx context.Context, reg *feeds.Registry, c domain.Combination, want []string) []string {
	p, ok := reg.For(c)
	if !ok {
		return nil
	}
	have, err := p.Symbols(ctx, c)
	if err != nil {
		return want
	}
	set := map[string]bool{}
	for _, s := range have {
		set[s] = true
	}
	var out []string
	for _, s := range want {
		if set[s] {
			out = append(out, s)
		}
	}
	return out
}

// backfillReporter draws a progress bar on a terminal and prints a plain
// line per symbol otherwise (logs, CI, pipes).
func (m *Main) backfillReporter(tf domain.Timeframe, start time.Time) func(worker.BackfillEvent) {
	f, isFile := m.Stderr.(*os.File)
	if isFile && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		return func(ev worker.BackfillEvent) {
			if ev.Symbols == 0 {
				if bar != nil {
					_ = bar.Finish()
				}
				return
			}
			if bar == nil || bar.GetMax() != ev.Symbols {
				bar = progressbar.NewOptions(ev.Symbols, progressbar.OptionSetWriter(f), progressbar.OptionShowCount(),
					progressbar.OptionSetDescription("backfill "+string(tf)), progressbar.OptionSetPredictTime(true))
			}
			bar.Describe(fmt.Sprintf("backfill %s %-12s %8d candles", tf, ev.Symbol, ev.Total))
			if ev.SymbolDone {
				_ = bar.Add(1)
			}
		}
	}
	w := io.Writer(m.Stderr)
	return func(ev worker.BackfillEvent) {
		switch {
		case ev.Symbols == 0 && ev.SkippedCause != "":
			fmt.Fprintf(w, "backfill: %s (%d candles)\n", ev.SkippedCause, ev.Total)
		case ev.SymbolDone:
			resumed := ""
			if ev.Resumed {
				resumed = " (resumed)"
			}
			fmt.Fprintf(w, "backfill: %d/%d %s: %d candles%s, %d in total\n", ev.SymbolIndex, ev.Symbols, ev.Symbol, ev.Candles, resumed, ev.Total)
		}
	}
}

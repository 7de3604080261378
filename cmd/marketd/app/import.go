package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/marketscreener/market/archiveimport"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// importFlags are the flags of marketd import.
type importFlags struct {
	source, market, instrument, timeframes, from, to, symbols *string
	concurrency, batchRows                                    *int
	recheck, asJSON                                           *bool
}

func addImportFlags(fs *flag.FlagSet) importFlags {
	return importFlags{
		source: fs.String("source", archiveimport.Source, "binance-archive (crypto; its URL: MARKET_FEED_URLS name binance-archive) "+
			"or alpaca (stocks: the provider's multi-symbol historical bars, within its request budget)"),
		market:      fs.String("market", "crypto", "crypto (binance-archive) or stocks (alpaca)"),
		instrument:  fs.String("instrument", "", "spot for crypto (candles are stored for spot), stock for stocks (default: the market's)"),
		timeframes:  fs.String("timeframes", "1d,4h,1h", "comma-separated timeframes: 1m, 5m, 15m, 30m, 1h, 4h, 1d, 1w"),
		from:        fs.String("from", "2017-08", "first month, YYYY-MM"),
		to:          fs.String("to", "", "last month, YYYY-MM (default: the current month, from its daily files)"),
		symbols:     fs.String("symbols", "", "comma-separated symbols (default: every symbol of the archive's listing, delisted ones included)"),
		concurrency: fs.Int("concurrency", 2, "series loaded at once: each holds one download and one database connection (1-16)"),
		batchRows:   fs.Int("batch-rows", 10_000, "candles per transaction (whole files; 100-100000)"),
		recheck:     fs.Bool("recheck", false, "download the files loaded before again and reload those the archive replaced"),
		asJSON:      fs.Bool("json", false, "print the report as JSON"),
	}
}

// importOptions checks the flags and turns them into the import's options
// (without the clock, retention and callbacks).
func (f importFlags) options(now time.Time) (archiveimport.Options, string, error) {
	var o archiveimport.Options
	var path string
	mk, _ := domain.ParseMarket(*f.market)
	switch *f.source {
	case archiveimport.Source:
		if mk != domain.Crypto {
			return o, "", usagef("--market: the %s archive holds crypto only", archiveimport.Source)
		}
		if *f.instrument != "" && *f.instrument != "spot" {
			return o, "", usagef("--instrument: must be spot (crypto candles are stored for spot; perpetual and futures serve the screener only)")
		}
		path, _ = feeds.ArchiveMarketPath("spot")
		o.Combination = domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	case feeds.NameAlpaca:
		if mk != domain.Stocks {
			return o, "", usagef("--market: alpaca's bars are stocks")
		}
		if *f.instrument != "" && *f.instrument != "stock" {
			return o, "", usagef("--instrument: must be stock with --source alpaca")
		}
		o.Combination = domain.Combination{Market: domain.Stocks, Instrument: "stock"}
	default:
		return o, "", usagef("--source: must be %s or %s", archiveimport.Source, feeds.NameAlpaca)
	}
	seen := map[domain.Timeframe]bool{}
	for _, s := range strings.Split(*f.timeframes, ",") {
		tf, ok := domain.ParseTimeframe(strings.TrimSpace(s))
		if !ok {
			return o, "", usagef("--timeframes: %q is not one of 1m, 5m, 15m, 30m, 1h, 4h, 1d, 1w", strings.TrimSpace(s))
		}
		if !seen[tf] {
			seen[tf] = true
			o.Timeframes = append(o.Timeframes, tf)
		}
	}
	var err error
	if o.From, err = time.Parse("2006-01", *f.from); err != nil {
		return o, "", usagef("--from: %q is not a month YYYY-MM", *f.from)
	}
	o.To = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if *f.to != "" {
		if o.To, err = time.Parse("2006-01", *f.to); err != nil {
			return o, "", usagef("--to: %q is not a month YYYY-MM", *f.to)
		}
	}
	if o.To.Before(o.From) {
		return o, "", usagef("--to: %s is before --from %s", *f.to, *f.from)
	}
	for _, s := range strings.Split(*f.symbols, ",") {
		if s = strings.TrimSpace(s); s != "" {
			norm, ok := domain.NormalizeSymbol(mk, s)
			if !ok {
				return o, "", usagef("--symbols: %q is not a %s symbol", s, mk)
			}
			o.Symbols = append(o.Symbols, norm)
		}
	}
	if *f.concurrency < 1 || *f.concurrency > 16 {
		return o, "", usagef("--concurrency: must be between 1 and 16")
	}
	if *f.batchRows < 100 || *f.batchRows > 100_000 {
		return o, "", usagef("--batch-rows: must be between 100 and 100000")
	}
	o.Concurrency, o.BatchRows, o.Recheck = *f.concurrency, *f.batchRows, *f.recheck
	return o, path, nil
}

// cmdImport loads candle history from a bulk archive: see
// archiveimport and the README's "Importing history".
func (m *Main) cmdImport(ctx context.Context, fs *flag.FlagSet, args []string) error {
	f := addImportFlags(fs)
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("import takes flags only, got %q", pos)
	}
	cfg, err := LoadConfig(m.Getenv)
	if err != nil {
		return err
	}
	now := cfg.now()
	o, path, err := f.options(now().UTC())
	if err != nil {
		return err
	}
	// Bounded: the import holds Concurrency connections at most (one
	// per loading series) and one for its bookkeeping.
	db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: int32(o.Concurrency + 1)})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Ping(ctx); err != nil {
		return fmt.Errorf("MARKET_DATABASE_URL: %v", err)
	}
	logger := m.logger(cfg)
	o.Now, o.Logger = now, logger
	o.Starts = map[domain.Timeframe]time.Time{}
	for _, tf := range o.Timeframes {
		if cut, ok := worker.RetentionCutoff(cfg.CandleRetention, tf, now()); ok && cut.After(o.From) {
			// Older candles would be deleted within the quarter hour.
			fmt.Fprintf(m.Stderr, "%s candles are kept %s (MARKET_CANDLE_RETENTION): importing them from %s\n",
				tf, formatRetention(cfg.CandleRetention[tf]), cut.Format(time.RFC3339))
			o.Starts[tf] = cut
		}
	}
	o.Progress = m.importReporter(logger)
	logger.Info("import started", "source", *f.source, "timeframes", *f.timeframes,
		"from", o.From.Format("2006-01"), "to", o.To.Format("2006-01"), "symbols", len(o.Symbols), "concurrency", o.Concurrency)
	var rep *archiveimport.Report
	var runErr error
	if *f.source == feeds.NameAlpaca {
		rep, runErr = m.importBars(ctx, cfg, db, o, logger)
	} else {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxConnsPerHost = o.Concurrency
		archive := feeds.NewBinanceArchive(feeds.Config{BaseURLs: cfg.FeedURLs}, &http.Client{Transport: transport, Timeout: 5 * time.Minute})
		rep, runErr = archiveimport.Run(ctx, archive, db, path, o)
	}
	if rep == nil {
		return runErr
	}
	logger.Info("import finished", "series", rep.Series, "series_done", rep.SeriesDone, "files", rep.Files, "skipped", rep.Skipped,
		"refused", len(rep.Refused), "candles", rep.Candles, "written", rep.Written, "gaps", len(rep.Gaps),
		"delisted", len(rep.Delisted), "elapsed", rep.Elapsed.Round(time.Millisecond).String())
	if runErr != nil {
		return fmt.Errorf("stopped after %d files (run the same command to resume): %w", rep.Files, runErr)
	}
	if rep.Series == 0 {
		return usagef("--symbols: none of %v is in the archive's listing", o.Symbols)
	}
	if *f.asJSON {
		if err := m.printJSON(importJSON(rep)); err != nil {
			return err
		}
	} else {
		printImportReport(m.Stdout, rep)
	}
	if len(rep.Refused) > 0 {
		return fmt.Errorf("%d file(s) refused (listed above); run the same command again to retry them", len(rep.Refused))
	}
	return nil
}

// importBars imports stocks from Alpaca's multi-symbol bars: every stock
// combination MARKET_FEEDS serves through alpaca, its requests booked in
// the shared request budget like the running workers'.
func (m *Main) importBars(ctx context.Context, cfg Config, db *store.DB, o archiveimport.Options, logger *slog.Logger) (*archiveimport.Report, error) {
	opts, err := rediskeys.ClientOptions(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rdb := opts.NewClient()
	defer rdb.Close()
	reg, err := feeds.New(cfg.feedsConfig(rdb, logger))
	if err != nil {
		return nil, err
	}
	served := cfg.served()
	var combos []domain.Combination
	var src archiveimport.BarsSource
	for _, c := range domain.Catalogue(cfg.Region) {
		p, ok := reg.For(c)
		if c.Market != domain.Stocks || !served.Has(c) || !ok || p.Name() != feeds.NameAlpaca {
			continue
		}
		bp, ok := p.(archiveimport.BarsSource)
		if !ok {
			continue
		}
		src = bp
		combos = append(combos, c)
	}
	if src == nil {
		return nil, usagef("--source: alpaca is not a feed of MARKET_FEEDS serving stocks in region %s", cfg.Region)
	}
	return archiveimport.RunBars(ctx, src, db, feeds.NameAlpaca, combos, o)
}

// importReporter draws a progress bar over the series on a terminal, and
// logs the progress (import progress) every 10 seconds otherwise.
func (m *Main) importReporter(logger *slog.Logger) func(archiveimport.Progress) {
	if f, ok := m.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		return func(p archiveimport.Progress) {
			if bar == nil {
				bar = progressbar.NewOptions(p.Series, progressbar.OptionSetWriter(f), progressbar.OptionShowCount(),
					progressbar.OptionSetDescription("import"), progressbar.OptionSetPredictTime(true))
			}
			bar.Describe(fmt.Sprintf("import %-22s %10d candles", p.Current.Symbol+" "+string(p.Current.Timeframe), p.Candles))
			if p.Finished {
				_ = bar.Add(1)
			}
		}
	}
	var last time.Time
	return func(p archiveimport.Progress) {
		if now := time.Now(); now.Sub(last) >= 10*time.Second || p.SeriesDone == p.Series && p.Finished {
			last = now
			elapsed := now.Sub(p.Started).Seconds()
			logger.Info("import progress", "series", p.Series, "series_done", p.SeriesDone, "files", p.Files, "skipped", p.Skipped,
				"refused", p.Refused, "candles", p.Candles, "written", p.Written,
				"candles_per_second", int64(float64(p.Candles)/max(elapsed, 1e-3)), "current", p.Current.String())
		}
	}
}

// printImportReport writes what an import did: totals, refused files,
// gaps per series, delisted symbols.
func printImportReport(w io.Writer, rep *archiveimport.Report) {
	rate := float64(rep.Candles) / max(rep.Elapsed.Seconds(), 1e-3)
	fmt.Fprintf(w, "imported %d series: %d files loaded, %d loaded before (skipped), %d candles read, %d rows written, in %s (%.0f candles/s)\n",
		rep.SeriesDone, rep.Files, rep.Skipped, rep.Candles, rep.Written, rep.Elapsed.Round(time.Second), rate)
	if len(rep.Refused) > 0 {
		fmt.Fprintf(w, "refused %d file(s):\n", len(rep.Refused))
		for _, r := range rep.Refused {
			fmt.Fprintf(w, "  %s  %s: %s\n", r.Series, r.Key, r.Reason)
		}
	}
	if len(rep.Gaps) > 0 {
		series, missing := map[store.CandleKey]bool{}, 0
		for _, g := range rep.Gaps {
			series[g.Series] = true
			missing += g.Missing
		}
		fmt.Fprintf(w, "gaps in %d series (%d gaps, %d candles missing):\n", len(series), len(rep.Gaps), missing)
		for _, g := range rep.Gaps {
			inferred := ""
			if g.Inferred {
				inferred = " (within a file loaded before: from its count)"
			}
			fmt.Fprintf(w, "  %s  %s .. %s  %d missing%s\n", g.Series, g.From.Format(time.RFC3339), g.To.Format(time.RFC3339), g.Missing, inferred)
		}
	}
	if len(rep.Delisted) > 0 {
		fmt.Fprintf(w, "delisted (recorded as not listed: out of the screener and the analytics list, candles kept): %s\n", strings.Join(rep.Delisted, ", "))
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintf(w, "not in the archive: %s\n", strings.Join(rep.Missing, ", "))
	}
	if len(rep.Unknown) > 0 {
		fmt.Fprintf(w, "skipped %d archive name(s) with no known quote asset\n", len(rep.Unknown))
	}
}

// importJSON is the report of --json: the gaps and refusals keyed by
// series.
func importJSON(rep *archiveimport.Report) map[string]any {
	gaps := map[string][]archiveimport.Gap{}
	for _, g := range rep.Gaps {
		gaps[g.Series.String()] = append(gaps[g.Series.String()], g)
	}
	refused := map[string][]archiveimport.Refusal{}
	for _, r := range rep.Refused {
		refused[r.Series.String()] = append(refused[r.Series.String()], r)
	}
	return map[string]any{
		"series": rep.Series, "series_done": rep.SeriesDone, "files": rep.Files, "skipped": rep.Skipped,
		"candles": rep.Candles, "written": rep.Written, "elapsed_seconds": rep.Elapsed.Seconds(),
		"refused": refused, "gaps": gaps, "delisted": nonNil(rep.Delisted), "missing": nonNil(rep.Missing), "unknown": nonNil(rep.Unknown),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

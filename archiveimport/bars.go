package archiveimport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
)

// BarsSource is a provider's historical bars read many symbols a request
// (Alpaca's multi-symbol bars), within the provider's request budget: its
// symbol list and feeds.BulkCandleProvider.
type BarsSource interface {
	Symbols(ctx context.Context, c domain.Combination) ([]string, error)
	feeds.BulkCandleProvider
}

// barsPerRequest is the symbols of one bulk read: enough that a request
// carries many symbols' bars, few enough that a batch's years of bars fit
// in memory and a batch stored is progress saved.
const barsPerRequest = 50

// RunBars imports the bars of the combinations' symbols (o.Symbols, or
// every symbol the provider lists) from o.From to the end of o.To,
// source naming the provider in the import records. Each symbol's
// series is stored with a record of the range, so a rerun skips the
// series already stored and an interrupted one resumes. Weekends,
// holidays and nights are no gaps: none are reported. A symbol whose
// bars fail validation is refused.
func RunBars(ctx context.Context, src BarsSource, st Store, source string, combos []domain.Combination, o Options) (*Report, error) {
	o = o.withDefaults()
	rep := &Report{Progress: Progress{Started: o.Now()}}
	r := &run{st: st, o: o, rep: rep}
	period := o.From.Format("2006-01") + ".." + o.To.Format("2006-01")
	end := o.To.AddDate(0, 1, 0)
	type todo struct {
		c    domain.Combination
		syms []string
	}
	var work []todo
	seen := map[string]bool{}
	for _, c := range combos {
		syms, err := src.Symbols(ctx, c)
		if err != nil {
			return rep, err
		}
		if len(o.Symbols) > 0 {
			syms = slices.DeleteFunc(slices.Clone(syms), func(s string) bool { return !slices.Contains(o.Symbols, s) })
		}
		for _, s := range syms {
			seen[s] = true
		}
		work = append(work, todo{c, syms})
		rep.Series += len(syms) * len(o.Timeframes)
	}
	for _, want := range o.Symbols {
		if !seen[want] {
			rep.Missing = append(rep.Missing, want)
		}
	}
	for _, w := range work {
		for _, tf := range o.Timeframes {
			from := o.From
			if s, ok := o.Starts[tf]; ok && s.After(from) {
				from = s
			}
			for chunk := range slices.Chunk(w.syms, barsPerRequest) {
				if err := r.loadBars(ctx, src, source, w.c, tf, chunk, from, end, period); err != nil {
					rep.Elapsed = o.Now().Sub(rep.Started)
					return rep, err
				}
			}
		}
	}
	rep.Elapsed = o.Now().Sub(rep.Started)
	return rep, nil
}

// loadBars reads one request's symbols (those not stored by an earlier
// run) and stores each series with its record.
func (r *run) loadBars(ctx context.Context, src BarsSource, source string, c domain.Combination, tf domain.Timeframe,
	syms []string, from, end time.Time, period string) error {
	starts := map[string]time.Time{}
	for _, sym := range syms {
		k := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}
		done, err := r.st.ImportedFiles(ctx, source, k)
		if err != nil {
			return err
		}
		if _, ok := done[period]; ok {
			r.rep.Skipped++
			r.rep.SeriesDone++
			continue
		}
		starts[sym] = from
	}
	if len(starts) == 0 {
		return nil
	}
	got, failed, err := src.BulkCandles(ctx, c, tf, starts, 0)
	if err != nil {
		return fmt.Errorf("bars of %s %s: %w", c, tf, err)
	}
	for _, sym := range slices.Sorted(maps.Keys(starts)) {
		k := store.CandleKey{Market: c.Market, Exchange: c.Exchange, Symbol: sym, Timeframe: tf}
		if ferr := failed[sym]; ferr != nil {
			r.refuse(k, "", ferr)
			continue
		}
		cs := got[sym]
		cs = slices.DeleteFunc(slices.Clone(cs), func(x domain.Candle) bool { return !x.Time.Before(end) })
		rec := store.ImportedFile{Period: period, SHA256: "-", Candles: len(cs)}
		if len(cs) > 0 {
			rec.FirstOpen, rec.LastOpen = cs[0].Time, cs[len(cs)-1].Time
		}
		written, err := r.st.ImportCandles(ctx, source, k, cs, []store.ImportedFile{rec})
		if err != nil {
			return err
		}
		r.rep.Files++
		r.rep.Candles += int64(len(cs))
		r.rep.Written += written
		r.rep.SeriesDone++
		p := r.rep.Progress
		p.Current, p.Finished = k, true
		r.o.Progress(p)
	}
	return nil
}

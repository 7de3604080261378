// Package archiveimport loads candle history from an exchange's bulk
// archive (Binance's public data archive, feeds.BinanceArchive) into the
// store: every series (symbol, timeframe) of a date range, file by file,
// each file's candles and its record committed together so an interrupted
// import resumes after the last committed file and a second run loads
// nothing twice. Files whose checksum fails are refused and reported, the
// rest goes on; gaps are reported per series; symbols whose files end
// before today are recorded as delisted. docs/import.md describes it.
package archiveimport

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
)

// Source names the archive in the store's import records.
const Source = "binance-archive"

// Store is what the import writes through (store.DB).
type Store interface {
	ImportedFiles(ctx context.Context, source string, k store.CandleKey) (map[string]store.ImportedFile, error)
	ImportCandles(ctx context.Context, source string, k store.CandleKey, candles []domain.Candle, files []store.ImportedFile) (int64, error)
	RecordDelisted(ctx context.Context, c domain.Combination, symbol string, listedAt, delistedAt time.Time) (bool, error)
}

// Archive is the bulk archive read (feeds.BinanceArchive).
type Archive interface {
	Symbols(ctx context.Context, marketPath string) ([]feeds.ArchiveSymbol, []string, error)
	Files(ctx context.Context, marketPath, exSymbol string, tf domain.Timeframe) ([]feeds.ArchiveFile, error)
	Fetch(ctx context.Context, f feeds.ArchiveFile) ([]domain.Candle, string, error)
}

// Options choose what an import loads and how.
type Options struct {
	// Combination is the candles' combination (crypto/binance/spot).
	Combination domain.Combination
	Timeframes  []domain.Timeframe
	// From and To are the first and last month loaded (their first day).
	From, To time.Time
	// Symbols limits the import to these canonical symbols; empty: every
	// symbol of the archive's listing, delisted ones included.
	Symbols []string
	// Starts clips each timeframe: candles before its start are not
	// loaded (what the candle retention would delete).
	Starts map[domain.Timeframe]time.Time
	// Concurrency is how many series load at once (each holds at most
	// one database connection and one download).
	Concurrency int
	// BatchRows is the candles of one transaction: whole files are added
	// to a batch until it holds at least this many.
	BatchRows int
	// Recheck downloads the files loaded before again and reloads those
	// whose SHA-256 changed (the archive replaced them).
	Recheck bool
	// DelistedAfter: a symbol whose files end this long before today is
	// recorded as delisted (default a week: daily files come out the
	// next day).
	DelistedAfter time.Duration
	Now           func() time.Time
	Logger        *slog.Logger
	// Progress is called after every stored batch and finished series,
	// from the loading goroutines one at a time.
	Progress func(Progress)
}

// Progress is the state of a running import.
type Progress struct {
	Series, SeriesDone int
	// Current is the series the event is about.
	Current  store.CandleKey
	Files    int   // files loaded this run
	Skipped  int   // files loaded by an earlier run
	Refused  int   // files refused
	Candles  int64 // candles read this run
	Written  int64 // rows inserted or changed
	Started  time.Time
	Finished bool // Current is done
}

// Refusal is a file that was not loaded, and why.
type Refusal struct {
	Series store.CandleKey `json:"-"`
	Key    string          `json:"key"`
	Reason string          `json:"reason"`
}

// Gap is a run of missing candles in a series: From and To are the first
// and last missing open time.
type Gap struct {
	Series   store.CandleKey `json:"-"`
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	Missing  int             `json:"missing"`
	Inferred bool            `json:"inferred,omitempty"` // inside a file loaded by an earlier run: from its counts
}

// Report is what an import did.
type Report struct {
	Progress
	Refused  []Refusal
	Gaps     []Gap
	Delisted []string
	// Unknown are archive names with no known quote asset (not loaded);
	// Missing are requested symbols the archive does not list.
	Unknown, Missing []string
	Elapsed          time.Duration
}

// series is one (symbol, timeframe) to load.
type series struct {
	sym feeds.ArchiveSymbol
	key store.CandleKey
}

// Run imports from a (marketPath: spot or futures/um) into st.
func Run(ctx context.Context, a Archive, st Store, marketPath string, o Options) (*Report, error) {
	o = o.withDefaults()
	rep := &Report{Progress: Progress{Started: o.Now()}}
	syms, unknown, err := a.Symbols(ctx, marketPath)
	if err != nil {
		return rep, err
	}
	rep.Unknown = unknown
	if len(o.Symbols) > 0 {
		byName := map[string]feeds.ArchiveSymbol{}
		for _, s := range syms {
			byName[s.Symbol] = s
		}
		syms = syms[:0:0]
		for _, want := range o.Symbols {
			if s, ok := byName[want]; ok {
				syms = append(syms, s)
			} else {
				rep.Missing = append(rep.Missing, want)
			}
		}
	}
	var todo []series
	for _, s := range syms {
		for _, tf := range o.Timeframes {
			todo = append(todo, series{sym: s, key: store.CandleKey{Market: o.Combination.Market, Exchange: o.Combination.Exchange, Symbol: s.Symbol, Timeframe: tf}})
		}
	}
	rep.Series = len(todo)
	r := &run{a: a, st: st, o: o, path: marketPath, rep: rep, ends: map[string]*symbolSpan{}}
	err = r.loadAll(ctx, todo)
	if err == nil {
		err = r.recordDelisted(ctx)
	}
	slices.SortFunc(rep.Gaps, func(x, y Gap) int {
		return cmp.Or(cmp.Compare(x.Series.String(), y.Series.String()), x.From.Compare(y.From))
	})
	rep.Elapsed = o.Now().Sub(rep.Started)
	return rep, err
}

func (o Options) withDefaults() Options {
	if o.Concurrency < 1 {
		o.Concurrency = 2
	}
	if o.BatchRows < 1 {
		o.BatchRows = 10_000
	}
	if o.DelistedAfter <= 0 {
		o.DelistedAfter = 7 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = func(Progress) {}
	}
	return o
}

// symbolSpan is the first and last day of a symbol's files, every
// timeframe's listing together, how many listings were read, and the
// close of the last candle of a last file (the delisting).
type symbolSpan struct {
	first, end, lastClose time.Time
	listed                int
}

type run struct {
	a    Archive
	st   Store
	o    Options
	path string

	mu   sync.Mutex // guards rep and ends
	rep  *Report
	ends map[string]*symbolSpan
}

// loadAll loads the series, Concurrency at a time. A cancelled context
// stops it after the batches being stored; other errors of a series are
// reported as refusals and the rest goes on.
func (r *run) loadAll(ctx context.Context, todo []series) error {
	work := make(chan series)
	var wg sync.WaitGroup
	for range r.o.Concurrency {
		wg.Go(func() {
			for s := range work {
				if err := r.loadSeries(ctx, s); err != nil && ctx.Err() == nil {
					r.refuse(s.key, "", err)
				}
				r.mu.Lock()
				r.rep.SeriesDone++
				p := r.rep.Progress
				p.Current, p.Finished = s.key, true
				r.o.Progress(p)
				r.mu.Unlock()
			}
		})
	}
	for _, s := range todo {
		select {
		case work <- s:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(work)
	wg.Wait()
	return ctx.Err()
}

func (r *run) refuse(k store.CandleKey, key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Refused = append(r.rep.Refused, Refusal{Series: k, Key: key, Reason: err.Error()})
	r.rep.Progress.Refused = len(r.rep.Refused)
	r.o.Logger.Warn("import: file refused", "series", k.String(), "key", key, "err", err)
}

// chosen picks the files of the range: a month's file where there is
// one, else its daily files (the current month), none ending before the
// timeframe's start.
func (r *run) chosen(files []feeds.ArchiveFile, tf domain.Timeframe) []feeds.ArchiveFile {
	monthly := map[time.Time]bool{}
	for _, f := range files {
		if !f.Daily {
			monthly[f.Start] = true
		}
	}
	end := r.o.To.AddDate(0, 1, 0)
	start := r.o.From
	if s, ok := r.o.Starts[tf]; ok && s.After(start) {
		start = s
	}
	var out []feeds.ArchiveFile
	for _, f := range files {
		month := time.Date(f.Start.Year(), f.Start.Month(), 1, 0, 0, 0, 0, time.UTC)
		if f.Start.Before(r.o.From) || !f.Start.Before(end) || !f.End.After(start) || (f.Daily && monthly[month]) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// loadSeries loads one series' files in order, BatchRows at a time.
func (r *run) loadSeries(ctx context.Context, s series) error {
	all, err := r.a.Files(ctx, r.path, s.sym.Exchange, s.key.Timeframe)
	if err != nil {
		return err
	}
	r.noteSpan(s.sym.Symbol, all)
	files := r.chosen(all, s.key.Timeframe)
	done, err := r.st.ImportedFiles(ctx, Source, s.key)
	if err != nil {
		return err
	}
	start := r.o.Starts[s.key.Timeframe]
	var (
		batch   []domain.Candle
		records []store.ImportedFile
		spans   []fileSpan
	)
	flush := func() error {
		if len(records) == 0 {
			return nil
		}
		written, err := r.st.ImportCandles(ctx, Source, s.key, batch, records)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.rep.Files += len(records)
		r.rep.Candles += int64(len(batch))
		r.rep.Written += written
		p := r.rep.Progress
		p.Current = s.key
		r.o.Progress(p)
		r.mu.Unlock()
		batch, records = batch[:0], records[:0]
		return nil
	}
	for _, f := range files {
		prev, loaded := done[f.Period]
		if loaded && !r.o.Recheck {
			spans = append(spans, fileSpan{file: f, rec: prev, earlier: true})
			r.mu.Lock()
			r.rep.Skipped++
			r.mu.Unlock()
			continue
		}
		cs, sum, err := r.a.Fetch(ctx, f)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			cs, err = clip(cs, f, start)
		}
		if err != nil {
			r.refuse(s.key, f.Key, err)
			continue
		}
		rec := store.ImportedFile{Period: f.Period, SHA256: sum, Candles: len(cs)}
		if len(cs) > 0 {
			rec.FirstOpen, rec.LastOpen = cs[0].Time, cs[len(cs)-1].Time
		}
		spans = append(spans, fileSpan{file: f, rec: rec, candles: cs})
		if loaded && prev.SHA256 == sum {
			r.mu.Lock()
			r.rep.Skipped++
			r.mu.Unlock()
			continue
		}
		batch, records = append(batch, cs...), append(records, rec)
		if len(batch) >= r.o.BatchRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.noteGaps(s.key, spans)
	return nil
}

// clip keeps a file's candles inside its period and from start, checks
// they are in order, and refuses a file holding another period's data.
func clip(cs []domain.Candle, f feeds.ArchiveFile, start time.Time) ([]domain.Candle, error) {
	out := cs[:0]
	for _, c := range cs {
		if c.Time.Before(f.Start) || !c.Time.Before(f.End) {
			return nil, fmt.Errorf("candle at %s outside the file's period %s", c.Time.Format(time.RFC3339), f.Period)
		}
		if !c.Time.Before(start) {
			out = append(out, c)
		}
	}
	if err := domain.ValidateCandles(out); err != nil {
		return nil, err
	}
	return out, nil
}

// noteSpan widens the symbol's span with a timeframe's listing.
func (r *run) noteSpan(symbol string, files []feeds.ArchiveFile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.ends[symbol]
	if sp == nil {
		sp = &symbolSpan{}
		r.ends[symbol] = sp
	}
	sp.listed++
	for _, f := range files {
		if sp.first.IsZero() || f.Start.Before(sp.first) {
			sp.first = f.Start
		}
		if f.End.After(sp.end) {
			sp.end = f.End
		}
	}
}

// recordDelisted records the symbols whose files, every timeframe's
// listing read, end DelistedAfter before today.
func (r *run) recordDelisted(ctx context.Context) error {
	cutoff := r.o.Now().Add(-r.o.DelistedAfter)
	names := make([]string, 0, len(r.ends))
	for name := range r.ends {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sp := r.ends[name]
		if sp.listed < len(r.o.Timeframes) || sp.end.IsZero() || !sp.end.Before(cutoff) {
			continue
		}
		at := sp.end // the last file was not read: the end of its period
		if !sp.lastClose.IsZero() {
			at = sp.lastClose
		}
		added, err := r.st.RecordDelisted(ctx, r.o.Combination, name, sp.first, at)
		if err != nil {
			return err
		}
		r.rep.Delisted = append(r.rep.Delisted, name)
		if added {
			r.o.Logger.Info("import: delisted symbol recorded", "symbol", name, "listed_at", sp.first, "delisted_at", at)
		}
	}
	return nil
}

// noteLastClose records the close of the last candle of the symbol's
// last file, when this series read or recorded it.
func (r *run) noteLastClose(symbol string, spans []fileSpan, d time.Duration) {
	if len(spans) == 0 {
		return
	}
	lastFile := spans[len(spans)-1]
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.ends[symbol]
	if sp == nil || !lastFile.file.End.Equal(sp.end) || lastFile.rec.Candles == 0 {
		return
	}
	if c := lastFile.rec.LastOpen.Add(d); c.After(sp.lastClose) {
		sp.lastClose = c
	}
}

// fileSpan is one file of a series in the range: the candles read now,
// or the record of an earlier run.
type fileSpan struct {
	file    feeds.ArchiveFile
	rec     store.ImportedFile
	candles []domain.Candle
	earlier bool
}

// noteGaps finds the missing candles of a series across its files: inside
// a file read now from its candles, inside a file of an earlier run from
// its count, and between consecutive files from their first and last
// candles. A refused file's period shows as a gap.
func (r *run) noteGaps(k store.CandleKey, spans []fileSpan) {
	d := k.Timeframe.Duration()
	r.noteLastClose(k.Symbol, spans, d)
	var gaps []Gap
	var last time.Time
	add := func(from, to time.Time, inferred bool) {
		if n := int(to.Sub(from)/d) + 1; n > 0 {
			gaps = append(gaps, Gap{Series: k, From: from, To: to, Missing: n, Inferred: inferred})
		}
	}
	for _, sp := range spans {
		if sp.rec.Candles == 0 {
			continue
		}
		if !last.IsZero() && sp.rec.FirstOpen.Sub(last) > d {
			add(last.Add(d), sp.rec.FirstOpen.Add(-d), false)
		}
		if sp.earlier {
			if missing := int(sp.rec.LastOpen.Sub(sp.rec.FirstOpen)/d) + 1 - sp.rec.Candles; missing > 0 {
				gaps = append(gaps, Gap{Series: k, From: sp.rec.FirstOpen, To: sp.rec.LastOpen, Missing: missing, Inferred: true})
			}
		} else {
			for i := 1; i < len(sp.candles); i++ {
				if sp.candles[i].Time.Sub(sp.candles[i-1].Time) > d {
					add(sp.candles[i-1].Time.Add(d), sp.candles[i].Time.Add(-d), false)
				}
			}
		}
		last = sp.rec.LastOpen
	}
	if len(gaps) == 0 {
		return
	}
	missing := 0
	for _, g := range gaps {
		missing += g.Missing
	}
	r.o.Logger.Info("import: gaps in series", "series", k.String(), "gaps", len(gaps), "missing", missing,
		"first_from", gaps[0].From, "first_to", gaps[0].To)
	r.mu.Lock()
	r.rep.Gaps = append(r.rep.Gaps, gaps...)
	r.mu.Unlock()
}

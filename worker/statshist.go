package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// statsEngine names how the stored statistics state is made; with the
// scoring method's fingerprint it is the state's method. Another value
// (a new scoring method, a change of the rules below) recomputes
// everything from the stored candles.
const statsEngine = "history-1"

func statsMethod() string { return analytics.CurrentVersion().Fingerprint + "/" + statsEngine }

// statsSettle is how long after its close a daily bar is judged: its
// final values are stored by then.
const statsSettle = time.Hour

// statsMaxHorizon is the longest forward horizon, in bars.
var statsMaxHorizon = max(slices.Max(stats.VerdictHorizons), slices.Max(stats.FactorHorizons))

// statsMargin is how many bars before the first one a run judges it reads:
// the scorer's window and the median move's.
var statsMargin = max(analytics.RecommendedCandles, statsMaxHorizon+stats.MedianWindow) + 1

// Day codes of store.StatsAsset's Backtest and Live: per calendar day,
// whether it had a bar and the verdict the bar carried.
const (
	codeNoBar        byte = 0
	codeNoVerdict    byte = 1
	codeFirstVerdict byte = 2 // + index in stats.Verdicts
)

func verdictCode(v analytics.Verdict) byte {
	if i := slices.Index(stats.Verdicts, string(v)); i >= 0 {
		return codeFirstVerdict + byte(i)
	}
	return codeNoVerdict
}

func codeVerdict(c byte) analytics.Verdict {
	if c < codeFirstVerdict || int(c-codeFirstVerdict) >= len(stats.Verdicts) {
		return ""
	}
	return analytics.Verdict(stats.Verdicts[c-codeFirstVerdict])
}

// dayCodes is a code per calendar day from first.
type dayCodes struct {
	first int
	codes []byte
}

func (d dayCodes) at(day int) byte {
	if i := day - d.first; i >= 0 && i < len(d.codes) {
		return d.codes[i]
	}
	return codeNoBar
}

func (d *dayCodes) set(day int, c byte) {
	if i := day - d.first; i >= 0 {
		for i >= len(d.codes) {
			d.codes = append(d.codes, codeNoBar)
		}
		d.codes[i] = c
	}
}

// truncate forgets the days from day on.
func (d *dayCodes) truncate(day int) {
	if i := day - d.first; i < len(d.codes) {
		d.codes = d.codes[:max(0, i)]
	}
}

// lastVerdictBefore is the verdict of the last bar before day that had
// one: the scorer's hysteresis resumes from it.
func (d dayCodes) lastVerdictBefore(day int) analytics.Verdict {
	for i := min(day-d.first, len(d.codes)) - 1; i >= 0; i-- {
		if v := codeVerdict(d.codes[i]); v != "" {
			return v
		}
	}
	return ""
}

// barsBefore returns the day of the bar n bars before day (day itself
// when it is before every bar): the first day a change of day's candle
// reaches through the forward returns.
func (d dayCodes) barsBefore(day, n int) int {
	out := min(day, d.first)
	seen := 0
	for i := min(day-d.first, len(d.codes)) - 1; i >= 0 && seen < n; i-- {
		if d.codes[i] != codeNoBar {
			seen++
			out = d.first + i
		}
	}
	return min(out, day)
}

// dayObs is the observations of one day of one source.
type dayObs struct {
	verdicts stats.VerdictAccumulator
	factors  stats.FactorAccumulator
}

// statsDays is one source's new observations of a run, by day.
type statsDays map[int]*dayObs

func (d statsDays) at(day int) *dayObs {
	o := d[day]
	if o == nil {
		o = new(dayObs)
		d[day] = o
	}
	return o
}

// merge adds o's observations, day by day.
func (d statsDays) merge(o statsDays) {
	for day, obs := range o {
		into := d.at(day)
		into.verdicts.Merge(&obs.verdicts)
		into.factors.Merge(&obs.factors)
	}
}

// noDay is a day after every other.
const noDay = math.MaxInt

// Compute brings a market's statistics up to date with its stored daily
// candles and returns how many assets they cover (0 when there is no daily
// history yet: nothing is stored then).
func (j *StatsJob) Compute(ctx context.Context, m domain.Market) (int, error) {
	srcs := domain.AnalyticsSources(j.Region, m, j.Served)
	if len(srcs) == 0 {
		return 0, nil
	}
	started := time.Now()
	keys, err := j.statsAssets(ctx, m, srcs)
	if err != nil {
		return 0, err
	}
	st, err := j.Store.StatsStateOf(ctx, m)
	if err != nil {
		return 0, err
	}
	method := statsMethod()
	reset := st.Method != method
	prior := st.Assets
	if reset {
		prior = map[string]store.StatsAsset{}
	}
	versions, err := j.seriesVersions(ctx, m, keys)
	if err != nil {
		return 0, err
	}
	drop := invalidatedFrom(keys, prior, versions)
	if st.PendingDrop != nil && !reset {
		drop = min(drop, *st.PendingDrop)
	}
	now := j.Now().UTC()
	since := time.Time{} // the published verdicts the run needs
	if first := firstJudged(keys, prior, drop); first != math.MinInt {
		since = time.Unix(int64(first)*86400, 0).Add(-liveMaxAge)
	}
	published, err := j.Store.SnapshotVerdictsSince(ctx, m, analytics.DefaultStyle, since)
	if err != nil {
		return 0, err
	}
	assets := maps.Clone(prior)
	read, changed := 0, 0
	gen := st.Generation
	// Saved statsChunk assets at a time: a first computation over years of
	// a large market is not lost when the task is cut short, the next run
	// goes on with the assets not saved.
	size := j.Chunk
	if size <= 0 {
		size = statsChunk
	}
	for start := 0; start < len(keys); start += size {
		chunk := keys[start:min(start+size, len(keys))]
		back, live, updates, err := j.judgeChunk(ctx, chunk, prior, drop, now, versions, published)
		if err != nil {
			return 0, err
		}
		firstChunk, lastChunk := start == 0, start+size >= len(keys)
		changes := len(updates) > 0 || len(back) > 0 || len(live) > 0 ||
			firstChunk && (reset || drop != noDay) || lastChunk && st.PendingDrop != nil
		if !changes {
			continue
		}
		update := store.StatsUpdate{Method: method, Generation: gen, Reset: reset && firstChunk, Assets: updates}
		dropNow := noDay
		if drop != noDay && !reset {
			if firstChunk {
				dropNow = drop
				update.DropFrom = &dropNow
			}
			if !lastChunk {
				update.PendingDrop = &drop
			}
		}
		for _, src := range []struct {
			name string
			days statsDays
		}{{stats.SourceBacktest, back}, {stats.SourceLive, live}} {
			days, err := j.mergeDays(ctx, m, src.name, src.days, reset && firstChunk, dropNow)
			if err != nil {
				return 0, err
			}
			update.Days = append(update.Days, days...)
		}
		if err := j.Store.SaveStatsState(ctx, m, update); err != nil {
			return 0, err
		}
		gen++
		for _, a := range updates {
			assets[a.Symbol] = a
		}
		read += len(updates)
		changed += len(back)
	}
	observed := 0
	for _, a := range assets {
		if a.Observed {
			observed++
		}
	}
	if observed == 0 {
		return 0, nil
	}
	judged := time.Since(started)
	for _, src := range stats.Sources {
		if err := j.saveRecords(ctx, m, src, observed, now); err != nil {
			return 0, err
		}
	}
	if j.Notify != nil {
		j.Notify(ctx, readcache.Analytics(m))
	}
	if j.Logger != nil {
		j.Logger.Info("statistics computed", "market", m, "assets", observed, "assets_changed", read,
			"days_changed", changed, "took", time.Since(started).Round(time.Millisecond).String(),
			"records_took", (time.Since(started) - judged).Round(time.Millisecond).String())
	}
	return observed, nil
}

// statsChunk is how many assets a run judges between two saves, unless
// StatsJob.Chunk says otherwise.
const statsChunk = 100

// judgeChunk judges assets, Workers at a time, and returns their new
// observations, added asset by asset in the keys' order whatever the
// workers' timing, and the states that changed.
func (j *StatsJob) judgeChunk(ctx context.Context, keys []store.CandleKey, prior map[string]store.StatsAsset, drop int,
	now time.Time, versions map[string]store.SeriesVersion, published map[string][]store.AnalyticsSnapshot,
) (back, live statsDays, updates []store.StatsAsset, err error) {
	type judged struct {
		back, live statsDays
		asset      store.StatsAsset
		ok         bool
		err        error
	}
	workers := max(1, j.Workers)
	back, live = statsDays{}, statsDays{}
	for start := 0; start < len(keys); start += workers {
		group := keys[start:min(start+workers, len(keys))]
		out := make([]judged, len(group))
		var wg sync.WaitGroup
		for i, key := range group {
			wg.Go(func() {
				v := versions[key.Symbol]
				o := judged{back: statsDays{}, live: statsDays{}}
				o.asset, o.ok, o.err = j.judgeAsset(ctx, assetRun{key: key, prior: prior[key.Symbol], drop: drop, now: now,
					version: v.Version, newest: v.Newest, snaps: published[key.Symbol]}, o.back, o.live)
				out[i] = o
			})
		}
		wg.Wait()
		for _, o := range out {
			if o.err != nil {
				return nil, nil, nil, o.err
			}
			back.merge(o.back)
			live.merge(o.live)
			if o.ok && !sameAsset(o.asset, prior[o.asset.Symbol]) {
				updates = append(updates, o.asset)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
	}
	return back, live, updates, nil
}

// sameAsset reports whether a run left an asset's state as it was.
func sameAsset(a, b store.StatsAsset) bool {
	return a.Symbol == b.Symbol && a.Exchange == b.Exchange && a.FirstDay == b.FirstDay && a.ThroughDay == b.ThroughDay &&
		a.SeriesVersion == b.SeriesVersion && a.Observed == b.Observed && bytes.Equal(a.Backtest, b.Backtest) && bytes.Equal(a.Live, b.Live)
}

// statsAssets returns the daily series the statistics read, each asset
// once, from the source that lists it first (the scorer's rule): every
// symbol with stored daily candles, listed or delisted, and the listed
// ones without candles yet. Sorted by symbol: the order observations are
// added in.
func (j *StatsJob) statsAssets(ctx context.Context, m domain.Market, srcs []domain.Combination) ([]store.CandleKey, error) {
	var keys []store.CandleKey
	seen := map[string]bool{}
	for _, src := range srcs {
		// The screener's symbols (listed, maybe without candles yet); not
		// sourceSymbols, whose fallback would list the stored ones twice.
		tickers, err := j.Store.Tickers(ctx, src)
		if err != nil {
			return nil, err
		}
		listed := make([]string, len(tickers))
		for i, t := range tickers {
			listed[i] = t.Symbol
		}
		stored, err := j.Store.CandleSymbols(ctx, m, src.Exchange, domain.TF1d)
		if err != nil {
			return nil, err
		}
		for _, sym := range append(stored, listed...) {
			if !seen[sym] {
				seen[sym] = true
				keys = append(keys, store.CandleKey{Market: m, Exchange: src.Exchange, Symbol: sym, Timeframe: domain.TF1d})
			}
		}
	}
	slices.SortFunc(keys, func(a, b store.CandleKey) int { return cmpString(a.Symbol, b.Symbol) })
	return keys, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (j *StatsJob) seriesVersions(ctx context.Context, m domain.Market, keys []store.CandleKey) (map[string]store.SeriesVersion, error) {
	byExchange := map[string][]string{}
	for _, k := range keys {
		byExchange[k.Exchange] = append(byExchange[k.Exchange], k.Symbol)
	}
	out := map[string]store.SeriesVersion{}
	for _, ex := range slices.Sorted(maps.Keys(byExchange)) {
		vs, err := j.Store.CandleSeriesVersions(ctx, m, ex, domain.TF1d, byExchange[ex])
		if err != nil {
			return nil, err
		}
		maps.Copy(out, vs)
	}
	return out, nil
}

// invalidatedFrom returns the first day whose observations a change of an
// already read candle invalidates (noDay: none): statsMaxHorizon bars
// before the oldest changed candle of any asset, whose forward returns
// reach it. The days from there on are judged again for every asset, so
// each day's observations are made in one pass, as in a full computation.
func invalidatedFrom(keys []store.CandleKey, prior map[string]store.StatsAsset, versions map[string]store.SeriesVersion) int {
	drop := noDay
	for _, k := range keys {
		a, ok := prior[k.Symbol]
		if !ok {
			continue
		}
		from, all, changed := versions[k.Symbol].ChangedSince(a.SeriesVersion)
		if !changed {
			continue
		}
		day := a.FirstDay
		if !all {
			day = stats.DayNumber(from)
		}
		if day > a.ThroughDay {
			continue // only candles not read yet
		}
		drop = min(drop, dayCodes{first: a.FirstDay, codes: a.Backtest}.barsBefore(day, statsMaxHorizon))
	}
	return drop
}

// firstJudged is the first day whose bars a run judges (math.MinInt when
// an asset is read from its start).
func firstJudged(keys []store.CandleKey, prior map[string]store.StatsAsset, drop int) int {
	first := drop
	for _, k := range keys {
		a, ok := prior[k.Symbol]
		if !ok {
			return math.MinInt
		}
		first = min(first, a.ThroughDay+1)
	}
	return first
}

// assetRun is one asset's part of a run.
type assetRun struct {
	key     store.CandleKey
	prior   store.StatsAsset // zero when never read
	drop    int              // bars from this day on are judged again
	now     time.Time
	version int64
	newest  time.Time                 // the series' newest open time
	snaps   []store.AnalyticsSnapshot // from before the first bar judged
}

// judgeAsset reads an asset's daily candles the run needs and adds the
// observations that became known since the last run to back and live. ok
// is false when the asset has too little history to be scored.
func (j *StatsJob) judgeAsset(ctx context.Context, r assetRun, back, live statsDays) (store.StatsAsset, bool, error) {
	has := r.prior.Symbol != "" && r.prior.Observed
	limit := math.MaxInt32
	if has {
		newest := stats.DayNumber(r.newest)
		if r.drop > r.prior.ThroughDay && newest <= r.prior.ThroughDay {
			return r.prior, true, nil // no candle since the last run (a delisted asset)
		}
		// Calendar days bound the bars.
		from := min(r.drop, r.prior.ThroughDay+1)
		limit = max(0, newest-from+1) + statsMaxHorizon + statsMargin
	}
	for {
		cs, err := j.Store.Candles(ctx, r.key, limit)
		if err != nil {
			return store.StatsAsset{}, false, err
		}
		truncated := len(cs) == limit
		cs = closedDaily(cs, r.now)
		if len(cs) < analytics.MinCandles+1 {
			return store.StatsAsset{}, false, nil
		}
		a, complete, err := judgeSeries(seriesRun{assetRun: r, has: has, cs: cs, truncated: truncated}, back, live)
		if err != nil || complete {
			return a, true, err
		}
		limit = math.MaxInt32 // the read missed context: read everything
	}
}

// closedDaily drops the daily candles not closed statsSettle before now.
func closedDaily(cs []domain.Candle, now time.Time) []domain.Candle {
	for len(cs) > 0 && cs[len(cs)-1].Time.Add(domain.TF1d.Duration()+statsSettle).After(now) {
		cs = cs[:len(cs)-1]
	}
	return cs
}

// seriesRun is an asset's candles as read for a run.
type seriesRun struct {
	assetRun
	has       bool
	cs        []domain.Candle // closed, oldest first
	truncated bool            // the series may have older candles
}

// judgeSeries adds the asset's new observations: every (bar, horizon)
// whose forward return ends on a day not read before, and every one of a
// bar from the run's drop day on. complete is false when cs starts too
// late to give the first such bar its context (read the whole series).
func judgeSeries(s seriesRun, back, live statsDays) (a store.StatsAsset, complete bool, err error) {
	cs := s.cs
	days := make([]int, len(cs))
	for i, c := range cs {
		days[i] = stats.DayNumber(c.Time)
	}
	through, drop := math.MinInt, math.MinInt
	bt, lv := dayCodes{first: days[0]}, dayCodes{first: days[0]}
	if s.has {
		through, drop = s.prior.ThroughDay, s.drop
		bt = dayCodes{first: s.prior.FirstDay, codes: slices.Clone(s.prior.Backtest)}
		lv = dayCodes{first: s.prior.FirstDay, codes: slices.Clone(s.prior.Live)}
		if days[0] < bt.first && !s.truncated {
			// Older candles appeared without a deep change: start over.
			s.has = false
			return judgeSeries(s, back, live)
		}
	}
	judgeFrom := min(drop, through+1)
	if through == math.MinInt {
		judgeFrom = math.MinInt
	}
	// added reports whether the observation of bar i at horizon h is new.
	added := func(i, h int) bool {
		return i+h < len(cs) && (days[i] >= drop || days[i+h] > through)
	}
	i0 := len(cs) // the first bar judged
	first := len(cs)
	for i := range cs {
		if days[i] >= judgeFrom {
			i0 = min(i0, i)
		}
		if slices.ContainsFunc(stats.VerdictHorizons, func(h int) bool { return added(i, h) }) {
			first = min(first, i)
		}
	}
	first = min(first, i0)
	if s.truncated && first < statsMargin {
		return store.StatsAsset{}, false, nil
	}
	bt.truncate(judgeFrom)
	lv.truncate(judgeFrom)
	closes := closesOf(cs)
	meds := map[int][]float64{}
	for _, h := range stats.VerdictHorizons {
		meds[h] = stats.TrailingMedianMoves(closes, h, first)
	}
	prev := bt.lastVerdictBefore(judgeFrom)
	k := -1 // the last snapshot at or before the bar's close
	for i := first; i < len(cs); i++ {
		needFactors := slices.ContainsFunc(stats.FactorHorizons, func(h int) bool { return added(i, h) })
		var res *analytics.Result
		switch {
		case i >= i0:
			if i+1 >= analytics.MinCandles {
				if r, err := scoreBar(s.key, cs, i, prev); err == nil {
					res, prev = &r, r.Verdict
				}
			}
			code := codeNoVerdict
			if res != nil {
				code = verdictCode(res.Verdict)
			}
			bt.set(days[i], code)
			lv.set(days[i], verdictCode(publishedAt(s.snaps, &k, cs[i])))
		case needFactors && i+1 >= analytics.MinCandles && codeVerdict(bt.at(days[i])) != "":
			// Scored before: score again, from the verdict it resumed.
			if r, err := scoreBar(s.key, cs, i, bt.lastVerdictBefore(days[i])); err == nil {
				res = &r
			}
		}
		for _, h := range stats.VerdictHorizons {
			if !added(i, h) || math.IsNaN(meds[h][i]) {
				continue
			}
			ret, ok := stats.ForwardReturn(closes, i, h)
			if !ok {
				continue
			}
			if err := addVerdict(&back.at(days[i]).verdicts, days[i], codeVerdict(bt.at(days[i])), h, ret, meds[h][i]); err != nil {
				return store.StatsAsset{}, false, err
			}
			if err := addVerdict(&live.at(days[i]).verdicts, days[i], codeVerdict(lv.at(days[i])), h, ret, meds[h][i]); err != nil {
				return store.StatsAsset{}, false, err
			}
		}
		if res == nil || !needFactors {
			continue
		}
		fa := &back.at(days[i]).factors
		for _, h := range stats.FactorHorizons {
			ret, ok := stats.ForwardReturn(closes, i, h)
			if !added(i, h) || !ok {
				continue
			}
			if err := fa.AddMove(days[i], h, ret); err != nil {
				return store.StatsAsset{}, false, err
			}
			for _, f := range res.Factors {
				if err := fa.Add(days[i], f.Name, h, stats.SentimentSign(string(f.Sentiment)), f.Contribution, ret); err != nil {
					return store.StatsAsset{}, false, err
				}
			}
		}
	}
	return store.StatsAsset{Symbol: s.key.Symbol, Exchange: s.key.Exchange, FirstDay: bt.first, ThroughDay: days[len(days)-1],
		SeriesVersion: s.version, Observed: true, Backtest: bt.codes, Live: lv.codes}, true, nil
}

// scoreBar scores bar i of cs from the candles up to it.
func scoreBar(key store.CandleKey, cs []domain.Candle, i int, prev analytics.Verdict) (analytics.Result, error) {
	return analytics.Score(analytics.Input{Market: key.Market, Symbol: key.Symbol,
		Candles: cs[max(0, i+1-analytics.RecommendedCandles) : i+1], PrevVerdict: prev})
}

// liveMaxAge is how old the last published verdict may be at a day's close
// to count as that day's verdict (the service may have been down).
const liveMaxAge = 48 * time.Hour

// publishedAt returns the verdict published for a daily bar: the last
// snapshot at or before its close, if recent. k is the index of the last
// snapshot at or before the previous bar's close; bars come in order.
func publishedAt(snaps []store.AnalyticsSnapshot, k *int, c domain.Candle) analytics.Verdict {
	closeAt := c.Time.Add(domain.TF1d.Duration())
	for *k+1 < len(snaps) && !snaps[*k+1].At.After(closeAt) {
		*k++
	}
	if *k >= 0 && closeAt.Sub(snaps[*k].At) <= liveMaxAge {
		return snaps[*k].Verdict
	}
	return ""
}

// addVerdict feeds one bar of day, with the verdict it carried ("" for
// none: the base rate only), at horizon h.
func addVerdict(va *stats.VerdictAccumulator, day int, verdict analytics.Verdict, h int, ret, medianMove float64) error {
	if verdict != "" {
		return va.Add(day, string(verdict), h, ret, medianMove)
	}
	return va.AddBase(day, h, ret, medianMove)
}

func closesOf(cs []domain.Candle) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = c.Close
	}
	return out
}

// mergeDays returns the stored observations of the days of one source
// with the run's new ones added, encoded. Days from drop on were dropped:
// their new observations are all of them.
func (j *StatsJob) mergeDays(ctx context.Context, m domain.Market, source string, fresh statsDays, reset bool, drop int) ([]store.StatsDay, error) {
	order := slices.Sorted(maps.Keys(fresh))
	var kept []int
	for _, d := range order {
		if !reset && d < drop {
			kept = append(kept, d)
		}
	}
	stored := map[int]store.StatsDay{}
	if len(kept) > 0 {
		rows, err := j.Store.StatsDaysOf(ctx, m, source, kept)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			stored[r.Day] = r
		}
	}
	out := make([]store.StatsDay, 0, len(order))
	for _, d := range order {
		obs := new(dayObs)
		if r, ok := stored[d]; ok {
			if err := decodeDay(r, obs); err != nil {
				return nil, err
			}
		}
		obs.verdicts.Merge(&fresh[d].verdicts)
		obs.factors.Merge(&fresh[d].factors)
		day, err := encodeDay(source, d, obs)
		if err != nil {
			return nil, err
		}
		out = append(out, day)
	}
	return out, nil
}

// encodeDay encodes obs as the stored observations of source's day.
func encodeDay(source string, day int, obs *dayObs) (store.StatsDay, error) {
	v, err := json.Marshal(&obs.verdicts)
	if err != nil {
		return store.StatsDay{}, fmt.Errorf("worker: statistics day %d: %w", day, err)
	}
	f, err := json.Marshal(&obs.factors)
	if err != nil {
		return store.StatsDay{}, fmt.Errorf("worker: statistics day %d: %w", day, err)
	}
	return store.StatsDay{Source: source, Day: day, Verdicts: v, Factors: f}, nil
}

func decodeDay(r store.StatsDay, obs *dayObs) error {
	if err := json.Unmarshal(r.Verdicts, &obs.verdicts); err != nil {
		return fmt.Errorf("worker: statistics day %d: %w", r.Day, err)
	}
	if err := json.Unmarshal(r.Factors, &obs.factors); err != nil {
		return fmt.Errorf("worker: statistics day %d: %w", r.Day, err)
	}
	return nil
}

// statsTotalLag is how many days before the run's day the stored total
// (store.StatsTotal) stops: the days after it are merged at every run. A
// new daily bar adds observations to the bars up to statsMaxHorizon bars
// before it (trading days for stocks, over weekends and holidays), and a
// correction of a recent candle drops the days from statsMaxHorizon bars
// before it: those days change without touching the total. A change at or
// before the total's day deletes it, and the run merges every day again.
var statsTotalLag = 2*statsMaxHorizon + 21

// saveRecords merges every stored day of a source, in day order, into the
// source's records and stores them: the stored total through a day, then
// the days after it. The merge through the run's day less statsTotalLag is
// stored as the next runs' total.
func (j *StatsJob) saveRecords(ctx context.Context, m domain.Market, source string, assets int, now time.Time) error {
	var total dayObs
	cut := stats.DayNumber(now) - statsTotalLag
	var next *store.StatsTotal // the total through cut, when it moves
	through := math.MinInt     // the last day merged
	loaded := math.MinInt      // the stored total's day
	keep := func() error {
		if through == math.MinInt || through == loaded || through > cut || next != nil {
			return nil
		}
		d, err := encodeDay(source, through, &total)
		next = &store.StatsTotal{Source: source, ThroughDay: through, Verdicts: d.Verdicts, Factors: d.Factors}
		return err
	}
	gen, err := j.Store.EachStatsDaySinceTotal(ctx, m, source, func(t store.StatsTotal) error {
		if err := decodeDay(store.StatsDay{Day: t.ThroughDay, Verdicts: t.Verdicts, Factors: t.Factors}, &total); err != nil {
			return err
		}
		through, loaded = t.ThroughDay, t.ThroughDay
		return nil
	}, func(r store.StatsDay) error {
		if r.Day > cut {
			if err := keep(); err != nil { // through the last day merged
				return err
			}
		}
		var obs dayObs
		if err := decodeDay(r, &obs); err != nil {
			return err
		}
		total.verdicts.Merge(&obs.verdicts)
		total.factors.Merge(&obs.factors)
		through = r.Day
		return nil
	})
	if err != nil {
		return err
	}
	if err := keep(); err != nil {
		return err
	}
	if next != nil {
		if _, err := j.Store.SaveStatsTotal(ctx, m, *next, gen); err != nil {
			return err
		}
	}
	verdicts := total.verdicts.Results(source)
	first, last, ok := total.verdicts.Window()
	stats.SetVerdictCoverage(verdicts, stats.NewCoverage(first, last, ok, assets))
	var factors []stats.FactorStat
	if source == stats.SourceBacktest {
		factors = total.factors.Results(source)
		first, last, ok := total.factors.Window()
		stats.SetFactorCoverage(factors, stats.NewCoverage(first, last, ok, assets))
	}
	return j.Store.SaveStats(ctx, m, source, verdicts, factors, assets, now)
}

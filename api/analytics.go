package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// AnalyticsData is what the analytics operations read.
type AnalyticsData interface {
	AnalyticsList(ctx context.Context, m domain.Market, style analytics.Style) ([]store.AnalyticsRecord, error)
	AnalyticsReport(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (store.AnalyticsRecord, error)
	// AnalyticsResults: every style's full results, for POST /screener/query.
	AnalyticsResults(ctx context.Context, m domain.Market, since time.Time) ([]store.AnalyticsRecord, error)
	// AnalyticsStamps and AnalyticsResultsOf: the snapshot's rebuilds read
	// only the reports that differ from those it holds.
	AnalyticsStamps(ctx context.Context, m domain.Market, since time.Time) ([]store.AnalyticsStamp, error)
	AnalyticsResultsOf(ctx context.Context, m domain.Market, symbols []string) ([]store.AnalyticsRecord, error)
	TopSetups(ctx context.Context, markets []domain.Market, verdict analytics.Verdict, style analytics.Style, limit int) ([]store.AnalyticsRecord, error)
	AnalyticsHistory(ctx context.Context, m domain.Market, symbol string, style analytics.Style, limit int) ([]store.AnalyticsSnapshot, error)
	AnalyticsHistoryRange(ctx context.Context, q store.HistoryRange) ([]store.AnalyticsSnapshot, error)
	Stats(ctx context.Context, m domain.Market) (store.MarketStats, error)
	// The archive, for reports as of an instant.
	AnalyticsReportAsOf(ctx context.Context, m domain.Market, symbol string, style analytics.Style, at time.Time) (store.AnalyticsRecord, error)
	ArchiveStart(ctx context.Context, m domain.Market, symbol string, style analytics.Style) (time.Time, bool, error)
	StatsAsOf(ctx context.Context, m domain.Market, at time.Time) (store.MarketStats, error)
}

// AnalyticsListItem is one scored asset of a market.
type AnalyticsListItem struct {
	Symbol       string            `json:"symbol" doc:"Canonical symbol" example:"BTC_USDT"`
	Verdict      analytics.Verdict `json:"verdict" doc:"The verdict of the overall score (with hysteresis)" example:"growth"`
	OverallScore int               `json:"overall_score" minimum:"-100" maximum:"100" doc:"Overall score, -100..100" example:"42"`
	Price        float64           `json:"price" doc:"Last price" example:"97250.5"`
	ChangePct    float64           `json:"change_pct" doc:"Percent change over 24 hours" example:"-1.85"`
	Sparkline    []float64         `json:"sparkline" doc:"Price mini-chart: the last 30 closes of the style's timeframe, oldest first" example:"[96100,96420.5,97250.5]"`
	UpdatedAt    time.Time         `json:"updated_at" doc:"When the asset was last scored (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
	DataQuality
}

// TopSetup is one asset of GET /analytics/top-setups.
type TopSetup struct {
	Market       domain.Market     `json:"market" example:"crypto"`
	Symbol       string            `json:"symbol" example:"SOL_USDT"`
	Verdict      analytics.Verdict `json:"verdict" example:"decline"`
	OverallScore int               `json:"overall_score" minimum:"-100" maximum:"100" example:"-71"`
	Price        float64           `json:"price" example:"182.4"`
	ChangePct    float64           `json:"change_pct" example:"-6.2"`
	UpdatedAt    time.Time         `json:"updated_at" example:"2026-11-22T10:15:00Z"`
	DataQuality
}

// ReportFactor is one factor of a report.
type ReportFactor struct {
	Name        string              `json:"name" doc:"Stable indicator or pattern identifier" example:"rsi_14"`
	Value       string              `json:"value" doc:"The reading, rendered as text" example:"63.41"`
	Sentiment   analytics.Sentiment `json:"sentiment" example:"neutral"`
	Weight      float64             `json:"weight" minimum:"0" maximum:"1" doc:"Share of the overall score; the weights of a report sum to 1" example:"0.0269"`
	Group       factorGroup         `json:"group" example:"oscillator"`
	Explanation string              `json:"explanation" doc:"Why the factor points where it does, in the language of lang" example:"RSI(14) = 63.41: between 30 and 70, no signal."`
}

// ReportScenario is the price plan of a report.
type ReportScenario struct {
	Support          float64 `json:"support" doc:"Nearest support below the last close" example:"95400"`
	Resistance       float64 `json:"resistance" doc:"Nearest resistance above the last close" example:"99800"`
	LastClose        float64 `json:"last_close" example:"97250.5"`
	ScenarioText     string  `json:"scenario_text" doc:"In the language of lang"`
	InvalidationText string  `json:"invalidation_text" doc:"In the language of lang"`
}

// VerdictStat is a verdict statistics record.
type VerdictStat struct {
	Verdict             analytics.Verdict `json:"verdict"`
	HorizonDays         verdictHorizon    `json:"horizon_days"`
	SampleSize          int               `json:"sample_size" doc:"Number of observations (asset-days with this verdict)"`
	EffectiveSampleSize int               `json:"effective_sample_size" minimum:"0" doc:"How many independent observations the sample is worth once overlapping horizons and assets moving together are accounted for; at most sample_size. The interval and is_significant use it"`
	IsSignificant       bool              `json:"is_significant" doc:"The 95% interval excludes base_rate (p_value < 0.05) and effective_sample_size ≥ 30. Not a promise of future results"`
	WinRate             *float64          `json:"win_rate" nullable:"true" doc:"0..1; null when sample_size is 0"`
	WinRateCILow        float64           `json:"win_rate_ci_low" doc:"Lower bound of the 95% Wilson interval on effective_sample_size (Student's t critical value); 0 when sample_size is 0"`
	WinRateCIHigh       float64           `json:"win_rate_ci_high" doc:"Upper bound of the 95% Wilson interval on effective_sample_size; 1 when sample_size is 0"`
	BaseRate            *float64          `json:"base_rate" nullable:"true" doc:"Unconditional win rate of the same rule over every bar of the horizon, the rate with no edge; null when no bar was seen"`
	PValue              *float64          `json:"p_value" nullable:"true" minimum:"0" maximum:"1" doc:"Two-sided p-value of 'win_rate equals base_rate' on effective_sample_size; null when there is nothing to test"`
	AvgReturnPct        float64           `json:"avg_return_pct"`
	WindowStart         *string           `json:"window_start" nullable:"true" format:"date" doc:"First day (YYYY-MM-DD, UTC) of the bars judged: the statistics cover every stored daily candle of the market's assets; null when unknown"`
	WindowEnd           *string           `json:"window_end" nullable:"true" format:"date" doc:"Last day (YYYY-MM-DD, UTC) of the bars judged; null when unknown"`
	Assets              int               `json:"assets" minimum:"0" doc:"How many assets the observations come from, delisted ones included (they count up to their last day)"`
	Source              statsSource       `json:"source"`
}

// FactorStat is a factor statistics record.
type FactorStat struct {
	Factor              string        `json:"factor"`
	HorizonDays         factorHorizon `json:"horizon_days"`
	SampleSize          int           `json:"sample_size" doc:"Number of observations with a bullish or bearish reading (neutral readings are not counted)"`
	EffectiveSampleSize int           `json:"effective_sample_size" minimum:"0" doc:"How many independent observations the sample is worth (see the verdict statistics); at most sample_size"`
	IsSignificant       bool          `json:"is_significant" doc:"p_value_adjusted ≤ 0.05 and effective_sample_size ≥ 30"`
	HitRate             float64       `json:"hit_rate" doc:"0..1; 0 when sample_size is 0"`
	HitRateCILow        float64       `json:"hit_rate_ci_low" doc:"Lower bound of the 95% Wilson interval on effective_sample_size, for this record alone (not adjusted for the other records)"`
	HitRateCIHigh       float64       `json:"hit_rate_ci_high" doc:"Upper bound of the 95% Wilson interval on effective_sample_size"`
	Correlation         float64       `json:"correlation"`
	BaseRate            *float64      `json:"base_rate" nullable:"true" minimum:"0" maximum:"1" doc:"The hit rate with no edge: the factor's share of bullish readings times how often the market's forward returns of this horizon were up, plus its bearish share times how often they were down; null when sample_size is 0"`
	PValue              *float64      `json:"p_value" nullable:"true" minimum:"0" maximum:"1" doc:"Two-sided p-value of 'hit_rate equals base_rate' on effective_sample_size; null with base_rate"`
	PValueAdjusted      *float64      `json:"p_value_adjusted" nullable:"true" minimum:"0" maximum:"1" doc:"p_value after the Benjamini–Hochberg adjustment over every factor and horizon of this market and source: among records with p_value_adjusted ≤ 0.05, at most 5% are expected to be chance findings"`
	WindowStart         *string       `json:"window_start" nullable:"true" format:"date" doc:"First day (YYYY-MM-DD, UTC) of the bars judged: the statistics cover every stored daily candle of the market's assets; null when unknown"`
	WindowEnd           *string       `json:"window_end" nullable:"true" format:"date" doc:"Last day (YYYY-MM-DD, UTC) of the bars judged; null when unknown"`
	Assets              int           `json:"assets" minimum:"0" doc:"How many assets the observations come from, delisted ones included (they count up to their last day)"`
	Source              statsSource   `json:"source"`
}

// AnalyticsReport is the analytics of one asset.
type AnalyticsReport struct {
	Market           domain.Market     `json:"market" example:"crypto"`
	Symbol           string            `json:"symbol" example:"BTC_USDT"`
	Style            analytics.Style   `json:"style" doc:"Trading style the technical score was computed for" example:"swing"`
	Exchange         string            `json:"exchange" doc:"Exchange whose candles were scored" example:"binance"`
	OverallScore     int               `json:"overall_score" minimum:"-100" maximum:"100" example:"42"`
	TechnicalScore   int               `json:"technical_score" minimum:"-100" maximum:"100" example:"42"`
	FundamentalScore *int              `json:"fundamental_score" nullable:"true" minimum:"-100" maximum:"100" doc:"null when no fundamental data is available (the overall score is then the technical one)"`
	Verdict          analytics.Verdict `json:"verdict" example:"growth"`
	Summary          string            `json:"summary" doc:"One-paragraph summary in the language of lang"`
	Factors          []ReportFactor    `json:"factors"`
	Scenario         ReportScenario    `json:"scenario"`
	VerdictStats     []VerdictStat     `json:"verdict_stats" doc:"How this report's verdict performed on this market (backtest, then live records; see GET /analytics/{market}/stats); empty until the statistics job has run"`
	FactorStats      []FactorStat      `json:"factor_stats" doc:"How this report's factors performed on this market (see GET /analytics/{market}/factor-stats); empty until the statistics job has run"`
	Price            float64           `json:"price" example:"97250.5"`
	ChangePct        float64           `json:"change_pct" example:"-1.85"`
	UpdatedAt        time.Time         `json:"updated_at" doc:"When the asset was last scored; with as_of, when the report answered was published" example:"2026-11-22T10:15:00Z"`
	ModelVersion     string            `json:"model_version" doc:"Version of the scoring method that made this report: its rules are in GET /analytics/methodology, its test vectors in docs/vectors/{version}/" example:"v1"`
	DataQuality
}

// HistorySnapshot is one point of an asset's score history.
type HistorySnapshot struct {
	At               time.Time         `json:"at" doc:"When the score was computed (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
	OverallScore     int               `json:"overall_score" example:"42"`
	TechnicalScore   int               `json:"technical_score" example:"42"`
	FundamentalScore *int              `json:"fundamental_score" nullable:"true"`
	Verdict          analytics.Verdict `json:"verdict" example:"growth"`
	Price            float64           `json:"price" example:"97250.5"`
	ModelVersion     string            `json:"model_version" doc:"Version of the scoring method that made this score (GET /analytics/methodology)" example:"v1"`
}

// AnalyticsMarketParam is the market of an analytics path.
type AnalyticsMarketParam struct {
	Market domain.Market `path:"market" doc:"Market" example:"crypto"`
}

// StyleParam is the trading style of an analytics operation.
type StyleParam struct {
	Style analytics.Style `query:"style" doc:"Trading style: scalp (15m candles), intraday (1h), swing (4h, the default), position (1d). Changes crypto only; other markets accept it and are scored on swing" example:"swing"`
}

type analyticsListInput struct {
	AnalyticsMarketParam
	StyleParam
	SymbolsParam
	ConditionalParams
}

// The data GETs of analytics answer a dataOutput, pre-encoded JSON
// (documented as their item types): the bytes and their ETag are cached
// per market, style and language and dropped when the worker announces
// new reports, so a hot read is a map lookup, as for the screener.

type topSetupsInput struct {
	Market  domain.Market      `query:"market" doc:"One market; omitted means every market of your tier"`
	Verdict directionalVerdict `query:"verdict" doc:"Only this verdict; omitted means both"`
	Limit   int                `query:"limit" default:"10" minimum:"1" maximum:"100" doc:"Number of assets"`
	ConditionalParams
}

type reportInput struct {
	AnalyticsMarketParam
	Symbol string `path:"symbol" maxLength:"40" doc:"BTC_USDT or BTC%2FUSDT (case-insensitive); a ticker for stocks" example:"BTC_USDT"`
	StyleParam
	Lang analytics.Lang `query:"lang" default:"ru" doc:"Language of the summary, factor explanations and scenario texts"`
	AsOf string         `query:"as_of" maxLength:"40" doc:"An instant (RFC 3339): the report as it was published then, the last one at or before it, with the statistics computed at or before its publication. Every report is kept for the report retention (7 days by default, set by the operator), then the last of each UTC day: an older instant answers the last kept report at or before it. 404 naming the earliest available instant when none was published by then; 400 for an instant in the future" example:"2026-11-20T08:00:00Z"`
	ConditionalParams
}

type historyInput struct {
	AnalyticsMarketParam
	Symbol string `path:"symbol" maxLength:"40" doc:"BTC_USDT or BTC%2FUSDT; a ticker for stocks" example:"BTC_USDT"`
	StyleParam
	Limit int    `query:"limit" default:"90" minimum:"1" maximum:"1000" doc:"Number of snapshots, newest first"`
	From  string `query:"from" maxLength:"40" doc:"Only snapshots taken at this instant (RFC 3339) or later" example:"2026-11-01T00:00:00Z"`
	To    string `query:"to" maxLength:"40" doc:"Only snapshots taken at this instant (RFC 3339) or earlier" example:"2026-11-22T00:00:00Z"`
	// Cursor is opaque to clients: the instant of the last snapshot of the previous page.
	Cursor string `query:"cursor" maxLength:"80" doc:"Where the page starts: the value the previous page's Link header (rel=\"next\") carries; send the other parameters unchanged"`
	ConditionalParams
}

// historyOutput is a page of history: the next page, when there is one,
// is announced in a Link header so the body stays the contract's array.
type historyOutput struct {
	Status        int
	ContentType   string `header:"Content-Type"`
	ContentLength string `header:"Content-Length"`
	ETag          string `header:"ETag" doc:"Strong entity tag of the body; send it back in If-None-Match" example:"\"l7mYk3t0n2Q4xUuB0V9cTw\""`
	LastModified  string `header:"Last-Modified" doc:"When the data last changed (HTTP-date); send it back in If-Modified-Since" example:"Sun, 22 Nov 2026 10:15:00 GMT"`
	CacheControl  string `header:"Cache-Control" doc:"private, max-age=<seconds until the data's next scheduled refresh>" example:"private, max-age=42"`
	Body          []byte
	Link          string `header:"Link" doc:"The next page (older snapshots) when there is one: <url>; rel=\"next\", the url this request's with cursor= set; absent on the last page" example:"</api/v1/public/analytics/crypto/BTC_USDT/history?cursor=MjAyNi0xMS0yMFQwODowMDowMFo&limit=90>; rel=\"next\""`
}

// historyPage is a cached page of history and the cursor of the next
// ("" on the last page).
type historyPage struct {
	body readcache.Body
	next string
}

type statsInput struct {
	AnalyticsMarketParam
	ConditionalParams
}

type factorStatsInput struct {
	AnalyticsMarketParam
	HorizonDays OptionalParam[int] `query:"horizon_days" doc:"Only this horizon: 1, 5 or 21; omitted means all three"`
	ConditionalParams
}

func (s *Server) registerAnalytics() {
	tags := []string{tagAnalytics}
	register(s, huma.Operation{
		OperationID: "get-analytics-top-setups",
		Summary:     "Strongest setups across markets",
		Description: "Assets sorted by the absolute value of overall_score (strongest imbalance first; ties by market and symbol), for one market or every market of your tier, in the default style (swing).",
		Tags:        tags, Errors: errorResponses(),
		Responses: s.dataResponses([]TopSetup{}, "Strongest setups first"),
	}, s.getTopSetups)
	register(s, huma.Operation{
		OperationID: "get-analytics-list",
		Summary:     "Every scored asset of a market",
		Description: "One item per scored asset, ordered by symbol; with `symbols=`, only those assets (the ones not scored are named in X-Unknown-Symbols). 503 with Retry-After right after a start, before the first scoring run.",
		Tags:        tags, Errors: errorResponses(),
		Responses: s.dataResponses([]AnalyticsListItem{}, "One item per scored asset, ordered by symbol"),
	}, s.getAnalyticsList)
	register(s, huma.Operation{
		OperationID: "get-analytics-stats",
		Summary:     "How each verdict performed on a market",
		Description: "Verdict statistics records for horizons 1, 5, 21 and 30 days: `backtest` (the scorer replayed over each asset's daily history) first, then `live` (the verdicts this service published). " +
			"`win_rate` is null when `sample_size` is 0; `base_rate` is how often the same rule would have won on any day. " +
			"Consecutive days' forward returns overlap and a market's assets move together, so the interval is computed on `effective_sample_size`, not on `sample_size`; " +
			"`is_significant` means the interval excludes `base_rate` and `effective_sample_size` is at least 30. 503 with Retry-After until the statistics job has run.",
		Tags: tags, Errors: errorResponses(),
		Responses: s.dataResponses([]VerdictStat{}, "Verdict statistics records, backtest then live"),
	}, s.getStats)
	register(s, huma.Operation{
		OperationID: "get-analytics-factor-stats",
		Summary:     "How each indicator and pattern performed on a market",
		Description: "Factor statistics records (backtest) for horizons 1, 5 and 21 days: a factor hits when its sentiment's sign matches the forward return's (neutral readings are not counted); " +
			"`correlation` is the Pearson correlation of its signed contribution with the forward return; `base_rate` is the hit rate the factor would have with no edge. " +
			"Many factors and horizons are tested at once, so `is_significant` uses `p_value_adjusted` (Benjamini–Hochberg, 5 % false discovery rate) and an `effective_sample_size` of at least 30. 503 with Retry-After until the statistics job has run.",
		Tags: tags, Errors: errorResponses(),
		Responses: s.dataResponses([]FactorStat{}, "Factor statistics records"),
	}, s.getFactorStats)
	register(s, huma.Operation{
		OperationID: "get-analytics-report",
		Summary:     "Analytics report of one asset",
		Description: "Technical, fundamental and overall scores, the verdict, every factor with its weight and explanation, and a support/resistance scenario, rendered in `lang`. 404 when the asset has not been scored. The segments `list`, `stats` and `factor-stats` are other operations, not symbols.",
		Tags:        tags, Errors: errorResponses(http.StatusNotFound),
		Responses: s.dataResponses(AnalyticsReport{}, "The report, texts in the language of lang"),
	}, s.getAnalyticsReport)
	register(s, huma.Operation{
		OperationID: "get-analytics-history",
		Summary:     "Score history of one asset",
		Description: "Snapshots of the score and verdict (with the technical and fundamental scores), newest first: one per scoring that changed the score or the verdict, and at least one per day the asset was scored. " +
			"`from` and `to` bound the instants; a page holds at most `limit` snapshots, and when older ones remain the `Link` header names the next page (`rel=\"next\"`, the same request with `cursor=`). " +
			"An empty range of a scored asset is an empty array.",
		Tags: tags, Errors: errorResponses(http.StatusNotFound),
		Responses: s.dataResponses([]HistorySnapshot{}, "Snapshots, newest first"),
	}, s.getAnalyticsHistory)
}

// analyticsStyle is the style a market is scored in: crypto in the
// requested one, other markets always in the default.
func analyticsStyle(m domain.Market, st analytics.Style) analytics.Style {
	if m != domain.Crypto || st == "" {
		return analytics.DefaultStyle
	}
	return st
}

func (s *Server) analyticsSymbol(ctx context.Context, m domain.Market, raw string) (string, error) {
	sym, ok := domain.NormalizeSymbol(m, raw)
	if !ok {
		form := "BASE_QUOTE such as BTC_USDT or EUR_USD (BTC%2FUSDT also accepted)"
		if m == domain.Stocks {
			form = "a ticker such as AAPL"
		}
		return "", s.problem(ctx, domain.Invalid("path.symbol", raw, "must be %s", form))
	}
	return sym, nil
}

func (s *Server) analyticsList(ctx context.Context, m domain.Market, st analytics.Style) ([]store.AnalyticsRecord, error) {
	return readcache.Load(ctx, s.cache, readcache.AnalyticsList(m, st), func(ctx context.Context) ([]store.AnalyticsRecord, error) {
		return s.analytics.AnalyticsList(ctx, m, st)
	})
}

func (s *Server) getAnalyticsList(ctx context.Context, in *analyticsListInput) (*dataOutput, error) {
	m := domain.Market(in.Market)
	wanted, err := parseSymbols(m, in.Symbols)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	st := analyticsStyle(m, in.Style)
	instrument := s.sourceInstrument(m)
	body, err := readcache.Load(ctx, s.cache, readcache.AnalyticsListBody(m, st), func(ctx context.Context) (agedBody, error) {
		recs, err := s.analyticsList(ctx, m, st)
		if err != nil {
			return agedBody{}, err
		}
		if domain.Scored(s.cfg.Region, m, s.cfg.Served) && len(recs) == 0 {
			return agedBody{}, domain.Errorf(domain.EUNAVAILABLE, "the %s analytics (style %s) are warming up: no asset scored yet since the start; "+
				"scoring starts as soon as its candles are stored (seconds); retry shortly", m, st)
		}
		return encodeAnalyticsList(recs, st, instrument, s.cfg.DataFeed, s.calendar(m), s.now(ctx), newestUpdate(recs), nil)
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if wanted == nil {
		return s.respondAged(ctx, &in.ConditionalParams, body, freshScores), nil
	}
	recs, err := s.analyticsList(ctx, m, st)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	found := wanted.tracker()
	// Not cached: the tag covers this body and the unknown symbols. The
	// modification time is the whole list's, which only grows.
	var unknown string
	b, err := encodeAnalyticsList(recs, st, instrument, s.cfg.DataFeed, s.calendar(m), s.now(ctx), body.Modified, func(sym string) bool {
		if wanted.has(sym) {
			found.see(sym)
			return true
		}
		return false
	}, func() []byte { unknown = found.unknown(); return []byte(unknown) })
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	out := s.respondAged(ctx, &in.ConditionalParams, b, freshScores)
	out.Unknown = unknown
	return out, nil
}

// encodeAnalyticsList encodes the records that keep accepts (every one
// when nil), their market following cal, at now; the entity tag covers
// the body and what tagAlso returns (after the encoding) when given.
func encodeAnalyticsList(recs []store.AnalyticsRecord, st analytics.Style, instrument string, dataFeed func(domain.Combination) string, cal domain.Calendar, now time.Time, modified time.Time,
	keep func(symbol string) bool, tagAlso ...func() []byte) (agedBody, error) {
	out := make([]AnalyticsListItem, 0, len(recs))
	from := make([]time.Time, 0, len(recs))
	for _, r := range recs {
		if keep != nil && !keep(r.Symbol) {
			continue
		}
		q, at := dataQuality(r, st, instrument, dataFeed, cal, now)
		out = append(out, AnalyticsListItem{Symbol: r.Symbol, Verdict: r.Verdict, OverallScore: r.OverallScore, Price: r.Price,
			ChangePct: r.ChangePct, Sparkline: r.Sparkline, UpdatedAt: r.UpdatedAt, DataQuality: q})
		from = append(from, at)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return agedBody{}, err
	}
	tagged := [][]byte{b}
	for _, f := range tagAlso {
		tagged = append(tagged, f())
	}
	return newAgedBody(b, modified, from, tagged...)
}

// newestUpdate is when the newest of recs was scored (zero for none).
func newestUpdate(recs []store.AnalyticsRecord) time.Time {
	var t time.Time
	for _, r := range recs {
		if r.UpdatedAt.After(t) {
			t = r.UpdatedAt
		}
	}
	return t
}

func (s *Server) getTopSetups(ctx context.Context, in *topSetupsInput) (*dataOutput, error) {
	p := principalFrom(ctx)
	markets := p.Client.Markets
	if in.Market != "" {
		m := domain.Market(in.Market)
		if err := requireMarket(ctx, m); err != nil {
			return nil, err
		}
		markets = []domain.Market{m}
	}
	key := readcache.TopSetupsBody(strings.Join(domain.MarketNames(markets), ","), string(in.Verdict), in.Limit)
	body, err := readcache.Load(ctx, s.cache, key, func(ctx context.Context) (agedBody, error) {
		recs, err := s.analytics.TopSetups(ctx, markets, analytics.Verdict(in.Verdict), analytics.DefaultStyle, in.Limit)
		if err != nil {
			return agedBody{}, err
		}
		out := make([]TopSetup, len(recs))
		from := make([]time.Time, len(recs))
		for i, r := range recs {
			var q DataQuality
			q, from[i] = dataQuality(r, analytics.DefaultStyle, s.sourceInstrument(r.Market), s.cfg.DataFeed, s.calendar(r.Market), s.now(ctx))
			out[i] = TopSetup{Market: r.Market, Symbol: r.Symbol, Verdict: r.Verdict, OverallScore: r.OverallScore,
				Price: r.Price, ChangePct: r.ChangePct, UpdatedAt: r.UpdatedAt, DataQuality: q}
		}
		// The newest scoring of the markets' whole lists, not only of the
		// assets shown: an asset can leave the top when it is rescored, and
		// Last-Modified must still move forward.
		var modified time.Time
		for _, m := range markets {
			all, err := s.analyticsList(ctx, m, analytics.DefaultStyle)
			if err != nil {
				return agedBody{}, err
			}
			if t := newestUpdate(all); t.After(modified) {
				modified = t
			}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return agedBody{}, err
		}
		return newAgedBody(b, modified, from)
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.respondAged(ctx, &in.ConditionalParams, body, freshScores), nil
}

// notScored is the 404 of an asset without analytics, naming some that have them.
func (s *Server) notScored(ctx context.Context, m domain.Market, st analytics.Style, sym string) error {
	recs, err := s.analyticsList(ctx, m, st)
	if err != nil {
		return s.problem(ctx, err)
	}
	if len(recs) == 0 {
		return s.problem(ctx, domain.Errorf(domain.ENOTFOUND, "no analytics computed yet for %s on %s: no %s asset has been scored yet", sym, m, m))
	}
	names := make([]string, 0, 30)
	for _, r := range recs[:min(len(recs), 30)] {
		names = append(names, r.Symbol)
	}
	more := ""
	if len(recs) > len(names) {
		more = fmt.Sprintf(" and %d more (GET /analytics/%s/list)", len(recs)-len(names), m)
	}
	return s.problem(ctx, domain.Errorf(domain.ENOTFOUND, "no analytics computed yet for %s on %s; scored: %s%s",
		sym, m, strings.Join(names, ", "), more))
}

func (s *Server) getAnalyticsReport(ctx context.Context, in *reportInput) (*dataOutput, error) {
	m := domain.Market(in.Market)
	sym, err := s.analyticsSymbol(ctx, m, in.Symbol)
	if err != nil {
		return nil, err
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	st := analyticsStyle(m, in.Style)
	lang, _ := analytics.ParseLang(string(in.Lang))
	if in.AsOf != "" {
		return s.reportAsOf(ctx, in, m, st, sym, lang)
	}
	body, err := s.reportBody(ctx, m, st, sym, lang)
	if err != nil && domain.ErrorCode(err) == domain.ENOTFOUND {
		return nil, s.notScored(ctx, m, st, sym)
	}
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.respondAged(ctx, &in.ConditionalParams, body, freshScores), nil
}

// reportAsOf answers a report as it was published at in.AsOf, with the
// statistics computed at or before its publication. Not cached: the
// instants asked are as many as the clients' backtests.
func (s *Server) reportAsOf(ctx context.Context, in *reportInput, m domain.Market, st analytics.Style, sym string, lang analytics.Lang) (*dataOutput, error) {
	at, err := time.Parse(time.RFC3339Nano, in.AsOf)
	if err != nil {
		return nil, s.problem(ctx, domain.Invalid("query.as_of", in.AsOf, "must be an RFC 3339 instant such as 2026-11-20T08:00:00Z"))
	}
	if now := s.now(ctx); at.After(now) {
		return nil, s.problem(ctx, domain.Invalid("query.as_of", in.AsOf, "is in the future (now is %s): no report is published yet for it",
			now.UTC().Format(time.RFC3339)))
	}
	rec, err := s.analytics.AnalyticsReportAsOf(ctx, m, sym, st, at)
	if domain.ErrorCode(err) == domain.ENOTFOUND {
		start, ok, serr := s.analytics.ArchiveStart(ctx, m, sym, st)
		if serr != nil {
			return nil, s.problem(ctx, serr)
		}
		if !ok {
			return nil, s.notScored(ctx, m, st, sym)
		}
		return nil, s.problem(ctx, domain.Errorf(domain.ENOTFOUND, "no report of %s on %s (style %s) was published at or before %s; "+
			"the earliest available is as_of=%s", sym, m, st, at.UTC().Format(time.RFC3339), start.Format(time.RFC3339Nano)))
	}
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	ms, err := s.analytics.StatsAsOf(ctx, m, rec.UpdatedAt)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	body, err := s.renderReport(m, st, sym, lang, rec, ms)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.respondAged(ctx, &in.ConditionalParams, body, freshScores), nil
}

// reportBody is the cached report of one asset (ENOTFOUND when it has not
// been scored).
func (s *Server) reportBody(ctx context.Context, m domain.Market, st analytics.Style, sym string, lang analytics.Lang) (agedBody, error) {
	return readcache.Load(ctx, s.cache, readcache.AnalyticsReport(m, st, sym, lang), func(ctx context.Context) (agedBody, error) {
		return s.encodeReport(ctx, m, st, sym, lang)
	})
}

// encodeReport renders an asset's stored result in lang with the market's
// statistics of its verdict and factors (empty until the statistics job
// has run), as the response body.
func (s *Server) encodeReport(ctx context.Context, m domain.Market, st analytics.Style, sym string, lang analytics.Lang) (agedBody, error) {
	rec, err := s.analytics.AnalyticsReport(ctx, m, sym, st)
	if err != nil {
		return agedBody{}, err
	}
	ms, err := s.marketStats(ctx, m)
	if err != nil {
		return agedBody{}, err
	}
	return s.renderReport(m, st, sym, lang, rec, ms)
}

// renderReport is the body of rec in lang with the statistics of ms.
func (s *Server) renderReport(m domain.Market, st analytics.Style, sym string, lang analytics.Lang, rec store.AnalyticsRecord, ms store.MarketStats) (agedBody, error) {
	q, from := dataQuality(rec, st, s.sourceInstrument(m), s.cfg.DataFeed, s.calendar(m), s.cfg.Now())
	rep := rec.Result.Localize(lang)
	body := AnalyticsReport{Market: m, Symbol: sym, Style: st, Exchange: rec.Exchange,
		OverallScore: rep.OverallScore, TechnicalScore: rep.TechnicalScore, FundamentalScore: rep.FundamentalScore,
		Verdict: rep.Verdict, Summary: rep.Summary, Factors: make([]ReportFactor, len(rep.Factors)),
		Scenario: ReportScenario{Support: rep.Scenario.Support, Resistance: rep.Scenario.Resistance, LastClose: rep.Scenario.LastClose,
			ScenarioText: rep.Scenario.ScenarioText, InvalidationText: rep.Scenario.InvalidationText},
		VerdictStats: verdictStats(ms.Verdicts, rep.Verdict), FactorStats: []FactorStat{},
		Price: rec.Price, ChangePct: rec.ChangePct, UpdatedAt: rec.UpdatedAt, ModelVersion: rep.ModelVersion, DataQuality: q}
	names := map[string]bool{}
	for i, f := range rep.Factors {
		body.Factors[i] = ReportFactor{Name: f.Name, Value: f.Value, Sentiment: f.Sentiment, Weight: f.Weight,
			Group: factorGroup(f.Group), Explanation: f.Explanation}
		names[f.Name] = true
	}
	for _, f := range ms.Factors {
		if names[f.Factor] {
			body.FactorStats = append(body.FactorStats, factorStat(f))
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return agedBody{}, err
	}
	modified := rec.UpdatedAt
	if ms.ComputedAt.After(modified) {
		modified = ms.ComputedAt // the report carries the statistics too
	}
	return newAgedBody(b, modified, []time.Time{from})
}

func (s *Server) getAnalyticsHistory(ctx context.Context, in *historyInput) (*historyOutput, error) {
	m := domain.Market(in.Market)
	sym, err := s.analyticsSymbol(ctx, m, in.Symbol)
	if err != nil {
		return nil, err
	}
	q := store.HistoryRange{Market: m, Symbol: sym, Limit: in.Limit + 1} // one more: is there a next page?
	for _, p := range []struct {
		name, raw string
		dst       *time.Time
	}{{"query.from", in.From, &q.From}, {"query.to", in.To, &q.To}} {
		if p.raw == "" {
			continue
		}
		if *p.dst, err = time.Parse(time.RFC3339Nano, p.raw); err != nil {
			return nil, s.problem(ctx, domain.Invalid(p.name, p.raw, "must be an RFC 3339 instant such as 2026-11-20T08:00:00Z"))
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.From.After(q.To) {
		return nil, s.problem(ctx, domain.Invalid("query.from", in.From, "must not be after to (%s)", in.To))
	}
	if in.Cursor != "" {
		if q.Before, err = decodeHistoryCursor(in.Cursor); err != nil {
			return nil, s.problem(ctx, domain.Invalid("query.cursor", in.Cursor, "is not a cursor of this operation: send the Link header's url as it is"))
		}
	}
	if err := requireMarket(ctx, m); err != nil {
		return nil, err
	}
	q.Style = analyticsStyle(m, in.Style)
	load := func(ctx context.Context) (historyPage, error) { return s.historyPage(ctx, q, in.Limit) }
	var page historyPage
	if in.From == "" && in.To == "" && in.Cursor == "" {
		page, err = readcache.Load(ctx, s.cache, readcache.HistoryBody(m, q.Style, sym, in.Limit), load)
	} else {
		page, err = load(ctx) // the ranges asked are as many as the clients' backtests: not cached
	}
	if domain.ErrorCode(err) == domain.ENOTFOUND {
		return nil, s.notScored(ctx, m, q.Style, sym)
	}
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	d := s.respond(ctx, &in.ConditionalParams, page.body, freshScores)
	out := &historyOutput{Status: d.Status, ContentType: d.ContentType, ContentLength: d.ContentLength, ETag: d.ETag,
		LastModified: d.LastModified, CacheControl: d.CacheControl, Body: d.Body}
	if page.next != "" {
		v := url.Values{"limit": {strconv.Itoa(in.Limit)}, "cursor": {page.next}}
		for k, val := range map[string]string{"style": string(in.Style), "from": in.From, "to": in.To} {
			if val != "" {
				v.Set(k, val)
			}
		}
		out.Link = "<" + BasePath + "/analytics/" + string(m) + "/" + sym + "/history?" + v.Encode() + `>; rel="next"`
	}
	return out, nil
}

// historyPage reads the page of q (limit snapshots, q.Limit one more):
// ENOTFOUND when the asset has no history at all.
func (s *Server) historyPage(ctx context.Context, q store.HistoryRange, limit int) (historyPage, error) {
	snaps, err := s.analytics.AnalyticsHistoryRange(ctx, q)
	if err != nil {
		return historyPage{}, err
	}
	if len(snaps) == 0 {
		some, err := s.analytics.AnalyticsHistory(ctx, q.Market, q.Symbol, q.Style, 1)
		if err != nil {
			return historyPage{}, err
		}
		if len(some) == 0 {
			return historyPage{}, domain.Errorf(domain.ENOTFOUND, "no history of %s", q.Symbol)
		}
	}
	var page historyPage
	if len(snaps) > limit {
		snaps = snaps[:limit]
		page.next = encodeHistoryCursor(snaps[limit-1].At)
	}
	out := make([]HistorySnapshot, len(snaps))
	for i, h := range snaps {
		out[i] = HistorySnapshot{At: h.At, OverallScore: h.OverallScore, TechnicalScore: h.TechnicalScore,
			FundamentalScore: h.FundamentalScore, Verdict: h.Verdict, Price: h.Price, ModelVersion: h.ModelVersion}
	}
	b, err := json.Marshal(out)
	var modified time.Time
	if len(snaps) > 0 {
		modified = snaps[0].At // newest first
	}
	page.body = readcache.NewBody(b, modified)
	return page, err
}

// A history cursor is the instant of the last snapshot of a page, which
// the next page starts before; encoded so that clients treat it as opaque.
func encodeHistoryCursor(at time.Time) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano)))
}

func decodeHistoryCursor(c string) (time.Time, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, string(raw))
}

func (s *Server) marketStats(ctx context.Context, m domain.Market) (store.MarketStats, error) {
	return readcache.Load(ctx, s.cache, readcache.MarketStats(m), func(ctx context.Context) (store.MarketStats, error) {
		return s.analytics.Stats(ctx, m)
	})
}

// requireStats answers 503 until a market with a candle source has statistics.
func (s *Server) requireStats(ctx context.Context, m domain.Market) (store.MarketStats, error) {
	if err := requireMarket(ctx, m); err != nil {
		return store.MarketStats{}, err
	}
	st, err := s.marketStats(ctx, m)
	if err != nil {
		return st, s.problem(ctx, err)
	}
	if domain.Scored(s.cfg.Region, m, s.cfg.Served) && st.ComputedAt.IsZero() {
		return st, s.problem(ctx, domain.Errorf(domain.EUNAVAILABLE, "the %s statistics have not been computed yet; retry shortly", m))
	}
	return st, nil
}

func (s *Server) getStats(ctx context.Context, in *statsInput) (*dataOutput, error) {
	m := domain.Market(in.Market)
	if _, err := s.requireStats(ctx, m); err != nil {
		return nil, err
	}
	// The loads read the statistics again (a cache hit), inside the body's
	// own load: an invalidation between the two cannot leave an old body cached.
	body, err := readcache.Load(ctx, s.cache, readcache.StatsBody(m), func(ctx context.Context) (readcache.Body, error) {
		st, err := s.marketStats(ctx, m)
		if err != nil {
			return readcache.Body{}, err
		}
		b, err := json.Marshal(verdictStats(st.Verdicts, ""))
		return readcache.NewBody(b, st.ComputedAt), err
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.respond(ctx, &in.ConditionalParams, body, freshStats), nil
}

func (s *Server) getFactorStats(ctx context.Context, in *factorStatsInput) (*dataOutput, error) {
	h := in.HorizonDays
	if h.IsSet && h.Value != 1 && h.Value != 5 && h.Value != 21 {
		return nil, s.problem(ctx, domain.Invalid("query.horizon_days", h.Value, "must be one of 1, 5, 21"))
	}
	m := domain.Market(in.Market)
	if _, err := s.requireStats(ctx, m); err != nil {
		return nil, err
	}
	horizon := 0
	if h.IsSet {
		horizon = h.Value
	}
	body, err := readcache.Load(ctx, s.cache, readcache.FactorStatsBody(m, horizon), func(ctx context.Context) (readcache.Body, error) {
		st, err := s.marketStats(ctx, m)
		if err != nil {
			return readcache.Body{}, err
		}
		out := []FactorStat{}
		for _, f := range st.Factors {
			if horizon == 0 || f.HorizonDays == horizon {
				out = append(out, factorStat(f))
			}
		}
		b, err := json.Marshal(out)
		return readcache.NewBody(b, st.ComputedAt), err
	})
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return s.respond(ctx, &in.ConditionalParams, body, freshStats), nil
}

// verdictStats converts records, keeping one verdict's ("" for all).
func verdictStats(in []stats.VerdictStat, verdict analytics.Verdict) []VerdictStat {
	out := []VerdictStat{}
	for _, v := range in {
		if verdict != "" && v.Verdict != string(verdict) {
			continue
		}
		out = append(out, VerdictStat{Verdict: analytics.Verdict(v.Verdict), HorizonDays: verdictHorizon(v.HorizonDays), SampleSize: v.SampleSize,
			EffectiveSampleSize: v.EffectiveSampleSize, IsSignificant: v.IsSignificant, WinRate: v.WinRate,
			WinRateCILow: v.WinRateCILow, WinRateCIHigh: v.WinRateCIHigh, BaseRate: v.BaseRate, PValue: v.PValue,
			AvgReturnPct: v.AvgReturnPct, WindowStart: optionalString(v.WindowStart), WindowEnd: optionalString(v.WindowEnd),
			Assets: v.Assets, Source: statsSource(v.Source)})
	}
	return out
}

func factorStat(f stats.FactorStat) FactorStat {
	return FactorStat{Factor: f.Factor, HorizonDays: factorHorizon(f.HorizonDays), SampleSize: f.SampleSize,
		EffectiveSampleSize: f.EffectiveSampleSize, IsSignificant: f.IsSignificant, HitRate: f.HitRate,
		HitRateCILow: f.HitRateCILow, HitRateCIHigh: f.HitRateCIHigh, Correlation: f.Correlation,
		BaseRate: f.BaseRate, PValue: f.PValue, PValueAdjusted: f.PValueAdjusted,
		WindowStart: optionalString(f.WindowStart), WindowEnd: optionalString(f.WindowEnd), Assets: f.Assets, Source: statsSource(f.Source)}
}

// optionalString is nil for "".
func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/docs/vectors"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
	"github.com/marketscreener/market/readcache"
)

// Methodology is the answer of GET /analytics/methodology.
type Methodology struct {
	CurrentVersion string             `json:"current_version" doc:"The version new reports are made with" example:"v1"`
	Versions       []analytics.Method `json:"versions" doc:"Every version of the method, oldest first"`
	Statistics     StatisticsScope    `json:"statistics" doc:"What the verdict and factor statistics (GET /analytics/{market}/stats, /factor-stats and a report's verdict_stats and factor_stats) are computed over"`
}

// StatisticsScope says what the statistics records include.
type StatisticsScope struct {
	History  string `json:"history" doc:"Which candles the statistics read"`
	Assets   string `json:"assets" doc:"Which assets they include"`
	Delisted string `json:"delisted" doc:"How delisted assets count"`
	Window   string `json:"window" doc:"What each record states about its coverage"`
	Updates  string `json:"updates" doc:"When the statistics change"`
	Neutral  string `json:"neutral" doc:"What a neutral verdict is judged against"`
}

// statisticsScope is the statistics job's scope (worker.StatsJob).
func statisticsScope() StatisticsScope {
	return StatisticsScope{
		History: "Every stored daily candle of each asset of the market's analytics source, from its first to the last closed one; " +
			"the backtest replays the scoring method on each day from the candles up to it, and judges the verdict and factors against the forward returns " +
			fmt.Sprintf("%v trading days later (factors: %v).", stats.VerdictHorizons, stats.FactorHorizons),
		Assets: fmt.Sprintf("Every asset with at least %d daily candles, whatever its listing status today.", analytics.MinCandles+1),
		Delisted: "An asset that is no longer listed keeps its candles and counts in the statistics up to its last day, so the losers that were delisted " +
			"are not left out (no survivorship bias). It is not in the screener, the analytics list or the top setups; its report stays readable with as_of inside its life.",
		Window: "Each record carries window_start and window_end, the first and last day of the bars judged, and assets, how many assets the observations come from, delisted ones included. " +
			"effective_sample_size and the interval account for overlapping forward returns and for assets moving together (blocks of days across assets).",
		Updates: "The statistics add each closed day's observations once it is settled; a corrected candle makes the days from " +
			fmt.Sprintf("%d bars before it judged again. The result equals one computation over the whole history.", max(slices.Max(stats.VerdictHorizons), slices.Max(stats.FactorHorizons))),
		Neutral: fmt.Sprintf("A neutral verdict wins when the absolute forward return is below the asset's median absolute move over the same horizon, "+
			"taken over the newest %d such moves completed by the verdict's day (at least %d), never over later ones.", stats.MedianWindow, stats.MinMedianMoves),
	}
}

type methodologyInput struct {
	ConditionalParams
}

func (s *Server) registerMethodology() {
	register(s, huma.Operation{
		OperationID: "get-analytics-methodology",
		Summary:     "The scoring method, every version",
		Description: "Each version of the method that makes the scores and verdicts: the rule of every factor (indicator, settings, when it votes buy or sell, when it casts no vote), " +
			"the weights, the verdict thresholds and their hysteresis, the fundamental inputs of each market, and what changed; " +
			"and what the verdict and factor statistics are computed over (`statistics`: the whole stored daily history, delisted assets included). " +
			"Every report, history snapshot, webhook payload and verdict stream event names the version that made it in `model_version`. " +
			"A change of any rule is a new version with a new `fingerprint`; the rules are generated from the values the scoring engine runs, " +
			"and test vectors of each version (candles in, votes, scores and verdicts out) are published in the repository under docs/vectors/{version}/.",
		Tags: []string{tagAnalytics}, Errors: errorResponses(),
		Responses: s.dataResponses(Methodology{}, "Every version, oldest first"),
	}, s.getMethodology)
}

// methodologyBody encodes every version of the method: the current one
// from the engine's values, earlier ones as published with their vectors.
func methodologyBody() (readcache.Body, error) {
	published, err := vectors.Published()
	if err != nil {
		return readcache.Body{}, err
	}
	methods, err := analytics.Methodology(published)
	if err != nil {
		return readcache.Body{}, err
	}
	cur := analytics.CurrentVersion()
	b, err := json.Marshal(Methodology{CurrentVersion: cur.Name, Versions: methods, Statistics: statisticsScope()})
	if err != nil {
		return readcache.Body{}, fmt.Errorf("api: methodology: %w", err)
	}
	released, err := time.Parse(time.DateOnly, cur.Released)
	if err != nil {
		return readcache.Body{}, fmt.Errorf("api: methodology: version %s: %w", cur.Name, err)
	}
	return readcache.NewBody(b, released), nil
}

func (s *Server) getMethodology(ctx context.Context, in *methodologyInput) (*dataOutput, error) {
	if s.methodologyErr != nil {
		return nil, s.problem(ctx, s.methodologyErr)
	}
	return s.respond(ctx, &in.ConditionalParams, s.methodology, freshStats), nil
}

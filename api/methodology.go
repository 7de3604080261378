package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/docs/vectors"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
)

// Methodology is the answer of GET /analytics/methodology.
type Methodology struct {
	CurrentVersion string             `json:"current_version" doc:"The version new reports are made with" example:"v1"`
	Versions       []analytics.Method `json:"versions" doc:"Every version of the method, oldest first"`
}

type methodologyInput struct {
	ConditionalParams
}

func (s *Server) registerMethodology() {
	register(s, huma.Operation{
		OperationID: "get-analytics-methodology",
		Summary:     "The scoring method, every version",
		Description: "Each version of the method that makes the scores and verdicts: the rule of every factor (indicator, settings, when it votes buy or sell, when it casts no vote), " +
			"the weights, the verdict thresholds and their hysteresis, the fundamental inputs of each market, and what changed. " +
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
	b, err := json.Marshal(Methodology{CurrentVersion: cur.Name, Versions: methods})
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

package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
)

// TestOpenAPIEnumsAreDomains: every enum of the OpenAPI document is one of
// domain's lists, the parameters and fields that name a market, a
// timeframe, a style, a language or a verdict carry exactly their list,
// and the bounds and defaults the hot routes' decoders use are the
// document's.
func TestOpenAPIEnumsAreDomains(t *testing.T) {
	t.Parallel()
	s := New(Config{Region: "global"}, nil, nil)
	raw, err := json.Marshal(s.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}

	lists := map[string][]string{
		"markets":             names(domain.Markets),
		"timeframes":          names(domain.Timeframes),
		"tiers":               names(domain.Tiers),
		"client statuses":     names(domain.ClientStatuses),
		"styles":              names(analytics.Styles),
		"langs":               names(analytics.Langs),
		"verdicts":            names(analytics.Verdicts),
		"directional":         names(analytics.DirectionalVerdicts),
		"sentiments":          names(analytics.Sentiments),
		"groups":              analytics.Groups,
		"technical groups":    analytics.TechnicalGroups,
		"sources":             stats.Sources,
		"verdict horizons":    numbers(stats.VerdictHorizons),
		"factor horizons":     numbers(stats.FactorHorizons),
		"webhook statuses":    domain.WebhookStatuses,
		"delivery states":     domain.DeliveryStates,
		"drop reasons":        domain.DropReasons,
		"delivery errors":     domain.DeliveryErrorCategories,
		"ping errors":         domain.PingErrorCategories,
		"verdict_changed":     {domain.EventVerdictChanged},
		"screener":            {domain.EventScreener},
		"webhook events":      domain.WebhookEventKinds,
		"stream close status": {"401", "403", "429"}, // HTTP statuses, the api's own
	}
	// The names that always carry one list, wherever they appear.
	byName := map[string]string{
		"market_type": "markets", "market": "markets", "timeframe": "timeframes",
		"style": "styles", "lang": "langs", "new_verdict": "verdicts", "old_verdict": "verdicts",
		"sentiment": "sentiments", "group": "groups", "tier": "tiers", "source": "sources",
	}
	seen := map[string]bool{}
	check := func(where, name string, schema map[string]any) {
		enum, ok := schema["enum"].([]any)
		if !ok {
			if items, isArray := schema["items"].(map[string]any); isArray {
				enum, ok = items["enum"].([]any)
			}
		}
		want, named := byName[name]
		if where == "VoteRule.group" {
			want = "technical groups" // a methodology rule is a technical vote's
		}
		if named && schema["type"] == "string" || named && ok {
			seen[name] = true
			if !slices.Equal(texts(enum), lists[want]) {
				t.Errorf("%s: enum %v, want domain's %s %v", where, enum, want, lists[want])
			}
		}
		if !ok {
			return
		}
		for _, l := range lists {
			if slices.Equal(texts(enum), l) {
				return
			}
		}
		t.Errorf("%s: enum %v is none of domain's lists", where, enum)
	}

	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			op, _ := op.(map[string]any)
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p := p.(map[string]any)
				name := p["name"].(string)
				if path == "/stream" && name == "market" {
					continue // a comma-separated list of markets
				}
				check(method+" "+path+" "+name, name, p["schema"].(map[string]any))
			}
		}
	}
	for typ, schema := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		props, _ := schema.(map[string]any)["properties"].(map[string]any)
		for name, p := range props {
			check(typ+"."+name, name, p.(map[string]any))
		}
	}
	for _, name := range []string{"market_type", "market", "timeframe", "style", "lang", "new_verdict", "sentiment", "group", "tier", "source"} {
		if !seen[name] {
			t.Errorf("no %s in the document", name)
		}
	}

	// The decoders' bounds and defaults.
	param := func(path, name string) map[string]any {
		for _, p := range doc["paths"].(map[string]any)[path].(map[string]any)["get"].(map[string]any)["parameters"].([]any) {
			if p := p.(map[string]any); p["name"] == name {
				return p["schema"].(map[string]any)
			}
		}
		t.Fatalf("no parameter %s of GET %s", name, path)
		return nil
	}
	for _, c := range []struct {
		path, name, key string
		want            float64
	}{
		{"/screener/{market_type}/{exchange}/{instrument}", "exchange", "maxLength", maxExchangeLen},
		{"/screener/{market_type}/{exchange}/{instrument}", "instrument", "maxLength", maxInstrumentLen},
		{"/screener/{market_type}/{exchange}/{instrument}", "If-None-Match", "maxLength", maxIfNoneMatchLen},
		{"/screener/{market_type}/{exchange}/{instrument}", "If-Modified-Since", "maxLength", maxIfModifiedSinceLen},
		{"/ohlcv/{market_type}/{exchange}/{symbol}/{timeframe}", "symbol", "maxLength", maxSymbolLen},
		{"/ohlcv/{market_type}/{exchange}/{symbol}/{timeframe}", "limit", "default", defaultCandleLimit},
		{"/ohlcv/{market_type}/{exchange}/{symbol}/{timeframe}", "limit", "minimum", 1},
		{"/ohlcv/{market_type}/{exchange}/{symbol}/{timeframe}", "limit", "maximum", MaxCandleLimit},
		{"/analytics/{market}/{symbol}", "symbol", "maxLength", maxSymbolLen},
	} {
		if got := param(c.path, c.name)[c.key]; got != c.want {
			t.Errorf("GET %s %s: %s %v, want %v", c.path, c.name, c.key, got, c.want)
		}
	}
	if got := param("/analytics/{market}/{symbol}", "lang")["default"]; got != string(analytics.DefaultLang) {
		t.Errorf("lang default %v, want %s", got, analytics.DefaultLang)
	}
}

func names[T ~string](vals []T) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

func numbers(vals []int) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = fmt.Sprint(v)
	}
	return out
}

func texts(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.TrimSpace(fmt.Sprint(v))
	}
	return out
}

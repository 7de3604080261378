package analytics

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestCurrentRulesHashToTheCurrentVersion fails on any rule change that
// comes without a new version.
func TestCurrentRulesHashToTheCurrentVersion(t *testing.T) {
	t.Parallel()
	got, want := CurrentMethod().Rules.Fingerprint(), CurrentVersion().Fingerprint
	if got != want {
		t.Fatalf("the rules of the engine hash to %s, but model version %s is pinned to %s.\n"+
			"A rule changed: add a version to Versions with this fingerprint and a changelog entry, "+
			"then write its vectors: go test ./domain/analytics -run TestVectors -update", got, CurrentVersion().Name, want)
	}
}

func TestVersionsAreDistinctAndOrdered(t *testing.T) {
	t.Parallel()
	names, prints := map[string]bool{}, map[string]bool{}
	for i, v := range Versions {
		if v.Name == "" || v.Changelog == "" || len(v.Fingerprint) != 64 {
			t.Errorf("version %d is incomplete: %+v", i, v)
		}
		if names[v.Name] || prints[v.Fingerprint] {
			t.Errorf("version %s repeats a name or the rules of an earlier version", v.Name)
		}
		names[v.Name], prints[v.Fingerprint] = true, true
		if i > 0 && v.Released < Versions[i-1].Released {
			t.Errorf("version %s released before %s", v.Name, Versions[i-1].Name)
		}
	}
}

func TestEveryParameterIsInTheFingerprint(t *testing.T) {
	t.Parallel()
	base := currentRules()
	fp := base.Fingerprint()
	mutations := map[string]func(r *Rules){
		"a vote parameter": func(r *Rules) { r.Votes[15].Params[1].Value-- },
		"a vote condition": func(r *Rules) { r.Votes[15].Buy = strings.Replace(r.Votes[15].Buy, "<", "≤", 1) },
		"a weight":         func(r *Rules) { r.Weights.Pattern = 0.05 },
		"a verdict threshold": func(r *Rules) {
			r.Verdict.GrowthHold = 9
		},
		"a fundamental threshold": func(r *Rules) { r.Fundamentals[0].Params[0].Value = 0.0006 },
		"a scenario setting":      func(r *Rules) { r.Scenario[0].Value = 21 },
		"the minimum history":     func(r *Rules) { r.Candles.Min = 50 },
	}
	for name, mutate := range mutations {
		r := currentRules() // fresh slices: the mutations must not leak
		mutate(&r)
		if r.Fingerprint() == fp {
			t.Errorf("changing %s left the fingerprint unchanged", name)
		}
	}
	if currentRules().Fingerprint() != fp {
		t.Fatal("the rules are not deterministic")
	}
}

func TestEveryFactorHasARule(t *testing.T) {
	t.Parallel()
	m := CurrentMethod()
	var ruled []string
	for _, v := range m.Rules.Votes {
		ruled = append(ruled, v.Factor)
	}
	for _, f := range m.Rules.Fundamentals {
		ruled = append(ruled, f.Factor)
	}
	if !slices.Equal(ruled, FactorNames) {
		t.Fatalf("rules cover %v, the engine's factors are %v", ruled, FactorNames)
	}
	for _, v := range m.Rules.Votes {
		if v.Indicator == "" || v.Buy == "" || v.Sell == "" || v.Missing == "" || len(v.Params) == 0 {
			t.Errorf("rule %s is incomplete: %+v", v.Factor, v)
		}
	}
	weights := map[string]float64{}
	for _, f := range m.Rules.Fundamentals {
		weights[f.Market] += f.Weight
	}
	for market, w := range weights {
		if math.Abs(w-1) > 1e-9 {
			t.Errorf("the %s fundamental weights sum to %v", market, w)
		}
	}
}

// param is a rule's parameter by name.
func param(t *testing.T, factor, name string) float64 {
	t.Helper()
	for _, v := range CurrentMethod().Rules.Votes {
		if v.Factor != factor {
			continue
		}
		for _, p := range v.Params {
			if p.Name == name {
				return p.Value
			}
		}
	}
	t.Fatalf("no parameter %s of %s", name, factor)
	return 0
}

// TestPublishedThresholdsAreWhereTheVotesSwitch reads each threshold from
// the methodology and checks the vote changes exactly there: the
// description is the engine's, not a copy of it.
func TestPublishedThresholdsAreWhereTheVotesSwitch(t *testing.T) {
	t.Parallel()
	type vote func(at, eps float64) (int, bool)
	cases := []struct {
		factor, param string
		want          int // the vote just past the threshold
		vote          vote
	}{
		{"rsi_14", "oversold", 1, func(x, e float64) (int, bool) { return rsiVote(x-e, x-1) }},
		{"rsi_14", "overbought", -1, func(x, e float64) (int, bool) { return rsiVote(x+e, x+1) }},
		{"stoch_14_3_3", "oversold", 1, func(x, e float64) (int, bool) { return stochVote(x-e, x-1, 0) }},
		{"stoch_14_3_3", "overbought", -1, func(x, e float64) (int, bool) { return stochVote(x+e, x+1, 0) }},
		{"cci_20", "oversold", 1, func(x, e float64) (int, bool) { return cciVote(x-e, x-10) }},
		{"cci_20", "overbought", -1, func(x, e float64) (int, bool) { return cciVote(x+e, x+10) }},
		{"adx_14", "trend", 1, func(x, e float64) (int, bool) { return adxVote(x+e, x-1, 30, 10) }},
		{"stoch_rsi_14_14_3_3", "oversold", 1, func(x, e float64) (int, bool) { return stochRSIVote(1, 2, x-e, x-1) }},
		{"stoch_rsi_14_14_3_3", "overbought", -1, func(x, e float64) (int, bool) { return stochRSIVote(2, 1, x+e, x+1) }},
		{"williams_r_14", "oversold", 1, func(x, e float64) (int, bool) { return williamsRVote(x-e, x-5) }},
		{"williams_r_14", "overbought", -1, func(x, e float64) (int, bool) { return williamsRVote(x+e, x+5) }},
		{"ultimate_oscillator_7_14_28", "buy", 1, func(x, e float64) (int, bool) { return ultimateVote(x + e) }},
		{"ultimate_oscillator_7_14_28", "sell", -1, func(x, e float64) (int, bool) { return ultimateVote(x - e) }},
	}
	for _, c := range cases {
		x := param(t, c.factor, c.param)
		if v, ok := c.vote(x, 1e-9); !ok || v != c.want {
			t.Errorf("%s just past %s = %v: vote %d, want %d", c.factor, c.param, x, v, c.want)
		}
		if v, ok := c.vote(x, 0); !ok || v != 0 {
			t.Errorf("%s at %s = %v: vote %d, want 0 (the thresholds are strict)", c.factor, c.param, x, v)
		}
	}
	vr := CurrentMethod().Rules.Verdict
	for _, c := range []struct {
		prev    Verdict
		overall int
		want    Verdict
	}{
		{"", vr.GrowthEnter, VerdictGrowth}, {"", vr.GrowthEnter - 1, VerdictNeutral},
		{"", vr.DeclineEnter, VerdictDecline}, {"", vr.DeclineEnter + 1, VerdictNeutral},
		{VerdictGrowth, vr.GrowthHold + 1, VerdictGrowth}, {VerdictGrowth, vr.GrowthHold, VerdictNeutral},
		{VerdictDecline, vr.DeclineHold - 1, VerdictDecline}, {VerdictDecline, vr.DeclineHold, VerdictNeutral},
	} {
		if got := DecideVerdict(c.prev, c.overall); got != c.want {
			t.Errorf("DecideVerdict(%q, %d) = %s, want %s", c.prev, c.overall, got, c.want)
		}
	}
}

func TestScoreCarriesTheCurrentVersion(t *testing.T) {
	t.Parallel()
	res, err := Score(Input{Symbol: "X", Candles: walk(RecommendedCandles, 1, 0, 0.01)})
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelVersion != CurrentVersion().Name || res.Localize(DefaultLang).ModelVersion != res.ModelVersion {
		t.Fatalf("model version %q, report %q, want %q", res.ModelVersion, res.Localize(DefaultLang).ModelVersion, CurrentVersion().Name)
	}
}

func TestMethodologyServesEarlierVersionsAsPublished(t *testing.T) {
	t.Parallel()
	old := currentRules()
	old.Verdict.GrowthEnter = 25
	versions := []Version{
		{Name: "v1", Fingerprint: old.Fingerprint(), Changelog: "first"},
		{Name: "v2", Fingerprint: currentRules().Fingerprint(), Changelog: "growth from 20"},
	}
	got, err := methodology(versions, currentRules(), map[string]Method{"v1": {Rules: old}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "v1" || got[0].Rules.Verdict.GrowthEnter != 25 || got[1].Name != "v2" ||
		got[1].Rules.Verdict.GrowthEnter != GrowthEnter {
		t.Fatalf("methodology = %+v", got)
	}
	if _, err := methodology(versions, currentRules(), nil); err == nil {
		t.Error("an unpublished earlier version was accepted")
	}
	if _, err := methodology(versions, currentRules(), map[string]Method{"v1": {Rules: currentRules()}}); err == nil {
		t.Error("earlier rules that do not hash to their fingerprint were accepted")
	}
}

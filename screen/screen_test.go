package screen

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

func intp(v int) *int { return &v }

// testAsset is a crypto asset scored in swing and scalp, with a row.
func testAsset() *Asset {
	swing := &analytics.Result{OverallScore: 45, TechnicalScore: 50, FundamentalScore: intp(25), Verdict: analytics.VerdictGrowth, ModelVersion: "v1",
		Scenario: analytics.Scenario{Support: 90, Resistance: 110, LastClose: 100},
		Factors: []analytics.Factor{
			{Name: "rsi_14", Value: "28.5", Sentiment: analytics.Bullish, Weight: 0.05, Group: analytics.GroupOscillator},
			{Name: "ichimoku_9_26_52", Value: "101.2 / 99.8", Sentiment: analytics.Neutral, Weight: 0.04, Group: analytics.GroupMA},
		}}
	scalp := &analytics.Result{OverallScore: -30, TechnicalScore: -30, Verdict: analytics.VerdictDecline, ModelVersion: "v1"}
	a := NewAsset("crypto", "BTC_USDT", &domain.Ticker{Symbol: "BTC_USDT", Price: 100, ChangePct: -2.5, Volume: 5e9},
		map[analytics.Style]*analytics.Result{"": swing, analytics.Scalp: scalp})
	a.Exchange = "binance"
	return a
}

func TestEval(t *testing.T) {
	t.Parallel()
	a := testAsset()
	noRow := NewAsset("stocks", "AAPL", nil, map[analytics.Style]*analytics.Result{analytics.Swing: {OverallScore: 5, Verdict: analytics.VerdictNeutral}})
	tests := []struct {
		market, style, expr string
		asset               *Asset
		want                bool
		read                map[string]any
	}{
		{"crypto", "", `overall_score > 40`, a, true, map[string]any{"overall_score": int64(45)}},
		{"crypto", "", `overall_score > 40.5`, a, true, map[string]any{"overall_score": int64(45)}},
		{"crypto", "", `technical_score == 50 && verdict == "growth"`, a, true, map[string]any{"technical_score": int64(50), "verdict": "growth"}},
		{"crypto", "", `price > 99 && change_pct < -2 && volume >= 5e9`, a, true, map[string]any{"price": 100.0, "change_pct": -2.5, "volume": 5e9}},
		{"crypto", "", `symbol == "BTC_USDT" && exchange == "binance" && market == "crypto"`, a, true,
			map[string]any{"symbol": "BTC_USDT", "exchange": "binance", "market": "crypto"}},
		{"crypto", "", `fundamental_score != null && fundamental_score > 20`, a, true, map[string]any{"fundamental_score": int64(25)}},
		{"crypto", "", `scenario.last_close > scenario.support && scenario.resistance == 110.0`, a, true,
			map[string]any{"scenario.last_close": 100.0, "scenario.support": 90.0, "scenario.resistance": 110.0}},
		{"crypto", "", `factors.rsi_14.value < 30 && factors.rsi_14.sentiment == "bullish" && factors.rsi_14.weight > 0.01 && factors.rsi_14.group == "oscillator"`, a, true,
			map[string]any{"factors.rsi_14.value": 28.5, "factors.rsi_14.sentiment": "bullish", "factors.rsi_14.weight": 0.05, "factors.rsi_14.group": "oscillator"}},
		// A reading that is not one number: value is null, value_text the text.
		{"crypto", "", `factors.ichimoku_9_26_52.value == null && factors.ichimoku_9_26_52.value_text.startsWith("101")`, a, true,
			map[string]any{"factors.ichimoku_9_26_52.value": nil, "factors.ichimoku_9_26_52.value_text": "101.2 / 99.8"}},
		// An absent factor: equality is false, an ordering does not match.
		{"crypto", "", `factors.pattern_hammer.sentiment == "bullish"`, a, false, map[string]any{"factors.pattern_hammer.sentiment": nil}},
		{"crypto", "", `factors.pattern_hammer.sentiment != "bullish"`, a, true, map[string]any{"factors.pattern_hammer.sentiment": nil}},
		{"crypto", "", `factors.pattern_hammer.value < 3`, a, false, map[string]any{"factors.pattern_hammer.value": nil}},
		// Styles: prefixed, unprefixed in the program's style, a style not scored.
		{"crypto", "", `swing.verdict == "growth" && scalp.overall_score < -20`, a, true, map[string]any{"swing.verdict": "growth", "scalp.overall_score": int64(-30)}},
		{"crypto", "scalp", `verdict == "decline" && swing.verdict == "growth"`, a, true, map[string]any{"verdict": "decline", "swing.verdict": "growth"}},
		{"crypto", "", `position.overall_score > -100`, a, false, map[string]any{"position.overall_score": nil}},
		{"crypto", "", `position.overall_score > -100 || overall_score > 0`, a, true, map[string]any{"position.overall_score": nil, "overall_score": int64(45)}},
		{"crypto", "", `position.overall_score > -100 && overall_score < 0`, a, false, map[string]any{"position.overall_score": nil, "overall_score": int64(45)}},
		// No row, no fundamentals: null.
		{"stocks", "", `price > 1`, noRow, false, map[string]any{"price": nil}},
		{"stocks", "", `volume == null && fundamental_score == null`, noRow, true, map[string]any{"volume": nil, "fundamental_score": nil}},
		{"stocks", "", `fundamental_score > 20 || overall_score == 5`, noRow, true, map[string]any{"fundamental_score": nil, "overall_score": int64(5)}},
		// The other markets are scored in swing whatever the style.
		{"stocks", "scalp", `overall_score == 5`, noRow, true, map[string]any{"overall_score": int64(5)}},
		// Errors of evaluation do not match.
		{"crypto", "", `overall_score / 0 == 1`, a, false, map[string]any{"overall_score": int64(45)}},
		{"crypto", "", `[1, 2, 3].exists(x, x == overall_score - 43)`, a, true, map[string]any{"overall_score": int64(45)}},
		{"crypto", "", `symbol.matches("^BTC_")`, a, true, map[string]any{"symbol": "BTC_USDT"}},
	}
	for _, tt := range tests {
		p, err := CompileStyle(tt.market, analytics.Style(tt.style), tt.expr)
		if err != nil {
			t.Errorf("CompileStyle(%s, %q): %v", tt.market, tt.expr, err)
			continue
		}
		got, read, err := p.Eval(tt.asset)
		if err != nil {
			t.Errorf("%q: Eval: %v", tt.expr, err)
		}
		if got != tt.want {
			t.Errorf("%q: matched %v, want %v", tt.expr, got, tt.want)
		}
		if d := cmp.Diff(tt.read, read); d != "" {
			t.Errorf("%q: read (-want +got):\n%s", tt.expr, d)
		}
		var names []string
		for n := range tt.read {
			names = append(names, n)
		}
		if d := cmp.Diff(names, p.Variables(), cmpSorted); d != "" {
			t.Errorf("%q: Variables (-want +got):\n%s", tt.expr, d)
		}
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("(", 40) + "true" + strings.Repeat(")", 40)
	tests := []struct {
		market, expr string
		want         ExprError // Message: a part of it
	}{
		{"crypto", `overall_score >`, ExprError{Kind: KindSyntax, Line: 1, Column: 16, Offset: 15, Message: "mismatched input"}},
		{"crypto", "verdict == \"growth\" &&\n  overall_score >> 3", ExprError{Kind: KindSyntax, Line: 2, Column: 18, Offset: 40, Message: "extraneous input '>'"}},
		{"crypto", `overall_score > "40"`, ExprError{Kind: KindType, Line: 1, Column: 15, Offset: 14, Message: "no matching overload for '_>_' applied to '(int, string)'"}},
		{"crypto", `rsi < 30`, ExprError{Kind: KindType, Line: 1, Column: 1, Offset: 0, Message: "undeclared reference to 'rsi'"}},
		{"crypto", `factors.rsi.sentiment == "bullish"`, ExprError{Kind: KindType, Line: 1, Column: 1, Message: "undeclared reference to 'factors'"}},
		{"stocks", `swing.verdict == "growth"`, ExprError{Kind: KindType, Line: 1, Column: 1, Message: "undeclared reference to 'swing'"}},
		{"crypto", `overall_score + 1`, ExprError{Kind: KindType, Line: 1, Column: 1, Message: "must be a condition (bool); it is int"}},
		{"crypto", ``, ExprError{Kind: KindSyntax, Message: "empty"}},
		{"crypto", "verdict == \"\xff\"", ExprError{Kind: KindSyntax, Message: "UTF-8"}},
		{"crypto", `overall_score > 1 && ` + strings.Repeat("x", MaxLength), ExprError{Kind: KindTooLong, Message: "at most 2048"}},
		{"crypto", deep, ExprError{Kind: KindTooDeep, Message: "recursion limit"}},
		{"crypto", `[1].all(x, [2].all(y, x < y))`, ExprError{Kind: KindTooDeep, Line: 1, Column: 19, Offset: 18, Message: "nesting"}},
		{"crypto", `[` + strings.Repeat(`symbol,`, 200) + `symbol].all(s, s.matches(symbol + symbol))`, ExprError{Kind: KindCost, Message: "estimated cost"}},
	}
	for _, tt := range tests {
		_, err := Compile(tt.market, tt.expr)
		xe, ok := IsExprError(err)
		if !ok {
			t.Errorf("Compile(%q) = %v, want an ExprError", tt.expr, err)
			continue
		}
		got := *xe
		if !strings.Contains(got.Message, tt.want.Message) {
			t.Errorf("Compile(%q): message %q, want it to contain %q", tt.expr, got.Message, tt.want.Message)
		}
		got.Message = tt.want.Message
		if tt.want.Offset == 0 && tt.want.Line != 0 {
			got.Offset = 0
		}
		if got != tt.want {
			t.Errorf("Compile(%q) = %+v, want %+v", tt.expr, got, tt.want)
		}
		if xe.Error() == "" || !strings.Contains(xe.Error(), tt.want.Kind) {
			t.Errorf("Compile(%q).Error() = %q, want its kind", tt.expr, xe.Error())
		}
	}
}

func TestCompileUnknownMarketOrStyle(t *testing.T) {
	t.Parallel()
	if _, err := Compile("bonds", `true`); err == nil {
		t.Error("an unknown market compiled")
	} else if _, ok := IsExprError(err); ok {
		t.Errorf("an unknown market is an ExprError: %v", err)
	}
	if _, err := CompileStyle("crypto", "weekly", `true`); err == nil {
		t.Error("an unknown style compiled")
	}
}

func TestEvalCostLimit(t *testing.T) {
	t.Parallel()
	// Within the estimate, past a runtime limit lowered for the test.
	p, err := compile("crypto", analytics.DefaultStyle, `[1, 2, 3, 4, 5, 6, 7, 8].all(x, x < overall_score)`, 10)
	if err != nil {
		t.Fatal(err)
	}
	matched, read, err := p.Eval(testAsset())
	var xe *ExprError
	if !errors.As(err, &xe) || xe.Kind != KindCost || matched {
		t.Fatalf("Eval = %v, %v, want a cost ExprError", matched, err)
	}
	if read["overall_score"] != int64(45) {
		t.Errorf("read = %v", read)
	}
	// The same expression within the real limit.
	p, err = Compile("crypto", `[1, 2, 3, 4, 5, 6, 7, 8].all(x, x < overall_score)`)
	if err != nil {
		t.Fatal(err)
	}
	if matched, _, err := p.Eval(testAsset()); err != nil || !matched {
		t.Fatalf("Eval = %v, %v", matched, err)
	}
}

// TestEvalWithoutTheTrackerWithinTheEstimate: a program whose estimate
// bounds its cost runs without the runtime cost tracker; an asset with a
// string longer than the estimate assumed is evaluated with it, and the
// answers are the same either way.
func TestEvalWithoutTheTrackerWithinTheEstimate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr  string
		fast  bool
		long  bool // the answer for the long symbol
		short bool // for BTC_USDT
	}{
		{`symbol.contains("Q") || overall_score > 1000`, true, true, false},
		{`!(symbol.endsWith("_USDT") && overall_score > 40)`, true, false, false},
		{`symbol.size() > 64 && verdict == "growth"`, true, true, false},
		{`[1, 2, 3, 4, 5, 6, 7, 8].all(x, x < overall_score)`, true, true, true},
	} {
		p, err := Compile("crypto", c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if p.bounded != c.fast {
			t.Errorf("%s: without the tracker %v, want %v", c.expr, p.bounded, c.fast)
		}
		short := testAsset()
		long := testAsset()
		long.Symbol = strings.Repeat("Q", 200) + "_USDT"
		for _, a := range []struct {
			asset *Asset
			want  bool
		}{{short, c.short}, {long, c.long}} {
			got, err := p.Match(a.asset)
			if err != nil || got != a.want {
				t.Errorf("%s over %.12s…: %v, %v; want %v", c.expr, a.asset.Symbol, got, err, a.want)
			}
			got = false
			if err := p.MatchTable(NewTable([]*Asset{a.asset}), nil, func(int) { got = true }); err != nil || got != a.want {
				t.Errorf("%s over %.12s… (MatchTable): %v, %v; want %v", c.expr, a.asset.Symbol, got, err, a.want)
			}
		}
	}
	// Lowered below its estimate, the limit keeps the tracker.
	p, err := compile("crypto", analytics.DefaultStyle, `[1, 2, 3, 4, 5, 6, 7, 8].all(x, x < overall_score)`, 10)
	if err != nil || p.bounded {
		t.Fatalf("compile with a limit under the estimate: fast %v, %v", p != nil && p.bounded, err)
	}
}

func TestProgramAccessors(t *testing.T) {
	t.Parallel()
	p, err := CompileStyle("crypto", analytics.Scalp, `overall_score < 0 && swing.overall_score > 0`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Market() != "crypto" || p.Style() != analytics.Scalp || p.String() != `overall_score < 0 && swing.overall_score > 0` {
		t.Errorf("Market %q Style %q String %q", p.Market(), p.Style(), p.String())
	}
	a := testAsset()
	if got := p.Value(a, "overall_score"); got != int64(-30) {
		t.Errorf("Value(overall_score) = %v, want the scalp score", got)
	}
	if got := p.Value(a, "price"); got != 100.0 {
		t.Errorf("Value(price) = %v, a name the expression does not read", got)
	}
	if got := p.Value(a, "nope"); got != nil {
		t.Errorf("Value(nope) = %v", got)
	}
}

func TestVariables(t *testing.T) {
	t.Parallel()
	crypto, stocks := Variables("crypto"), Variables("stocks")
	if Variables("bonds") != nil {
		t.Error("variables of an unknown market")
	}
	perStyle := len(reportFields) + len(analytics.FactorNames)*len(factorFields)
	if want := len(assetFields) + perStyle; len(stocks) != want {
		t.Errorf("stocks has %d variables, want %d", len(stocks), want)
	}
	if want := len(assetFields) + perStyle*(1+len(analytics.Styles)); len(crypto) != want {
		t.Errorf("crypto has %d variables, want %d", len(crypto), want)
	}
	// Every documented example compiles and reads its variable.
	for _, v := range append(Documented(), crypto...) {
		if v.Example == "" || v.Type == "" || v.Doc == "" {
			t.Errorf("%s: undocumented: %+v", v.Name, v)
			continue
		}
		market := "stocks"
		if v.Style != "" {
			market = "crypto"
		}
		p, err := Compile(market, v.Example)
		if err != nil {
			t.Errorf("%s: example %q: %v", v.Name, v.Example, err)
			continue
		}
		if !strings.HasPrefix(v.Name, "factors.") && !strings.Contains(v.Name, ".factors.") && !contains(p.Variables(), v.Name) {
			t.Errorf("%s: example %q reads %v", v.Name, v.Example, p.Variables())
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestAssetReport(t *testing.T) {
	t.Parallel()
	a := testAsset()
	if a.Report("") == nil || a.Report("") != a.Report(analytics.Swing) || a.Report(analytics.Position) != nil || a.Report("weekly") != nil {
		t.Error("Report does not answer the styles set")
	}
	a.SetReport(analytics.Scalp, nil)
	if a.Report(analytics.Scalp) != nil {
		t.Error("SetReport(nil) kept the report")
	}
}

package screen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// The direct evaluator answers as cel-go does, over an asset and over a
// Table's columns: random expressions of
// every shape it translates (and some it does not), over random assets
// with nulls, absent styles, NaN, infinities, int extremes, unparsable
// readings, duplicate factors and strings over the cost estimate's size,
// each evaluated by the direct form and by cel-go alone.
func TestDirectEqualsCEL(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	assets := randomAssets(rng, 60)
	table := NewTable(assets)
	const exprs = 4000
	translated, refused, matched := 0, 0, 0
	for n := 0; n < exprs; n++ {
		g := exprGen{rng: rng}
		expr := g.boolean(4)
		style := analytics.Styles[rng.IntN(len(analytics.Styles))]
		p, err := compileWith("crypto", style, expr, MaxEvalCost, nil) // in full: no shape's template
		if err != nil {
			refused++
			continue
		}
		if p.direct == nil {
			continue
		}
		translated++
		matched += sameAsCEL(t, p, expr, style, assets, table)
	}
	t.Logf("%d expressions: %d refused by the checker, %d translated; %d matches", exprs, refused, translated, matched)
	// The test means something only if most expressions run both ways,
	// and both answers occur.
	if translated < exprs/2 || matched == 0 || matched == translated*len(assets) {
		t.Fatalf("translated %d of %d, matched %d", translated, exprs, matched)
	}
}

// sameAsCEL checks that p (of expr, in style) answers as cel-go does over
// every asset, one at a time and over the table; it returns the matches.
func sameAsCEL(t *testing.T, p *Program, expr string, style analytics.Style, assets []*Asset, table *Table) int {
	t.Helper()
	if err := p.planned(); err != nil {
		t.Fatalf("%q: cel-go's plan: %v", expr, err)
	}
	viaCEL := *p
	viaCEL.direct = nil
	inTable := map[int]bool{}
	if err := p.MatchTable(table, nil, func(i int) { inTable[i] = true }); err != nil {
		t.Fatalf("%q over the table: %v", expr, err)
	}
	inScored := map[int]bool{}
	si := slices.Index(analytics.Styles, style)
	if err := p.MatchTable(table, table.Scored(style), func(i int) { inScored[i] = true }); err != nil {
		t.Fatalf("%q over the table's assets scored in %s: %v", expr, style, err)
	}
	matched := 0
	for i, a := range assets {
		got, gerr := p.Match(a)
		want, werr := viaCEL.Match(a)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("%q over %s: direct %v (%v), cel-go %v (%v)", expr, describe(a), got, gerr, want, werr)
		}
		if inTable[i] != want {
			t.Fatalf("%q over %s: over the table %v, cel-go %v", expr, describe(a), inTable[i], want)
		}
		if inScored[i] != (want && a.reports[si] != nil) {
			t.Fatalf("%q over %s: over the assets scored in %s %v, cel-go %v", expr, describe(a), style, inScored[i], want)
		}
		if got {
			matched++
		}
	}
	return matched
}

// Expressions the direct form does not translate still run, on cel-go.
func TestDirectLeavesTheRestToCEL(t *testing.T) {
	t.Parallel()
	a := testAsset()
	for _, c := range []struct {
		expr   string
		direct bool
		want   bool
	}{
		{`verdict == "growth" && factors.rsi_14.value < 30`, true, true},
		{`verdict in ["growth", "neutral"] && -overall_score < 0`, true, true},
		{`symbol.endsWith("_USDT") && size(symbol) == 8`, true, true},
		{`symbol.matches("^BTC")`, false, true},
		{`[1, 2].exists(x, x == 2)`, false, true},
		{`int(45u) == overall_score`, false, true},
		{`double(overall_score) > 44.5`, false, true},
	} {
		p, err := Compile("crypto", c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if (p.direct != nil) != c.direct {
			t.Errorf("%s: translated %v, want %v", c.expr, p.direct != nil, c.direct)
		}
		if got, err := p.Match(a); err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
}

func describe(a *Asset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s row=%+v", a.Symbol, a.Row)
	for i, r := range a.reports {
		if r != nil {
			fmt.Fprintf(&b, " %s={score %d/%d fund %v verdict %q factors %+v}", analytics.Styles[i], r.OverallScore, r.TechnicalScore,
				r.FundamentalScore, r.Verdict, r.Factors)
		}
	}
	return b.String()
}

var (
	genInts    = []int64{0, 1, -1, 2, 3, 30, 45, 100, -100, math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, 1 << 53, 1<<53 + 1}
	genDoubles = []float64{0, math.Copysign(0, -1), 0.5, 1, -1, 2, 28.5, 30, 45, 70.1, 100, 1e9, -1e300, 1e300,
		math.Inf(1), math.Inf(-1), math.NaN(), 9.223372036854775807e18, 1 << 53}
	genStrings = []string{"", "growth", "neutral", "decline", "bullish", "bearish", "BTC_USDT", "BTC", "_USDT", "binance",
		"oscillator", "v1", "28.5", "é", strings.Repeat("x", 70)}
	genFactors = []string{"rsi_14", "macd_12_26_9", "ichimoku_9_26_52", "sma_10", "pattern_hammer", "funding_rate"}
)

func randomAssets(rng *rand.Rand, n int) []*Asset {
	assets := make([]*Asset, n)
	for i := range assets {
		assets[i] = randomAsset(rng, i)
	}
	return assets
}

func randomAsset(rng *rand.Rand, i int) *Asset {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	symbol := pick([]string{"BTC_USDT", "ETH_USDT", "X", strings.Repeat("LONG", 20)})
	var row *domain.Ticker
	if rng.IntN(4) > 0 {
		row = &domain.Ticker{Symbol: symbol, Price: genDoubles[rng.IntN(len(genDoubles))],
			ChangePct: genDoubles[rng.IntN(len(genDoubles))], Volume: genDoubles[rng.IntN(len(genDoubles))]}
	}
	reports := map[analytics.Style]*analytics.Result{}
	for _, st := range analytics.Styles {
		if rng.IntN(5) == 0 {
			continue
		}
		r := &analytics.Result{OverallScore: int(genInts[rng.IntN(len(genInts))]), TechnicalScore: rng.IntN(201) - 100,
			Verdict: analytics.Verdict(pick(genStrings)), ModelVersion: pick([]string{"v1", "v2", strings.Repeat("m", 65)}),
			Scenario: analytics.Scenario{Support: genDoubles[rng.IntN(len(genDoubles))], Resistance: float64(rng.IntN(200)),
				LastClose: genDoubles[rng.IntN(len(genDoubles))]}}
		if rng.IntN(2) == 0 {
			r.FundamentalScore = intp(rng.IntN(201) - 100)
		}
		for k := rng.IntN(6); k > 0; k-- {
			value := pick([]string{"28.5", "NaN", "Inf", "-0", "abc", "", "1e309", "101.2 / 99.8", "70", strconv.Itoa(rng.IntN(100))})
			r.Factors = append(r.Factors, analytics.Factor{Name: pick(genFactors), Value: value, Sentiment: analytics.Sentiment(pick(genStrings)),
				Weight: genDoubles[rng.IntN(len(genDoubles))], Group: pick(genStrings)})
		}
		reports[st] = r
	}
	a := NewAsset("crypto", symbol, row, reports)
	a.Exchange = pick([]string{"binance", "bybit", ""})
	if i%2 == 0 {
		a.Index() // half find their factors by the tables, half by a scan
	}
	return a
}

// exprGen writes random well-typed (mostly) crypto expressions.
type exprGen struct{ rng *rand.Rand }

func (g exprGen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

func (g exprGen) prefix() string {
	return g.pick("", "", "swing.", "scalp.", "position.", "intraday.")
}

func (g exprGen) boolean(depth int) string {
	if depth <= 0 {
		return g.comparison(1)
	}
	switch g.rng.IntN(9) {
	case 0, 1:
		return "(" + g.boolean(depth-1) + " && " + g.boolean(depth-1) + ")"
	case 2, 3:
		return "(" + g.boolean(depth-1) + " || " + g.boolean(depth-1) + ")"
	case 4:
		return "!(" + g.boolean(depth-1) + ")"
	case 5:
		return "(" + g.boolean(depth-1) + " ? " + g.boolean(depth-1) + " : " + g.boolean(depth-1) + ")"
	case 6:
		return g.pick("true", "false")
	}
	return g.comparison(depth - 1)
}

func (g exprGen) comparison(depth int) string {
	op := g.pick("<", "<=", ">", ">=", "==", "!=")
	switch g.rng.IntN(9) {
	case 0, 1:
		return g.double(depth) + " " + op + " " + g.number(depth)
	case 2:
		return g.integer(depth) + " " + op + " " + g.number(depth)
	case 3:
		return g.str(depth) + " " + op + " " + g.str(depth)
	case 4:
		return g.str(depth) + "." + g.pick("contains", "startsWith", "endsWith") + "(" + g.str(0) + ")"
	case 5:
		return g.nullable() + " " + g.pick("==", "!=") + " null"
	case 6:
		var els []string
		lhs, lit := g.double(depth), g.doubleLit
		if g.rng.IntN(2) == 0 {
			lhs, lit = g.integer(depth), g.intLit
		}
		for k := g.rng.IntN(4); k > 0; k-- {
			els = append(els, lit())
		}
		if g.rng.IntN(5) == 0 {
			// a list of mixed types (list(dyn)), int and double
			els = append(els, g.pick(g.doubleLit(), g.intLit()))
		}
		return lhs + " in [" + strings.Join(els, ", ") + "]"
	case 7:
		var els []string
		for k := g.rng.IntN(4); k > 0; k-- {
			els = append(els, strconv.Quote(genStrings[g.rng.IntN(len(genStrings))]))
		}
		if g.rng.IntN(4) == 0 {
			els = append(els, "null")
		}
		return g.str(depth) + " in [" + strings.Join(els, ", ") + "]"
	}
	return "(" + g.boolean(0) + ") " + g.pick("==", "!=", "<", ">=") + " " + g.pick("true", "false")
}

func (g exprGen) number(depth int) string {
	if g.rng.IntN(2) == 0 {
		return g.double(depth)
	}
	return g.integer(depth)
}

func (g exprGen) double(depth int) string {
	if depth > 0 && g.rng.IntN(3) == 0 {
		switch g.rng.IntN(3) {
		case 0:
			return "(" + g.double(depth-1) + " " + g.pick("+", "-", "*", "/") + " " + g.double(depth-1) + ")"
		case 1:
			return "-" + g.double(depth-1)
		}
		return "(" + g.boolean(0) + " ? " + g.double(depth-1) + " : " + g.double(depth-1) + ")"
	}
	if g.rng.IntN(3) == 0 {
		return g.doubleLit()
	}
	switch g.rng.IntN(3) {
	case 0:
		return g.pick("price", "change_pct", "volume")
	case 1:
		return g.prefix() + g.pick("scenario.support", "scenario.resistance", "scenario.last_close")
	}
	return g.prefix() + "factors." + genFactors[g.rng.IntN(len(genFactors))] + "." + g.pick("value", "weight")
}

func (g exprGen) integer(depth int) string {
	if depth > 0 && g.rng.IntN(3) == 0 {
		switch g.rng.IntN(3) {
		case 0:
			return "(" + g.integer(depth-1) + " " + g.pick("+", "-", "*", "/", "%") + " " + g.integer(depth-1) + ")"
		case 1:
			return "-" + g.integer(depth-1)
		}
		return "size(" + g.str(depth-1) + ")"
	}
	if g.rng.IntN(3) == 0 {
		return g.intLit()
	}
	return g.prefix() + g.pick("overall_score", "technical_score", "fundamental_score")
}

func (g exprGen) str(depth int) string {
	if g.rng.IntN(3) == 0 {
		return strconv.Quote(genStrings[g.rng.IntN(len(genStrings))])
	}
	if g.rng.IntN(3) == 0 {
		return g.pick("symbol", "exchange", "market")
	}
	if g.rng.IntN(2) == 0 {
		return g.prefix() + g.pick("verdict", "model_version")
	}
	return g.prefix() + "factors." + genFactors[g.rng.IntN(len(genFactors))] + "." + g.pick("value_text", "sentiment", "group")
}

func (g exprGen) nullable() string {
	switch g.rng.IntN(3) {
	case 0:
		return g.pick("price", "volume", "change_pct")
	case 1:
		return g.prefix() + "fundamental_score"
	}
	return g.prefix() + "factors." + genFactors[g.rng.IntN(len(genFactors))] + "." + g.pick("value", "value_text", "sentiment", "weight")
}

func (g exprGen) intLit() string {
	v := genInts[g.rng.IntN(len(genInts))]
	if v == math.MinInt64 {
		return "(-9223372036854775807 - 1)"
	}
	return strconv.FormatInt(v, 10)
}

func (g exprGen) doubleLit() string {
	v := genDoubles[g.rng.IntN(len(genDoubles))]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return g.pick("0.0/0.0", "1.0/0.0", "-1.0/0.0")
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// A table's values of a variable are the asset's (Program.Field), texts
// over the estimate's size included.
func TestTableValuesAreTheFields(t *testing.T) {
	t.Parallel()
	assets := randomAssets(rand.New(rand.NewPCG(3, 4)), 200)
	table := NewTable(assets)
	p, err := CompileStyle("crypto", analytics.Scalp, "true")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"symbol", "price", "overall_score", "fundamental_score", "verdict", "model_version",
		"swing.factors.rsi_14.value", "factors.macd_12_26_9.sentiment", "position.scenario.support"} {
		values, ok := p.TableValues(table, name)
		field, _ := p.Field(name)
		if !ok {
			t.Fatalf("%s: no values", name)
		}
		for i, a := range assets {
			got, want := values(i), field(a)
			var back any
			switch {
			case got.Null:
			case got.Text:
				back = got.Str
			default:
				back = got.Num
				if w, isInt := want.(int64); isInt {
					want = float64(w)
				}
			}
			if fmt.Sprint(back) != fmt.Sprint(want) {
				t.Fatalf("%s of %s: table %+v, field %v", name, describe(a), got, want)
			}
		}
	}
	if _, ok := p.TableValues(table, "nope"); ok {
		t.Error("a name that is not a variable has values")
	}
}

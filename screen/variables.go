package screen

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// Variable is one name an expression can read.
type Variable struct {
	// Name as written in an expression: "overall_score",
	// "swing.factors.rsi_14.sentiment".
	Name string
	// Type is the CEL type as documented: "int", "double", "string",
	// "double or null", ...
	Type string
	// Doc says what the value is; Example is an expression reading it.
	Doc, Example string
	// Style is the style whose report the value comes from: "" for the
	// program's style (an unprefixed report field), or a fixed style;
	// none for the asset's own fields (AssetField).
	Style analytics.Style
	// AssetField: the value is the asset's (symbol, price, ...), not a
	// report's.
	AssetField bool

	celType *cel.Type
	// load reads the value; st is the index in analytics.Styles of the
	// style read (-1 for an asset field), whose report the asset has.
	load loader
}

// text: the variable holds a string (or null).
func (v *Variable) text() bool {
	return v.celType == cel.StringType || v.celType == nullableString
}

// loader reads one variable of an asset (Variable.load).
type loader func(a *Asset, st int) dval

// field is a variable before its style prefix.
type field struct {
	name, typ, doc, example string
	celType                 *cel.Type
	load                    loader
}

var (
	nullableInt    = cel.NullableType(cel.IntType)
	nullableDouble = cel.NullableType(cel.DoubleType)
	nullableString = cel.NullableType(cel.StringType)
)

// assetFields are the asset's own fields: its identity and screener row.
var assetFields = []field{
	{"symbol", "string", "Canonical symbol", `symbol == "BTC_USDT"`, cel.StringType,
		func(a *Asset, _ int) dval { return dString(a.Symbol) }},
	{"market", "string", "Market: crypto, forex or stocks", `market == "crypto"`, cel.StringType,
		func(a *Asset, _ int) dval { return dString(string(a.Market)) }},
	{"exchange", "string", "Exchange whose candles were scored", `exchange == "binance"`, cel.StringType,
		func(a *Asset, _ int) dval { return dString(a.Exchange) }},
	{"price", "double or null", "Last price in the quote currency (screener row); null without a row", `price > 100`, nullableDouble,
		rowValue(func(t *domain.Ticker) float64 { return t.Price })},
	{"change_pct", "double or null", "Percent change over 24 hours (screener row); null without a row", `change_pct < -5`, nullableDouble,
		rowValue(func(t *domain.Ticker) float64 { return t.ChangePct })},
	{"volume", "double or null", "24-hour volume in the quote currency (screener row); null without a row", `volume >= 1e9`, nullableDouble,
		rowValue(func(t *domain.Ticker) float64 { return t.Volume })},
}

func rowValue(f func(*domain.Ticker) float64) loader {
	return func(a *Asset, _ int) dval {
		if a.Row == nil {
			return dNull
		}
		return dDouble(f(a.Row))
	}
}

// reportValue reads a field of the style's report.
func reportValue(f func(r *analytics.Result) dval) loader {
	return func(a *Asset, st int) dval { return f(a.reports[st]) }
}

// reportFields are the fields of one style's report.
var reportFields = []field{
	{"overall_score", "int", "Overall score, -100..100", `overall_score >= 40`, cel.IntType,
		reportValue(func(r *analytics.Result) dval { return dInt(int64(r.OverallScore)) })},
	{"technical_score", "int", "Technical score, -100..100", `technical_score > 50`, cel.IntType,
		reportValue(func(r *analytics.Result) dval { return dInt(int64(r.TechnicalScore)) })},
	{"fundamental_score", "int or null", "Fundamental score, -100..100; null without fundamental data", `fundamental_score != null && fundamental_score > 20`, nullableInt,
		reportValue(func(r *analytics.Result) dval {
			if r.FundamentalScore == nil {
				return dNull
			}
			return dInt(int64(*r.FundamentalScore))
		})},
	{"verdict", "string", "Verdict: growth, neutral or decline", `verdict == "growth"`, cel.StringType,
		reportValue(func(r *analytics.Result) dval { return dString(string(r.Verdict)) })},
	{"model_version", "string", "Version of the scoring method that made the report", `model_version == "v1"`, cel.StringType,
		reportValue(func(r *analytics.Result) dval { return dString(r.ModelVersion) })},
	{"scenario.support", "double", "Support level of the scenario", `price < scenario.support * 1.02`, cel.DoubleType,
		reportValue(func(r *analytics.Result) dval { return dDouble(r.Scenario.Support) })},
	{"scenario.resistance", "double", "Resistance level of the scenario", `price > scenario.resistance`, cel.DoubleType,
		reportValue(func(r *analytics.Result) dval { return dDouble(r.Scenario.Resistance) })},
	{"scenario.last_close", "double", "Close of the last candle scored", `scenario.last_close > scenario.resistance`, cel.DoubleType,
		reportValue(func(r *analytics.Result) dval { return dDouble(r.Scenario.LastClose) })},
}

// factorFields are the fields of one factor, named factors.<name>.<field>.
var factorFields = []struct {
	name, typ, doc string
	celType        *cel.Type
	// load is the loader of the field of factor FactorNames[n].
	load func(n int) loader
}{
	{"value", "double or null", "The indicator's reading; null when the factor is absent or its reading is not one number", nullableDouble,
		factorField(func(f *analytics.Factor) dval {
			v, err := strconv.ParseFloat(f.Value, 64)
			if err != nil {
				return dNull
			}
			return dDouble(v)
		})},
	{"value_text", "string or null", "The reading as the report writes it", nullableString,
		factorField(func(f *analytics.Factor) dval { return dString(f.Value) })},
	{"sentiment", "string or null", "bullish, bearish or neutral", nullableString,
		factorField(func(f *analytics.Factor) dval { return dString(string(f.Sentiment)) })},
	{"weight", "double or null", "The factor's share of the overall score, 0..1", nullableDouble,
		factorField(func(f *analytics.Factor) dval { return dDouble(f.Weight) })},
	{"group", "string or null", "ma, oscillator, pattern, volume or fundamental", nullableString,
		factorField(func(f *analytics.Factor) dval { return dString(f.Group) })},
}

// factorField is the loader of a field of factor FactorNames[n]: null
// when the report has no such factor.
func factorField(get func(f *analytics.Factor) dval) func(n int) loader {
	return func(n int) loader {
		name := analytics.FactorNames[n]
		return func(a *Asset, st int) dval {
			r := a.reports[st]
			if t := a.tabs[st]; t != nil {
				if i := t.pos[n]; i >= 0 {
					return get(&r.Factors[i])
				}
				return dNull
			}
			for i := range r.Factors {
				if r.Factors[i].Name == name {
					return get(&r.Factors[i])
				}
			}
			return dNull
		}
	}
}

// factorExample is an example per factor field.
var factorExample = map[string]string{
	"value":      `factors.rsi_14.value < 30`,
	"value_text": `factors.ichimoku_9_26_52.value_text != null`,
	"sentiment":  `factors.macd_12_26_9.sentiment == "bullish"`,
	"weight":     `factors.rsi_14.weight > 0.05`,
	"group":      `factors.funding_rate.group == "fundamental"`,
}

// factorTable is where each factor of a report is, by index in
// analytics.FactorNames (Asset.Index), so an expression finds a factor
// without a scan of the report's factors.
type factorTable struct {
	// pos is the factor's position in the report's Factors (the first of
	// that name), -1 when absent.
	pos []int16
}

var factorIndex = func() map[string]int {
	m := make(map[string]int, len(analytics.FactorNames))
	for i, n := range analytics.FactorNames {
		m[n] = i
	}
	return m
}()

func newFactorTable(r *analytics.Result) *factorTable {
	t := &factorTable{pos: make([]int16, len(analytics.FactorNames))}
	for i := range t.pos {
		t.pos[i] = -1
	}
	// A report lists its factors in FactorNames order (the scorer's), so
	// the next name is looked for where the last one was found first.
	next := 0
	for i := range r.Factors {
		if i > math.MaxInt16 {
			break
		}
		name := r.Factors[i].Name
		k := -1
		for j := next; j < len(analytics.FactorNames) && j < next+4; j++ {
			if analytics.FactorNames[j] == name {
				k = j
				break
			}
		}
		if k < 0 {
			var ok bool
			if k, ok = factorIndex[name]; !ok {
				continue
			}
		}
		next = k + 1
		if t.pos[k] < 0 {
			t.pos[k] = int16(i)
		}
	}
	return t
}

// styleFields is every report and factor field of one style, unprefixed.
func styleFields() []field {
	out := slices.Clone(reportFields)
	for n, name := range analytics.FactorNames {
		for _, ff := range factorFields {
			out = append(out, field{name: "factors." + name + "." + ff.name, typ: ff.typ, doc: ff.doc,
				example: factorExample[ff.name], celType: ff.celType, load: ff.load(n)})
		}
	}
	return out
}

// marketVariables is every variable of a market: the asset's fields, the
// report fields of the program's style, and in crypto those of each style
// under its name.
func marketVariables(m domain.Market) []Variable {
	var out []Variable
	for _, f := range assetFields {
		out = append(out, Variable{Name: f.name, Type: f.typ, Doc: f.doc, Example: f.example, AssetField: true, celType: f.celType, load: f.load})
	}
	fields := styleFields()
	for _, f := range fields {
		out = append(out, Variable{Name: f.name, Type: f.typ, Doc: f.doc, Example: f.example, celType: f.celType, load: f.load})
	}
	if m != domain.Crypto {
		return out
	}
	for _, st := range analytics.Styles {
		for _, f := range fields {
			ex := ""
			if f.example != "" {
				ex = prefixExample(string(st), f.name, f.example)
			}
			out = append(out, Variable{Name: string(st) + "." + f.name, Type: f.typ, Doc: f.doc + " (style " + string(st) + ")",
				Example: ex, Style: st, celType: f.celType, load: f.load})
		}
	}
	return out
}

// prefixExample rewrites the first use of name in example under style st.
func prefixExample(st, name, example string) string {
	for i := 0; i+len(name) <= len(example); i++ {
		if example[i:i+len(name)] == name && (i == 0 || !isIdentChar(example[i-1])) {
			return example[:i] + st + "." + example[i:]
		}
	}
	return example
}

func isIdentChar(c byte) bool {
	return c == '_' || c == '.' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// Variables lists the variables of a market's expressions, asset fields
// first, then the report fields (unprefixed, then per style in crypto).
// It returns nil for an unknown market.
func Variables(market string) []Variable {
	e, ok := envs[domain.Market(market)]
	if !ok {
		return nil
	}
	return slices.Clone(e.vars)
}

// Documented lists the variables worth a line in documentation: the asset
// and report fields and the fields of one factor (rsi_14), unprefixed; the
// other factors and the style prefixes follow the same pattern.
func Documented() []Variable {
	var out []Variable
	for _, v := range marketVariables(domain.Stocks) {
		if !strings.HasPrefix(v.Name, "factors.") || strings.HasPrefix(v.Name, "factors.rsi_14.") {
			out = append(out, v)
		}
	}
	return out
}

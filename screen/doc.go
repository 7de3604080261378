// Package screen compiles and evaluates the conditions clients write over
// an asset's precomputed analytics: the expressions of POST
// /screener/query and of alerts.
//
// The language is CEL (github.com/google/cel-go): typed, not
// Turing-complete, with a cost estimate before running and a cost limit
// while running. An expression is compiled once per market (Compile), its
// variables checked against the market's typed environment (Variables
// lists them), and evaluated per asset (Program.Eval) over an Asset built
// from the data the worker and the api already hold: the analytics
// results of each style and the screener row.
//
// # Variables
//
// The variables are the JSON names of the analytics report's and the
// screener row's fields:
//
//	symbol, market, exchange         string
//	price, change_pct, volume        double or null (the screener row's; null when the asset has no row)
//	overall_score, technical_score   int
//	fundamental_score                int or null (null without fundamental data)
//	verdict                          string: "growth", "neutral" or "decline"
//	model_version                    string
//	scenario.support, scenario.resistance, scenario.last_close   double
//	factors.<name>.value             double or null (null when the factor is absent or its value is not a number)
//	factors.<name>.value_text        string or null (the value as the report writes it)
//	factors.<name>.sentiment         string or null: "bullish", "bearish" or "neutral"
//	factors.<name>.weight            double or null (0..1)
//	factors.<name>.group             string or null
//
// <name> is one of analytics.FactorNames. In crypto, every report field
// also exists under each style's name (swing.verdict,
// scalp.factors.rsi_14.sentiment); an unprefixed report field means the
// program's style (Compile: analytics.DefaultStyle; CompileStyle: the one
// given). Other markets are scored in the default style only and have
// no prefixed names.
//
// # Missing values
//
// A value that may be missing is declared nullable: it is null when
// missing, and `fundamental_score != null` tests it. Equality with null
// is false (`factors.pattern_hammer.sentiment == "bullish"` is false when
// no hammer was found). An ordering or arithmetic on null is an error,
// and so is a report field of a style the asset was not scored in: an
// expression whose evaluation errors does not match that asset. `&&` and
// `||` decide when either side decides (`fundamental_score > 20 ||
// overall_score > 50` matches an asset without fundamentals whose
// overall score is 60).
//
// # Limits
//
// MaxLength, MaxDepth and MaxCost bound what Compile accepts; MaxEvalCost
// bounds one evaluation. Every refusal is an *ExprError with its Kind
// and position.
package screen

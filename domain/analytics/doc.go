// Package analytics turns an asset's candles (and optional fundamentals)
// into a scored, explained report: the technical score (TradingView's
// Technical Rating v3 votes plus candlestick patterns and volume
// confirmation), the fundamental score, the overall score, a verdict with
// hysteresis, a support/resistance scenario and a summary.
//
// Score returns a language-neutral Result, which the worker stores as JSON;
// Result.Localize renders it in one of six languages for the api. Every
// text is a Message (catalogue key plus pre-formatted arguments) so a
// stored result can be shown in any language later.
//
// The package is pure computation: it imports only the standard library,
// the domain package and domain/indicator.
package analytics

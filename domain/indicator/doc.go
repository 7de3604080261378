// Package indicator computes technical indicators and candlestick patterns
// over price series for the analytics engine.
//
// Every series function returns a slice as long as its input, oldest value
// first, with NaN where the indicator is not yet defined (its warm-up, e.g.
// the first n-1 bars of an n-bar SMA) or undefined (a division by zero, such
// as a Stochastic over a flat range). NaN plays the role of TradingView's
// `na`: comparisons with it are false, and windowed functions return NaN
// while a NaN is inside their window. This lets the rating rules in package
// analytics be written exactly as in TradingView's published Pine source.
//
// The definitions follow TradingView (users compare our values with their
// charts): EMA and the Wilder average (RMA) are seeded with the simple
// average of their first n values; RSI, ATR and DMI/ADX use Wilder
// smoothing seeded that way from the first bar, so they agree with
// TradingView from their first value instead of converging to it after
// ~150 bars as go-talib's versions do; CCI takes a single source series
// (TradingView's cci(close, 20)), not the typical price. go-talib is used
// where its output is the TradingView definition (EMA, WMA, momentum,
// Bollinger Bands, OBV); the other indicators are written here because
// go-talib maps a zero divisor to 0 instead of `na` or seeds differently.
//
// The package is pure computation: it imports only the standard library,
// the domain package and go-talib.
package indicator

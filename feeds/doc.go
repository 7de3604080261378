// Package feeds holds the market-data providers the worker's ingest tasks
// read from: a deterministic synthetic feed for demo mode, load tests and
// end-to-end tests, and adapters for real upstream APIs (Binance, OKX,
// Coinbase Exchange, OANDA, Alpaca).
//
// Every provider speaks canonical symbols (domain.NormalizeSymbol form:
// BTC_USDT, EUR_USD, AAPL) and returns only data that passed
// domain.Candle.Validate / domain.Ticker.Validate: bad upstream rows are
// logged and dropped (tickers) or turn the whole response into an error
// (candles), so nothing malformed reaches the store.
//
// The real adapters share one HTTP helper (see httpclient.go) that owns
// time-outs, bounded retries with exponential back-off on 5xx, 429 and
// network errors, Retry-After and the providers' rate-limit headers.
package feeds

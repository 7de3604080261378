// Package push follows the exchanges' public market-data websockets:
// Binance spot and USDⓈ-M combined streams (<symbol>@kline_<interval> and
// !miniTicker@arr) and OKX's candle and tickers channels. It turns their
// pushes into domain candles (with the exchange's closed flag) and tickers
// as they change; REST (package feeds) stays the source for backfill, for
// the gap a dropped connection leaves, and for whatever no push feed serves.
//
// "Push" is the service's word for what the exchanges push to it; "stream"
// is the clients' event stream (package stream, GET /stream) and nothing
// else. An exchange's own product keeps its name where it is quoted (Binance's
// market streams, OANDA's pricing stream, the stream hosts of
// MARKET_FEED_URLS).
//
// A Manager shards the series of each combination over connections within
// the documented per-connection limits, paces subscribe requests under the
// per-connection message rate, spaces connection attempts under the per-IP
// budget, reconnects with back-off, and after a reconnect asks the caller to
// repair each series' gap from the last candle the dropped connection
// delivered (fixed at the drop). A quiet connection is probed with a ping
// and dropped when it is half-open. Connections are replaced before the
// exchange's 24 h cut: the new one is subscribed and delivering before the
// old one is closed (a successor that is not, within ReadyTimeout, is
// given up and the old one kept), so the overlap delivers some updates
// twice and none never; consumers upsert, so a duplicate is free.
//
// Documented limits followed (as of 2026-11):
//   - Binance spot, https://github.com/binance/binance-spot-api-docs/blob/master/web-socket-streams.md:
//     wss://stream.binance.com:9443, ≤ 1,024 streams a connection, ≤ 5
//     incoming messages a second (pings, pongs and subscribe requests alike),
//     ≤ 300 connection attempts per 5 minutes per IP, 24 h connections,
//     a ping every 20 s to be answered with the same payload, and a
//     serverShutdown event asking for a new connection. The all-market
//     !ticker@arr stream is retired (CHANGELOG 2025-11-14, 2026-02-24):
//     !miniTicker@arr carries what the screener needs.
//   - Binance USDⓈ-M, https://developers.binance.com/docs/derivatives/usds-margined-futures/websocket-market-streams:
//     ≤ 200 streams a connection, ≤ 10 incoming messages a second, pings
//     every 3 minutes, 24 h connections; klines and tickers are "market"
//     streams served under wss://fstream.binance.com/market (the unrouted
//     legacy paths stopped carrying them on 2026-04-23).
//   - OKX, https://www.okx.com/docs-v5/en/#overview-websocket-connect:
//     candles on /ws/v5/business, tickers on /ws/v5/public; 3 connection
//     requests a second per IP, 480 subscribe/unsubscribe/login requests an
//     hour per connection, a subscribe request's channels ≤ 64 KB, and a
//     connection that carries nothing for 30 s is closed, so a text "ping"
//     is sent after 25 s of silence and answered by "pong". (The cap of 30
//     connections a channel is per sub-account, on private channels only.)
//   - Alpaca, https://docs.alpaca.markets/docs/streaming-market-data and
//     …/real-time-stock-pricing-data: one connection per plan to
//     wss://stream.data.alpaca.markets/v2/{iex,sip} (406 for a second),
//     authentication within 10 s, 30 symbols on the free plan (405
//     beyond), SIP on paid plans only (409). Alpaca pushes closed minute
//     bars, their corrections and the day's bar so far: an Alpaca source
//     (alpaca.go, alpacasource.go) carries every stock exchange's planned
//     symbols on its one connection; the other timeframes stay on REST.
//
// Candles are those of the followed timeframes as the exchange builds them;
// no timeframe is derived from another here.
//
// Local delivers the candles of a feed computed in process (the synthetic
// one) the same way, read at every minute close, and OandaPricing the
// screener rows of OANDA's pricing stream, a streaming HTTP response (not
// a websocket: oanda.go has its documented limits): all are a Source, so
// the consumer stores them through one path.
package push

package api

import (
	"net/http"

	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"
)

// docsHandler serves Swagger UI from assets embedded in the binary, so the
// docs page works with no request leaving the machine (no CDN, no
// validator badge).
func docsHandler() http.Handler {
	return v5emb.NewWithConfig(swgui.Config{
		Title:       "Market Screener and Analytics API",
		SwaggerJSON: "/openapi.json",
		BasePath:    "/docs/",
		SettingsUI: map[string]string{
			"validatorUrl": "null",
		},
	})("Market Screener and Analytics API", "/openapi.json", "/docs/")
}

const apiDescription = `Live screener data, OHLCV candles, technical and fundamental scores with verdicts
and factor breakdowns, historical statistics of those verdicts, and signed webhooks when a verdict changes.

Every request carries the header ` + "`X-API-Key`" + ` with the key issued to your organisation.

**Event stream.** ` + "`GET /stream`" + ` is a resumable Server-Sent Events stream of verdict changes and screener
refreshes: every event has an id, and reconnecting with ` + "`Last-Event-ID`" + ` sends what you missed (kept at least
24 hours), then live events.

**Sandbox.** A sandbox key (` + "`msk_test_…`" + `, issued on request) works on the same paths with the same shapes over
synthetic market data (its event stream carries the synthetic events), never counts against the monthly quota (the rate limit applies), and may push a test
` + "`verdict_changed`" + ` event to your own webhooks and streams with ` + "`POST /sandbox/verdict-change`" + `. Live keys never
reach sandbox data, nor sandbox keys live data.

<a id="screens"></a>
## Screens: your own conditions

` + "`POST /screener/query`" + ` screens a market with a condition you write over every precomputed field: scores,
verdicts, each factor's value and sentiment, the scenario levels and the screener row, and for crypto every
style at once. The language is [CEL](https://cel.dev): typed, checked before it runs, with a cost limit. The
operation's description lists every variable with its type.

` + "```" + `
verdict == "growth" && factors.rsi_14.value < 40
swing.verdict == "growth" && scalp.overall_score > 40 && volume > 5e7
factors.rsi_14.value < 30 && factors.macd_12_26_9.sentiment == "bullish"
fundamental_score != null && fundamental_score > 30 && technical_score > 0
price > scenario.resistance && change_pct > 3
symbol.endsWith("_USDT") && verdict != "decline" && factors.adx_14.value > 25
` + "```" + `

` + "```" + `
POST /api/v1/public/screener/query
{"market": "crypto", "where": "swing.verdict == \"growth\" && scalp.overall_score > 40",
 "order_by": "overall_score desc", "limit": 50, "style": "swing"}
` + "```" + `

The answer lists the matching assets with the fields your condition and ` + "`order_by`" + ` read, and a
` + "`next_cursor`" + ` for the next page. A mistake in the condition is a 400 naming ` + "`body.where`" + ` with its line,
column and the compiler's message. A value that may be missing (` + "`fundamental_score`" + `, a factor the report
lacks) is null: test it with ` + "`!= null`" + `; an ordering on null does not match the asset.

<a id="errors"></a>
## Errors

Every error is an RFC 9457 problem (` + "`application/problem+json`" + `) with ` + "`type`" + `, ` + "`title`" + `, ` + "`status`" + `,
` + "`detail`" + ` and, for invalid parameters, ` + "`errors[]`" + ` naming each parameter (` + "`location`" + `), its ` + "`value`" + ` and what is allowed.

| Status | When |
|---|---|
| 400 <a id="errors-invalid-parameter"></a> | Any invalid parameter: market, exchange form, timeframe, limit out of bounds, filters, style, lang, body fields. |
| 401 <a id="errors-unauthorized"></a> | The X-API-Key header is missing, malformed (format or checksum), unknown or revoked. |
| 403 <a id="errors-forbidden"></a> | The client is suspended or its contract has expired; or the market is not in the client's tier. |
| 404 <a id="errors-not-found"></a> | No such combination, symbol or computed analytics; the detail lists what is available. |
| 429 <a id="errors-too-many-requests"></a> | Rate limit (` + "`Too Many Requests, retry later`" + `) or monthly quota (` + "`Monthly quota exceeded; upgrade the tier or wait for the next month`" + `). ` + "`Retry-After`" + ` gives whole seconds. |
| 502 <a id="errors-upstream"></a> | The upstream feed of this data is failing and the stored data is stale while its market trades; retry later. A closed market (stocks outside the New York session, forex at the weekend) is never a 502: its last session's data is served, and ` + "`X-Market-Open: false`" + ` or ` + "`market_open: false`" + ` says so. |
| 503 <a id="errors-unavailable"></a> | The service is starting or its database is unreachable; ` + "`Retry-After`" + ` is set. |

## Checks, in order

401 key → 403 client suspended/expired → 429 rate limit → 429 quota → 400 parameters → 403 market not in tier → 404 → 200.
Every request admitted past the limits counts against the monthly quota, whatever its later status.

## Limits

At most N requests in any rolling 60-second window per client (all keys): 30 (starter), 120 (business), 600 (enterprise),
unless the contract says otherwise. Monthly quota per calendar month (UTC): 20,000 / 150,000 / unlimited.
Every authenticated response carries ` + "`RateLimit-Policy`" + ` and ` + "`RateLimit`" + ` (IETF draft) headers.
`

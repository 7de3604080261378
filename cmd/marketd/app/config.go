package app

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/hostbudget"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// Config is every setting of the process, read from MARKET_* environment
// variables in one place and checked by Validate.
type Config struct {
	DatabaseURL string
	// SandboxDatabaseURL is the sandbox's database ("" = no sandbox).
	SandboxDatabaseURL string
	DatabaseReadURL    string        // a replica for the api's reads ("": none)
	ReadMaxLag         time.Duration // the most the replica may lag and serve
	RedisURL           string        // with RedisSentinel's parameters, when one is set (rediskeys.WithSentinel)
	RedisSentinel      rediskeys.Sentinel
	HTTPAddr           string
	OpsAddr            string
	Region             string
	SecretKey          []byte // 32 bytes, for encrypting webhook secrets
	// DemoSecretKey: SecretKey is the public demo key (MARKET_SECRET_KEY=
	// insecure-demo-key, compose's default); every role warns at start.
	DemoSecretKey bool
	// AsynqmonWritable lets the asynqmon UI change queues and tasks; it is
	// read-only otherwise. Writable needs AsynqmonToken on every request.
	AsynqmonWritable bool
	AsynqmonToken    string
	LogLevel         slog.Level
	Feeds            []string

	// FeedURLs overrides upstream hosts by host name (MARKET_FEED_URLS).
	FeedURLs         map[string]string
	OandaToken       string
	OandaAccountID   string
	OandaEnvironment string
	AlpacaKeyID      string
	AlpacaSecret     string
	// AlpacaFeed is Alpaca's market-data feed: iex or sip.
	AlpacaFeed    string
	SyntheticSeed int64
	// SyntheticAssets is the synthetic feed's count of crypto base assets.
	SyntheticAssets int
	TickerInterval  time.Duration
	CandleInterval  time.Duration
	ScoreInterval   time.Duration
	// ScoreTrigger: ingest has what it changed scored at once (the tick
	// is the safety net); false leaves scoring to the tick alone.
	ScoreTrigger bool
	// ScoreCandleCache: how many candle series a worker keeps the candles
	// of between scoring runs (0: none).
	ScoreCandleCache     int
	StatsInterval        time.Duration
	FundamentalsInterval time.Duration
	WebhookInterval      time.Duration
	// WebhookAllowPrivate lets callbacks use loopback/private addresses
	// (tests only); WebhookCAPEM is an extra trusted CA (tests only).
	WebhookAllowPrivate bool
	WebhookCAPEM        []byte
	// WebhookConcurrency bounds the webhook sends in flight per worker.
	WebhookConcurrency int
	// MaxCandleSymbols caps the symbols per combination whose candles are
	// ingested (0 = all).
	MaxCandleSymbols int
	// FeedHeadroom is the fraction of each provider host's documented
	// request budget the deployment plans to use (package hostbudget).
	FeedHeadroom float64
	// CandleRetention is how long candles of each timeframe are kept; a
	// timeframe without an entry is kept forever.
	CandleRetention map[domain.Timeframe]time.Duration
	// ReportRetentionDays is how many days every published report is
	// kept; before them, the last of each UTC day.
	ReportRetentionDays int
	// RequestTimeout is the time budget of one public request.
	RequestTimeout time.Duration

	// SandboxPipeline: this process's worker fills the sandbox
	// (DatabaseURL is the sandbox's), so its writes are announced on the
	// sandbox's invalidation channel, never the live one.
	SandboxPipeline bool
	// SandboxRedisURL holds the queues of the sandbox pipeline that
	// `marketd all` runs in process ("" = it runs none).
	SandboxRedisURL string

	// StreamDBConns is the size of the api's Postgres pool of event-stream
	// reads (the hub's and the replays'), apart from the request pool.
	StreamDBConns int

	// ClockOffset shifts the clock of market time (Config.now); benchmark
	// builds only (MARKET_BENCH_CLOCK_OFFSET).
	ClockOffset time.Duration
}

// DemoSecretKeyValue is the value of MARKET_SECRET_KEY that selects a
// public, fixed key: compose's default, so that `docker compose up` works
// out of the box. Webhook secrets sealed with it are readable by anyone
// with the source; every role says so loudly at start.
const DemoSecretKeyValue = "insecure-demo-key"

// option is one environment variable of the configuration: its name, its
// default, its documentation (Markdown: the README's configuration table
// and `marketd help` are rendered from it) and the parser that sets its
// field of Config from the value, the default when unset. An option
// without a parser is read before the configuration (package main, the Go
// runtime) and is listed so that the table names every variable.
type option struct {
	name string
	def  string
	// shownDef replaces def in the documentation when the default is not
	// one literal value.
	shownDef string
	doc      string
	parse    func(v string) error
}

// options is the configuration's table: each variable bound to its field
// of c, in the README's order. A parser's error omits the variable's name,
// which LoadConfig puts first.
func (c *Config) options() []option {
	return []option{
		{name: "MARKET_DATABASE_URL", def: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
			doc:   "Postgres URL (pgx format; `search_path` may be a query parameter)",
			parse: postgresURL(&c.DatabaseURL)},
		{name: "MARKET_DATABASE_READ_URL",
			doc: "Postgres URL of a streaming replica (or several hosts of one, pgx format) for the api's market-data and analytics reads, while it is at most `MARKET_READ_MAX_LAG` behind the primary " +
				"(measured from WAL positions every 500 ms); keys, quota, webhooks and every write stay on `MARKET_DATABASE_URL`. Unset: every read is the primary's",
			parse: optional(postgresURL(&c.DatabaseReadURL))},
		{name: "MARKET_READ_MAX_LAG", def: "5s",
			doc:   "How far behind the primary the read replica may be and still serve reads; past it, reads go to the primary until it catches up",
			parse: period(&c.ReadMaxLag, "5s")},
		{name: "MARKET_SANDBOX_DATABASE_URL",
			doc: "Postgres URL of the sandbox's market data, in a schema of its own (e.g. the same database with `search_path=sandbox`; it must point at another database or schema than `MARKET_DATABASE_URL`: hosts, port, database and `search_path` are compared, not the text). " +
				"The api serves sandbox keys from it; a worker and a scheduler of its own fill it on the `synthetic` feed, and `marketd migrate` migrates it too. Unset: sandbox keys get 503",
			parse: optional(postgresURL(&c.SandboxDatabaseURL))},
		{name: "MARKET_SANDBOX_PIPELINE", def: "false",
			doc: "`true` on the worker and scheduler that fill the sandbox (their `MARKET_DATABASE_URL` is the sandbox's; `MARKET_SANDBOX_DATABASE_URL` must then be unset): " +
				"the worker announces its writes on the sandbox's invalidation channel, which only the api's sandbox cache follows. " +
				"A sandbox pipeline runs the `synthetic` feed only: any other `MARKET_FEEDS` is refused at start",
			parse: boolean(&c.SandboxPipeline)},
		{name: "MARKET_SANDBOX_REDIS_URL",
			doc: "`marketd all` only: Redis URL of the sandbox pipeline's queues, another database than `MARKET_REDIS_URL`'s (e.g. `redis://127.0.0.1:6379/1`; address or sentinel primary and database number are compared, not the text). " +
				"With `MARKET_SANDBOX_DATABASE_URL`, the process then fills the sandbox too (a worker and a scheduler of its own on the `synthetic` feed); unset, it says at start that it does not",
			parse: optional(redisURL(&c.SandboxRedisURL))},
		{name: "MARKET_REDIS_URL", def: "redis://127.0.0.1:6379/0",
			doc:   "Redis URL for queues, rate-limit windows and cache invalidation",
			parse: redisURL(&c.RedisURL)},
		{name: "MARKET_REDIS_SENTINEL_ADDRS",
			doc: "Redis Sentinel: the sentinels' `host:port`, comma-separated. Every connection (queues, rate windows, budgets, invalidation) then asks them for the primary " +
				"named by `MARKET_REDIS_SENTINEL_MASTER` and follows it through a failover; user, password, TLS (`rediss://`) and database stay `MARKET_REDIS_URL`'s, whose host is not dialled",
			parse: optional(c.sentinelAddrs)},
		{name: "MARKET_REDIS_SENTINEL_MASTER",
			doc:   "Redis Sentinel: the name the sentinels monitor the primary under (`sentinel monitor <name> …`); required with `MARKET_REDIS_SENTINEL_ADDRS`",
			parse: optional(func(v string) error { c.RedisSentinel.Master = v; return nil })},
		{name: "MARKET_REDIS_SENTINEL_PASSWORD",
			doc:   "Redis Sentinel: the sentinels' own password (`requirepass` of the sentinels), when they have one; the data nodes' is `MARKET_REDIS_URL`'s",
			parse: optional(func(v string) error { c.RedisSentinel.Password = v; return nil })},
		{name: "MARKET_HTTP_ADDR", def: ":8080",
			doc:   "Public listener: `/api/v1/public/...`, `/docs`, `/openapi.json`",
			parse: hostPort(&c.HTTPAddr, ":8080")},
		{name: "MARKET_OPS_ADDR", def: "127.0.0.1:8081",
			doc:   "Ops listener: `/healthz`, `/readyz`, `/metrics`, `/asynqmon/`",
			parse: hostPort(&c.OpsAddr, "127.0.0.1:8081")},
		{name: "MARKET_PPROF_ADDR", shownDef: "— (off)",
			doc: "Diagnostics: serves Go's `/debug/pprof/` on a listener of its own at this address (bind it to loopback: profiles reveal the process's internals); " +
				"`e2e/cmd/latencybench -pprof` uses it. Read at start, before the rest of the configuration, so that a profile covers the start too"},
		{name: "MARKET_ASYNQMON_WRITABLE", def: "false",
			doc: "`true` lets the asynqmon UI pause queues and run, archive or delete tasks; read-only otherwise (asynqmon refuses every request but `GET`). " +
				"Needs `MARKET_ASYNQMON_TOKEN`",
			parse: boolean(&c.AsynqmonWritable)},
		{name: "MARKET_ASYNQMON_TOKEN",
			doc: "16+ characters, required on every asynqmon request when writable: the HTTP basic-auth password (any user name; the browser asks once) " +
				"or `Authorization: Bearer`; compared in constant time. Cross-origin writes are refused either way",
			parse: text(&c.AsynqmonToken)},
		{name: "MARKET_REGION", def: domain.DefaultRegion,
			doc:   "Deployment region: picks the exchange catalogue (" + codeList(domain.Regions) + ")",
			parse: region(&c.Region)},
		{name: "MARKET_SECRET_KEY",
			doc: "32 bytes (64 hex chars or base64) encrypting webhook secrets at rest (webhooks need it; a bad value is refused); " +
				"`" + DemoSecretKeyValue + "` selects a public key (compose's default, for a demo; every role warns at start)",
			parse: c.secretKey},
		{name: "MARKET_LOG_LEVEL", def: "info",
			doc:   "`debug`, `info`, `warn` or `error`; JSON logs on stderr",
			parse: logLevel(&c.LogLevel)},
		{name: "MARKET_FEEDS", def: feeds.NameSynthetic,
			doc: "Comma-separated market-data feeds, first match wins: " + codeList(feeds.KnownNames()) + ". " +
				"Give every role the same value: the scheduler schedules only the combinations these feeds serve, and `/readyz` and the CLI list them",
			parse: feedNames(&c.Feeds)},
		{name: "MARKET_FEED_URLS",
			doc: "Comma-separated `name=url` overrides of the feeds' upstream hosts: a testnet, a practice account, a mirror or a local replay " +
				"(`http://` and `ws://` accepted; an unknown name or a bad URL is a start-up error naming the entry). Names and defaults: the table of hosts",
			parse: feedURLs(&c.FeedURLs)},
		{name: "MARKET_OANDA_TOKEN",
			doc:   "OANDA v20 token (required by the `oanda` feed)",
			parse: text(&c.OandaToken)},
		{name: "MARKET_OANDA_ACCOUNT_ID",
			doc: "OANDA v20 account id, `{siteID}-{divisionID}-{userID}-{accountNumber}` (e.g. `101-004-1234567-001`; required by the `oanda` feed): " +
				"its `CURRENCY` instruments are the forex pairs served, its prices the screener's",
			parse: optional(oandaAccountID(&c.OandaAccountID))},
		{name: "MARKET_OANDA_ENVIRONMENT", def: feeds.OandaLive,
			doc: "`live` (`api-fxtrade.oanda.com`, `stream-fxtrade.oanda.com`) or `practice` (`api-fxpractice.oanda.com`, `stream-fxpractice.oanda.com`): " +
				"the kind of OANDA account of the token; `oanda=` and `oanda-stream=` entries of `MARKET_FEED_URLS` win",
			parse: oandaEnvironment(&c.OandaEnvironment)},
		{name: "MARKET_ALPACA_KEY_ID",
			doc:   "Alpaca market-data key id (required by the `alpaca` feed)",
			parse: text(&c.AlpacaKeyID)},
		{name: "MARKET_ALPACA_SECRET",
			doc:   "Alpaca market-data secret (required by the `alpaca` feed)",
			parse: text(&c.AlpacaSecret)},
		{name: "MARKET_ALPACA_FEED", def: feeds.AlpacaIEX,
			doc: "Alpaca market-data feed: `iex` (the free plan's: the IEX exchange alone, a few percent of US volume; 200 requests a minute) " +
				"or `sip` (every US exchange, the consolidated tape; a paid plan, 10,000 requests a minute). The budget follows the plan the " +
				"keys are on (`X-RateLimit-Limit`); the reports' `data_quality.source.data_feed` names the feed",
			parse: alpacaFeed(&c.AlpacaFeed)},
		{name: "MARKET_SYNTHETIC_SEED", def: "1",
			doc:   "Seed of the synthetic feed (same seed, same market history)",
			parse: integer(&c.SyntheticSeed)},
		{name: "MARKET_SYNTHETIC_ASSETS", def: strconv.Itoa(feeds.SyntheticDefaultCryptoAssets),
			doc: "Crypto base assets of the synthetic feed (1–" + strconv.Itoa(feeds.SyntheticMaxCryptoAssets) + "), for scale benchmarks without an exchange: " +
				"beyond the default table, assets get symbols and price paths derived from the seed, and each crypto combination lists its default share of them " +
				"(binance spot: every asset against USDT, plus 16 crosses). The default assets keep their symbols and series at any size",
			parse: intRange(&c.SyntheticAssets, 1, feeds.SyntheticMaxCryptoAssets, strconv.Itoa(feeds.SyntheticDefaultCryptoAssets))},
		{name: "MARKET_TICKER_INTERVAL", def: "10s",
			doc:   "Screener ingest period per combination",
			parse: period(&c.TickerInterval, "10s")},
		{name: "MARKET_CANDLE_INTERVAL", def: "1m",
			doc:   "Candle ingest period per combination and timeframe",
			parse: period(&c.CandleInterval, "1m")},
		{name: "MARKET_SCORE_INTERVAL", def: "1m",
			doc: "Safety-net scoring period per market and trading style: ingest already has what it changed scored at once; " +
				"the tick scores whatever that missed (assets with nothing new are skipped)",
			parse: period(&c.ScoreInterval, "1m")},
		{name: "MARKET_SCORE_TRIGGER", def: "true",
			doc: "`true`: ingest has the assets it changed scored at once (seconds from candle to verdict); " +
				"`false`: scoring waits for the `MARKET_SCORE_INTERVAL` tick alone (an operator's switch; the baseline of the CPU benchmark)",
			parse: boolean(&c.ScoreTrigger)},
		{name: "MARKET_SCORE_CANDLE_CACHE", def: "24000",
			doc: "Candle series (market, symbol, style) whose newest 500 candles a worker keeps between scoring runs, ≈ 24 kB each: " +
				"a run then reads a kept series from its newest candle on (at a close, two candles instead of 500), and a version Postgres keeps " +
				"per series proves the kept ones unchanged; `0` keeps none (every run reads every candle)",
			parse: intRange(&c.ScoreCandleCache, 0, 10_000_000, "24000")},
		{name: "MARKET_FUNDAMENTALS_INTERVAL", def: "15m",
			doc: "Refresh period of the fundamental inputs (funding, open interest, P/E, rate differentials) per market; " +
				"ticks fall between the 15-minute closes (7m30s past them at `15m`), so their rescoring does not compete with the closed candles'",
			parse: period(&c.FundamentalsInterval, "15m")},
		{name: "MARKET_STATS_INTERVAL", def: "15m",
			doc:   "Verdict and factor statistics period per market (backtest over daily candles, and live); `0` disables the job",
			parse: c.statsInterval},
		{name: "MARKET_WEBHOOK_INTERVAL", def: "5s",
			doc: "Safety-net period of the webhook dispatcher: fan-out of verdict changes, due deliveries and retries " +
				"(a committed verdict event wakes the dispatcher at once)",
			parse: period(&c.WebhookInterval, "5s")},
		{name: "MARKET_WEBHOOK_ALLOW_PRIVATE", def: "false",
			doc:   "Tests only: accept callback URLs on loopback and private addresses",
			parse: boolean(&c.WebhookAllowPrivate)},
		{name: "MARKET_WEBHOOK_CA_FILE",
			doc:   "Tests only: PEM file of an extra CA trusted for webhook deliveries",
			parse: optional(fileContents(&c.WebhookCAPEM))},
		{name: "MARKET_WEBHOOK_CONCURRENCY", def: "128",
			doc:   "Webhook sends in flight per worker process (at most one per subscription; a hanging receiver holds one for ≤ 10 s)",
			parse: intRange(&c.WebhookConcurrency, 1, 4096, "128")},
		{name: "MARKET_REQUEST_TIMEOUT", def: "4s",
			doc: "Time budget of a public request: when Postgres or Redis is broken, frozen or slow, the request is answered 503 with `Retry-After` within it " +
				"(a webhook test ping gets 10 s more; an event stream, `GET /stream`, has none: it lasts as long as the client keeps it)",
			parse: c.requestTimeout},
		{name: "GOGC", shownDef: "`marketd api`: `400`; `marketd worker` and `marketd all`: off when `GOMEMLIMIT` is set, else `300`; Go's `100` for `marketd scheduler`",
			doc: "Go's garbage-collection target. The api role collects when the heap reaches five times the live heap: ≈ 1.5 µs less CPU a request under load " +
				"for ≈ 15–20 MB more resident memory. The worker's live heap is mostly the candles the scorer keeps. With `GOMEMLIMIT` set it collects only near " +
				"that limit and keeps the memory a close used for the next one: under any `GOGC` a worker idle between closes returns that memory to the system, " +
				"and the next close faults it in again page by page and runs a collection of its own (a 00:00 close of 2,000 crypto assets with 10,000 alerts: " +
				"Go CPU −22 % and p95 −13 % in one process, close by close after four idle minutes, BENCHMARKS.md). Without `GOMEMLIMIT`, `300`: a close takes ≈ 0.35 s less CPU than at Go's `100`, for about twice the resident " +
				"memory (≈ 2 GB against ≈ 1 GB in that benchmark); the variable set in the environment wins"},
		{name: "GOMEMLIMIT", shownDef: "`marketd api`, `worker` and `all`: 80 % of the cgroup's memory limit when there is one; none for `marketd scheduler`",
			doc: "Go's soft memory limit: near it the collector runs as often as needed, whatever `GOGC`. Set in a worker's environment it also turns `GOGC` off " +
				"(above), and the worker's resident memory settles near it: set it to memory the worker may keep (the Helm chart does). A limit taken from the " +
				"cgroup does not turn `GOGC` off: other processes may share the cgroup. The variable set in the environment wins"},
		{name: "MARKET_STREAM_DB_CONNS", def: "4",
			doc: "Postgres connections of an api replica's event streams (`GET /stream`), a pool apart from its 16 request connections, so streams never take a request's: " +
				"one for the replica's reader of the log, the others (3 by default) for the pages of resuming streams' replays, each page's database work bounded by 2 s " +
				"(`statement_timeout` on the pool); more resuming streams wait their turn for a page, and one client's take at most half of those connections (at least one) at once, so it cannot starve another's resume. The sandbox's streams get a pool of the same size. 2 to 64. " +
				"Postgres's `max_connections` must hold, per api replica, 16 + this (twice with a sandbox) + 2 listeners",
			parse: intRange(&c.StreamDBConns, 2, 64, "4")},
		{name: "MARKET_FEED_HEADROOM", def: "0.8",
			doc: "Fraction (0.1–1) of each provider host's documented request budget (Binance: 6,000 weight a minute on spot, 2,400 on futures) the deployment plans to use, " +
				"shared by every worker process through Redis; the rest is a margin so the provider never answers 429 or 418",
			parse: c.feedHeadroom},
		{name: "MARKET_CANDLE_RETENTION", def: formatCandleRetention(worker.DefaultCandleRetention()),
			doc: "How long candles of each timeframe are kept: comma-separated `timeframe=age` (`14d`, `2w`, `36h` or `forever`); a timeframe not listed keeps its default. " +
				"Each must keep at least the " + strconv.Itoa(api.MaxCandleLimit) + " candles `GET /ohlcv` serves (1m: `16h40m`, 1h: `42d`), else start-up fails naming the entry. " +
				"Older candles are deleted every 15 minutes in small batches, and backfill does not load them",
			parse: candleRetention(&c.CandleRetention)},
		{name: "MARKET_REPORT_RETENTION_DAYS", def: strconv.Itoa(worker.DefaultReportRetentionDays),
			doc: "Days every published report (and statistics computation) is kept for `GET /analytics/{market}/{symbol}?as_of=`; before them only the last report of each UTC day " +
				"per asset and style is kept, for good. Thinned every hour in small batches. 1 to 3650",
			parse: intRange(&c.ReportRetentionDays, 1, 3650, strconv.Itoa(worker.DefaultReportRetentionDays))},
		{name: "MARKET_MAX_CANDLE_SYMBOLS", def: "all",
			doc: "Symbols per combination whose candles are ingested and scored, highest volume first: `all` (or `0`), " +
				"or a cap for a deployment whose request budget cannot carry the whole universe",
			parse: c.maxCandleSymbols},
		{name: "MARKET_BENCH_CLOCK_OFFSET",
			doc: "Benchmarks only: a duration in whole minutes (e.g. `14h25m`, `-9h`) added to the clock the worker and scheduler read market time from (feeds, ticks, ingest, scoring, " +
				"candle and report retention), so that a scale benchmark reaches a daily close at any hour, the local exchange simulator shifted alike " +
				"(`make bench-scale BENCH_ARGS=\"-clock-at 23:35\"`). The api, webhooks, the stream log and rate limits keep the wall clock, so data ages and age metrics are off by the offset. " +
				"Only a binary built with `-tags benchclock` accepts it; any other refuses to start with it set",
			parse: optional(c.clockOffset)},
	}
}

// clockOffset parses MARKET_BENCH_CLOCK_OFFSET; only a benchclock build
// (clock_bench.go) takes one, so a deployment cannot run on a shifted
// clock by a stray variable.
func (c *Config) clockOffset(v string) error {
	if !benchClockBuild {
		return errors.New("only a benchmark build (go build -tags benchclock) shifts its clock; unset it")
	}
	d, err := time.ParseDuration(v)
	// Whole minutes: the minute windows read on either clock (the
	// provider's weight, the stream's timing logs) then coincide.
	if err != nil || d != d.Truncate(time.Minute) {
		return errors.New("must be a duration in whole minutes (e.g. 14h25m or -9h)")
	}
	c.ClockOffset = d
	return nil
}

// now is the clock market time is read from: the wall clock, shifted by
// MARKET_BENCH_CLOCK_OFFSET in a benchmark build.
func (c Config) now() func() time.Time {
	if c.ClockOffset == 0 {
		return time.Now
	}
	off := c.ClockOffset
	return func() time.Time { return time.Now().Add(off) }
}

// configOptions is the table of options, for documentation.
func configOptions() []option { return (&Config{}).options() }

// LoadConfig reads every option of the table from getenv (its default when
// unset or blank) and checks the whole with Validate. The error names the
// offending variable in one line.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	for _, o := range c.options() {
		if o.parse == nil {
			continue
		}
		v := strings.TrimSpace(getenv(o.name))
		if v == "" {
			v = o.def
		}
		if err := o.parse(v); err != nil {
			return c, fmt.Errorf("%s: %w", o.name, err)
		}
	}
	if len(c.RedisSentinel.Addrs) > 0 {
		if c.RedisSentinel.Master == "" {
			return c, errors.New("MARKET_REDIS_SENTINEL_MASTER: required with MARKET_REDIS_SENTINEL_ADDRS (the name the sentinels monitor the primary under)")
		}
		for _, u := range []*string{&c.RedisURL, &c.SandboxRedisURL} {
			if *u == "" {
				continue
			}
			var err error
			if *u, err = rediskeys.WithSentinel(*u, c.RedisSentinel); err != nil {
				return c, fmt.Errorf("MARKET_REDIS_SENTINEL_ADDRS: %w", err)
			}
		}
	} else if c.RedisSentinel.Master != "" {
		return c, errors.New("MARKET_REDIS_SENTINEL_ADDRS: required with MARKET_REDIS_SENTINEL_MASTER (the sentinels' host:port)")
	}
	return c, c.Validate()
}

// Validate checks the rules that tie variables together (each variable's
// own value is checked by its parser). The error names the variable to
// change.
func (c Config) Validate() error {
	// The sandbox's targets are compared by what the URLs point at, not
	// their text: another spelling of the live database and schema, or of
	// the live Redis database, is the live one.
	if c.SandboxDatabaseURL != "" && c.DatabaseURL != "" {
		if same, err := store.SameTarget(c.SandboxDatabaseURL, c.DatabaseURL); err != nil {
			return fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %v", err)
		} else if same {
			return errors.New("MARKET_SANDBOX_DATABASE_URL: points at MARKET_DATABASE_URL's database and schema (the sandbox's data is kept apart; use another schema, e.g. search_path=sandbox)")
		}
	}
	if c.SandboxRedisURL != "" && c.RedisURL != "" {
		if same, err := rediskeys.SameTarget(c.SandboxRedisURL, c.RedisURL); err != nil {
			return fmt.Errorf("MARKET_SANDBOX_REDIS_URL: %v", err)
		} else if same {
			return errors.New("MARKET_SANDBOX_REDIS_URL: points at MARKET_REDIS_URL's Redis database (the sandbox's queues are kept apart; use another database, e.g. redis://host:6379/1)")
		}
	}
	switch {
	case c.SandboxPipeline && c.SandboxDatabaseURL != "":
		return errors.New("MARKET_SANDBOX_PIPELINE: a sandbox pipeline writes MARKET_DATABASE_URL (the sandbox's); unset MARKET_SANDBOX_DATABASE_URL")
	case c.SandboxPipeline && !slices.Equal(c.Feeds, []string{feeds.NameSynthetic}):
		return fmt.Errorf("MARKET_FEEDS: a sandbox pipeline (MARKET_SANDBOX_PIPELINE=true) runs the synthetic feed only (real feeds would spend the live budget and serve live data to sandbox keys); set MARKET_FEEDS=synthetic, not %q",
			strings.Join(c.Feeds, ","))
	case c.AsynqmonWritable && len(c.AsynqmonToken) < 16:
		return errors.New("MARKET_ASYNQMON_TOKEN: a writable asynqmon (MARKET_ASYNQMON_WRITABLE=true) needs a token of at least 16 characters")
	case slices.Contains(c.Feeds, feeds.NameOanda) && c.OandaToken == "":
		return errors.New("MARKET_OANDA_TOKEN: required by the oanda feed")
	case slices.Contains(c.Feeds, feeds.NameOanda) && c.OandaAccountID == "":
		return errors.New("MARKET_OANDA_ACCOUNT_ID: required by the oanda feed (the v20 account whose currency pairs and prices are served)")
	case slices.Contains(c.Feeds, feeds.NameAlpaca) && (c.AlpacaKeyID == "" || c.AlpacaSecret == ""):
		return errors.New("MARKET_ALPACA_KEY_ID: the alpaca feed needs MARKET_ALPACA_KEY_ID and MARKET_ALPACA_SECRET")
	}
	return nil
}

// The parsers of the table, one per kind of value. Each returns the
// option's parse func bound to the field it sets.

func optional(parse func(string) error) func(string) error {
	return func(v string) error {
		if v == "" {
			return nil
		}
		return parse(v)
	}
}

func text(dst *string) func(string) error {
	return func(v string) error { *dst = v; return nil }
}

func urlOf(dst *string, want string, schemes ...string) func(string) error {
	return func(v string) error {
		if u, err := url.Parse(v); err != nil || !slices.Contains(schemes, u.Scheme) {
			return errors.New("must be a " + want + " URL")
		}
		*dst = v
		return nil
	}
}

func postgresURL(dst *string) func(string) error {
	return urlOf(dst, "postgres://", "postgres", "postgresql")
}

// sentinelAddrs reads MARKET_REDIS_SENTINEL_ADDRS.
func (c *Config) sentinelAddrs(v string) error {
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("must be host:port, comma-separated (e.g. 10.0.0.1:26379,10.0.0.2:26379): %q: %v", a, err)
		}
		c.RedisSentinel.Addrs = append(c.RedisSentinel.Addrs, a)
	}
	return nil
}

func redisURL(dst *string) func(string) error {
	return urlOf(dst, "redis:// or rediss://", "redis", "rediss")
}

func hostPort(dst *string, example string) func(string) error {
	return func(v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("must be host:port (e.g. %s): %v", example, err)
		}
		*dst = v
		return nil
	}
}

func boolean(dst *bool) func(string) error {
	return func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("must be true or false")
		}
		*dst = b
		return nil
	}
}

func integer(dst *int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("must be an integer")
		}
		*dst = n
		return nil
	}
}

func intRange(dst *int, lo, hi int, example string) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer from %d to %d (e.g. %s)", lo, hi, example)
		}
		*dst = n
		return nil
	}
}

// period reads the period of a scheduled job: at least a second.
func period(dst *time.Duration, example string) func(string) error {
	return func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("must be a duration of at least 1s (e.g. %s)", example)
		}
		*dst = d
		return nil
	}
}

func (c *Config) statsInterval(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || (d < time.Second && d != 0) {
		return errors.New("must be a duration of at least 1s (e.g. 15m), or 0 to disable the statistics job")
	}
	c.StatsInterval = d
	return nil
}

func (c *Config) requestTimeout(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 100*time.Millisecond || d > 5*time.Minute {
		return errors.New("must be a duration from 100ms to 5m (e.g. 4s)")
	}
	c.RequestTimeout = d
	return nil
}

func (c *Config) feedHeadroom(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0.1 || f > 1 {
		return errors.New("must be a fraction from 0.1 to 1 (e.g. 0.8)")
	}
	c.FeedHeadroom = f
	return nil
}

func (c *Config) maxCandleSymbols(v string) error {
	if v = strings.ToLower(v); v == "all" {
		c.MaxCandleSymbols = 0
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return errors.New("must be all or a non-negative integer (0 = all)")
	}
	c.MaxCandleSymbols = n
	return nil
}

// secretKey reads MARKET_SECRET_KEY: 32 bytes of the operator's, or the
// public demo key, which every role announces at start.
func (c *Config) secretKey(v string) error {
	switch v {
	case "":
		return nil
	case DemoSecretKeyValue:
		k := sha256.Sum256([]byte("marketd public demo key: never protect real secrets with it"))
		c.SecretKey, c.DemoSecretKey = k[:], true
		return nil
	}
	key, err := decodeKey(v)
	if err != nil {
		return err
	}
	c.SecretKey = key
	return nil
}

func region(dst *string) func(string) error {
	return func(v string) error {
		v = strings.ToLower(v)
		if !domain.ValidRegion(v) {
			return fmt.Errorf("unknown region %q (known: %s)", v, strings.Join(domain.Regions, ", "))
		}
		*dst = v
		return nil
	}
}

func logLevel(dst *slog.Level) func(string) error {
	return func(v string) error {
		if err := dst.UnmarshalText([]byte(v)); err != nil {
			return errors.New("must be debug, info, warn or error")
		}
		return nil
	}
}

func feedNames(dst *[]string) func(string) error {
	return func(v string) error {
		var names []string
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(strings.ToLower(f)); f != "" {
				names = append(names, f)
			}
		}
		if len(names) == 0 {
			return errors.New("at least one feed is required")
		}
		for _, f := range names {
			if !slices.Contains(feeds.KnownNames(), f) {
				return fmt.Errorf("unknown feed %q (known: %s)", f, strings.Join(feeds.KnownNames(), ", "))
			}
		}
		*dst = names
		return nil
	}
}

func alpacaFeed(dst *string) func(string) error {
	return func(v string) error {
		if v = strings.ToLower(v); v != feeds.AlpacaIEX && v != feeds.AlpacaSIP {
			return errors.New("must be iex or sip")
		}
		*dst = v
		return nil
	}
}

func oandaEnvironment(dst *string) func(string) error {
	return func(v string) error {
		if v = strings.ToLower(v); v != feeds.OandaLive && v != feeds.OandaPractice {
			return errors.New("must be live or practice")
		}
		*dst = v
		return nil
	}
}

// oandaAccountID parses a v20 account id: four "-"-delimited groups of
// digits, "{siteID}-{divisionID}-{userID}-{accountNumber}" (oanda/v20-openapi,
// AccountID). OANDA answers 400 "Invalid value specified for 'accountID'"
// to anything else; saying so at start names the variable.
func oandaAccountID(dst *string) func(string) error {
	return func(v string) error {
		parts := strings.Split(v, "-")
		ok := len(parts) == 4
		for _, p := range parts {
			ok = ok && p != "" && strings.Trim(p, "0123456789") == ""
		}
		if !ok {
			return errors.New("must be a v20 account id, {siteID}-{divisionID}-{userID}-{accountNumber} (e.g. 101-004-1234567-001)")
		}
		*dst = v
		return nil
	}
}

func fileContents(dst *[]byte) func(string) error {
	return func(v string) error {
		b, err := os.ReadFile(v)
		if err != nil {
			return err
		}
		*dst = b
		return nil
	}
}

func feedURLs(dst *map[string]string) func(string) error {
	return func(v string) (err error) { *dst, err = parseFeedURLs(v); return err }
}

func candleRetention(dst *map[domain.Timeframe]time.Duration) func(string) error {
	return func(v string) (err error) { *dst, err = parseCandleRetention(v); return err }
}

// codeList writes names as a Markdown list of code spans.
func codeList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "`" + n + "`"
	}
	return strings.Join(quoted, ", ")
}

// parseCandleRetention reads MARKET_CANDLE_RETENTION over the defaults:
// comma-separated timeframe=age entries, each timeframe once; an age is a
// number of days (d) or weeks (w), a Go duration, or forever.
func parseCandleRetention(v string) (map[domain.Timeframe]time.Duration, error) {
	out := worker.DefaultCandleRetention()
	seen := map[domain.Timeframe]bool{}
	for _, entry := range strings.Split(v, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		name, raw, _ := strings.Cut(entry, "=")
		tf, ok := domain.ParseTimeframe(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("entry %q: must be timeframe=age with a timeframe of %s", entry, timeframeList())
		}
		if seen[tf] {
			return nil, fmt.Errorf("entry %q: %s is given twice", entry, tf)
		}
		seen[tf] = true
		raw = strings.ToLower(strings.TrimSpace(raw))
		if raw == "forever" {
			delete(out, tf)
			continue
		}
		keep, err := parseAge(raw)
		if err != nil {
			return nil, fmt.Errorf("entry %q: age must be like 14d, 2w, 36h or forever", entry)
		}
		if least := api.MaxCandleLimit * tf.Duration(); keep < least {
			return nil, fmt.Errorf("entry %q: keeps fewer than the %d candles GET /ohlcv serves: at least %s",
				entry, api.MaxCandleLimit, formatLeast(least))
		}
		out[tf] = keep
	}
	return out, nil
}

// parseAge reads "14d", "2w" or a Go duration ("36h").
func parseAge(s string) (time.Duration, error) {
	var unit time.Duration
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "w"):
		unit = 7 * 24 * time.Hour
	default:
		return time.ParseDuration(s)
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad age %q", s)
	}
	return time.Duration(n) * unit, nil
}

// formatRetention writes an age as parseAge reads it: whole days as "Nd".
func formatRetention(d time.Duration) string {
	if d <= 0 {
		return "forever"
	}
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

// formatLeast writes a least accepted age the way an operator would type
// it: whole days rounded up from a day on.
func formatLeast(d time.Duration) string {
	if d < 24*time.Hour {
		return d.String()
	}
	return formatRetention((d + 24*time.Hour - 1).Truncate(24 * time.Hour))
}

// formatCandleRetention writes a retention as MARKET_CANDLE_RETENTION,
// every timeframe shortest first.
func formatCandleRetention(r map[domain.Timeframe]time.Duration) string {
	entries := make([]string, 0, len(domain.Timeframes))
	for _, tf := range domain.Timeframes {
		entries = append(entries, string(tf)+"="+formatRetention(r[tf]))
	}
	return strings.Join(entries, ",")
}

func timeframeList() string {
	names := make([]string, len(domain.Timeframes))
	for i, tf := range domain.Timeframes {
		names[i] = string(tf)
	}
	return strings.Join(names, ", ")
}

// parseFeedURLs reads MARKET_FEED_URLS: comma-separated name=url entries,
// each name once.
func parseFeedURLs(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, entry := range strings.Split(v, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		name, raw, ok := strings.Cut(entry, "=")
		name, raw = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("entry %q: must be name=url", entry)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("entry %q: %s is given twice", entry, name)
		}
		if err := feeds.ValidateBaseURL(name, raw); err != nil {
			return nil, fmt.Errorf("entry %q: %v", entry, err)
		}
		out[name] = raw
	}
	return out, nil
}

// feedsConfig is the feeds' configuration of the process: every provider
// request is booked in its host's budget, shared through rdb by every
// process of the deployment (they share its IP).
//
// A sandbox pipeline's is the synthetic feed's alone, whatever else the
// configuration holds: no credential, host or budget of a real feed is
// handed down, so the sandbox cannot construct one (Validate refuses any
// other MARKET_FEEDS there too).
func (c Config) feedsConfig(rdb *redis.Client, logger *slog.Logger) feeds.Config {
	if c.SandboxPipeline {
		return feeds.Config{Names: []string{feeds.NameSynthetic}, Logger: logger, Seed: c.SyntheticSeed,
			SyntheticCryptoAssets: c.SyntheticAssets, Now: c.now()}
	}
	budget := hostbudget.New(hostbudget.Options{Redis: rdb, Headroom: c.FeedHeadroom, Logger: logger})
	return feeds.Config{Names: c.Feeds, OandaToken: c.OandaToken, OandaAccountID: c.OandaAccountID, OandaEnvironment: c.OandaEnvironment,
		AlpacaKeyID: c.AlpacaKeyID, AlpacaSecret: c.AlpacaSecret, AlpacaFeed: c.AlpacaFeed, BaseURLs: c.FeedURLs,
		Logger: logger, Seed: c.SyntheticSeed, SyntheticCryptoAssets: c.SyntheticAssets, Budget: budget, Now: c.now()}
}

func decodeKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			return b, nil
		}
	}
	return nil, fmt.Errorf("must be 32 bytes as 64 hex characters or base64 (generate one with: openssl rand -hex 32)")
}

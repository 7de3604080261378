package app

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	"github.com/marketscreener/market/worker"
)

// Config is every setting of the process, read from MARKET_* environment
// variables in one place and checked by Validate.
type Config struct {
	DatabaseURL string
	// SandboxDatabaseURL is the sandbox's database ("" = no sandbox).
	SandboxDatabaseURL string
	RedisURL           string
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
	OandaEnvironment string
	AlpacaKeyID      string
	AlpacaSecret     string
	SyntheticSeed    int64
	// SyntheticAssets is the synthetic feed's count of crypto base assets.
	SyntheticAssets int
	TickerInterval  time.Duration
	CandleInterval  time.Duration
	ScoreInterval   time.Duration
	// ScoreTrigger: ingest has what it changed scored at once (the tick
	// is the safety net); false leaves scoring to the tick alone.
	ScoreTrigger         bool
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
}

// DemoSecretKeyValue is the value of MARKET_SECRET_KEY that selects a
// public, fixed key: compose's default, so that `docker compose up` works
// out of the box. Webhook secrets sealed with it are readable by anyone
// with the source; every role says so loudly at start.
const DemoSecretKeyValue = "insecure-demo-key"

// envVar documents one variable: the README's config table is this list.
type envVar struct {
	Name, Default, Doc string
}

// EnvVars lists every variable the process reads.
var EnvVars = []envVar{
	{"MARKET_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres URL (pgx format; `search_path` may be set as a query parameter)."},
	{"MARKET_SANDBOX_DATABASE_URL", "", "Postgres URL of the sandbox's market data (its own schema, e.g. `search_path=sandbox`), filled by a worker and scheduler of its own on the `synthetic` feed; sandbox keys read it. Unset: sandbox keys get 503. `marketd migrate` migrates it too."},
	{"MARKET_SANDBOX_PIPELINE", "false", "true on the worker and scheduler that fill the sandbox (their MARKET_DATABASE_URL is the sandbox's, MARKET_SANDBOX_DATABASE_URL unset): the worker announces its writes on the sandbox's invalidation channel, which only the api's sandbox cache follows."},
	{"MARKET_SANDBOX_REDIS_URL", "", "`marketd all` only: Redis URL of the sandbox pipeline's queues (another database than MARKET_REDIS_URL's, e.g. redis://127.0.0.1:6379/1). With MARKET_SANDBOX_DATABASE_URL, the process then fills the sandbox too (a worker and a scheduler of its own on the synthetic feed). Unset: only a separate sandbox worker and scheduler fill it."},
	{"MARKET_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL for queues, rate-limit windows and cache invalidation."},
	{"MARKET_HTTP_ADDR", ":8080", "Public API listener (base path /api/v1/public, docs at /docs)."},
	{"MARKET_OPS_ADDR", "127.0.0.1:8081", "Operator listener: /healthz, /readyz, /metrics, /asynqmon/."},
	{"MARKET_ASYNQMON_WRITABLE", "false", "true lets the asynqmon UI (ops listener) pause queues and run, archive or delete tasks; it is read-only otherwise. Needs MARKET_ASYNQMON_TOKEN."},
	{"MARKET_ASYNQMON_TOKEN", "", "Token (16+ characters) required on every asynqmon request when writable: HTTP basic-auth password (any user; the browser asks) or `Authorization: Bearer`."},
	{"MARKET_REGION", domain.DefaultRegion, "Deployment region: picks the catalogue of exchanges (" + strings.Join(domain.Regions, ", ") + ")."},
	{"MARKET_SECRET_KEY", "", "32-byte key (64 hex chars or base64) encrypting webhook secrets at rest (webhooks need it; a bad value is refused). `" + DemoSecretKeyValue + "` selects a public key (compose's default for a demo; every role warns at start)."},
	{"MARKET_LOG_LEVEL", "info", "debug, info, warn or error. Logs are JSON on stderr."},
	{"MARKET_FEEDS", "synthetic", "Comma-separated market-data feeds of the worker, first match wins: synthetic, binance, okx, coinbase, oanda, alpaca."},
	{"MARKET_FEED_URLS", "", "Comma-separated `name=url` overrides of the feeds' upstream hosts, for a testnet, a practice account, a mirror or a local replay (`http://` and `ws://` accepted). Names and defaults: " + strings.Join(feeds.HostDocs(), "; ") + "."},
	{"MARKET_OANDA_TOKEN", "", "OANDA v20 token (required by the oanda feed)."},
	{"MARKET_OANDA_ENVIRONMENT", feeds.OandaLive, "OANDA account kind: `live` (api-fxtrade) or `practice` (api-fxpractice); an `oanda=` entry of MARKET_FEED_URLS wins."},
	{"MARKET_ALPACA_KEY_ID", "", "Alpaca market-data key id (required by the alpaca feed)."},
	{"MARKET_ALPACA_SECRET", "", "Alpaca market-data secret (required by the alpaca feed)."},
	{"MARKET_SYNTHETIC_SEED", "1", "Seed of the synthetic feed (same seed, same market history)."},
	{"MARKET_SYNTHETIC_ASSETS", strconv.Itoa(feeds.SyntheticDefaultCryptoAssets), "Crypto base assets of the synthetic feed (1–" + strconv.Itoa(feeds.SyntheticMaxCryptoAssets) + "), for scale benchmarks without an exchange: beyond the default table, assets get symbols and price paths derived from the seed, and each crypto combination lists its default share of them (binance spot every one against USDT)."},
	{"MARKET_TICKER_INTERVAL", "10s", "How often the scheduler enqueues screener ingest per combination."},
	{"MARKET_CANDLE_INTERVAL", "1m", "How often the scheduler enqueues candle ingest per combination and timeframe."},
	{"MARKET_SCORE_INTERVAL", "1m", "Safety-net period of analytics scoring per market and trading style: ingest already enqueues the scoring of what it changed at once; the tick scores whatever that missed (assets with nothing new are skipped)."},
	{"MARKET_SCORE_TRIGGER", "true", "true: ingest has the assets it changed scored at once (seconds from candle to verdict). false: scoring waits for the MARKET_SCORE_INTERVAL tick alone (an operator's switch, and the baseline of the CPU benchmark in BENCHMARKS.md)."},
	{"MARKET_FUNDAMENTALS_INTERVAL", "15m", "How often the scheduler refreshes the fundamental inputs (funding, open interest, P/E, rate differentials) of each market's assets."},
	{"MARKET_STATS_INTERVAL", "15m", "How often the scheduler enqueues the verdict/factor statistics of each market (backtest over daily candles, and live); 0 disables them."},
	{"MARKET_WEBHOOK_INTERVAL", "5s", "Safety-net period of the webhook dispatcher (fan-out of verdict changes, due deliveries and retries); a committed verdict event wakes it at once."},
	{"MARKET_WEBHOOK_ALLOW_PRIVATE", "false", "Tests only: accept callback URLs on loopback and private addresses."},
	{"MARKET_WEBHOOK_CA_FILE", "", "Tests only: PEM file of an extra CA trusted for webhook deliveries."},
	{"MARKET_WEBHOOK_CONCURRENCY", "128", "Webhook sends in flight per worker process (one per subscription at most; a hanging receiver holds one for at most 10 s)."},
	{"MARKET_REQUEST_TIMEOUT", "4s", "Time budget of a public request: one whose database or Redis is broken, frozen or slow is answered 503 with Retry-After within it (a webhook test ping gets 10 s more)."},
	{"MARKET_FEED_HEADROOM", "0.8", "Fraction (0.1–1) of each provider host's documented request budget (Binance: 6,000 weight a minute on spot, 2,400 on futures) the deployment plans to use, shared by every worker process through Redis; the rest is a margin so the provider never answers 429 or 418."},
	{"MARKET_STREAM_DB_CONNS", "4", "Postgres connections of an api replica's event streams (GET /stream), apart from its 16 request connections, so streams never take a request's: one for the replica's reader of the log, the others for the pages of resuming streams' replays (each page at most 2 s). The sandbox's streams get a pool of the same size. 2 to 64."},
	{"MARKET_CANDLE_RETENTION", formatCandleRetention(worker.DefaultCandleRetention()), "How long candles of each timeframe are kept: comma-separated `timeframe=age` (`14d`, `2w`, `36h`, or `forever`); a timeframe not listed keeps its default. At least the span of the " + strconv.Itoa(api.MaxCandleLimit) + " candles GET /ohlcv serves (1m: 16h40m). Older candles are deleted every 15 minutes in small batches, and backfill does not load them."},
	{"MARKET_MAX_CANDLE_SYMBOLS", "all", "Symbols per combination whose candles are ingested and scored, highest volume first: `all` (or 0), or a cap for an operator whose request budget cannot carry the whole universe."},
}

// LoadConfig reads and validates the configuration. The error names the
// offending variable in one line.
func LoadConfig(getenv func(string) string) (Config, error) {
	get := func(name string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		for _, e := range EnvVars {
			if e.Name == name {
				return e.Default
			}
		}
		return ""
	}
	var c Config
	c.DatabaseURL = get("MARKET_DATABASE_URL")
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return c, fmt.Errorf("MARKET_DATABASE_URL: must be a postgres:// URL")
	}
	if c.SandboxDatabaseURL = get("MARKET_SANDBOX_DATABASE_URL"); c.SandboxDatabaseURL != "" {
		u, err := url.Parse(c.SandboxDatabaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return c, fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: must be a postgres:// URL")
		}
		if c.SandboxDatabaseURL == c.DatabaseURL {
			return c, fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: must not be MARKET_DATABASE_URL (the sandbox's data is kept apart; use another schema)")
		}
	}
	var err error
	if c.SandboxPipeline, err = strconv.ParseBool(get("MARKET_SANDBOX_PIPELINE")); err != nil {
		return c, fmt.Errorf("MARKET_SANDBOX_PIPELINE: must be true or false")
	}
	if c.SandboxPipeline && c.SandboxDatabaseURL != "" {
		return c, fmt.Errorf("MARKET_SANDBOX_PIPELINE: a sandbox pipeline writes MARKET_DATABASE_URL (the sandbox's); unset MARKET_SANDBOX_DATABASE_URL")
	}
	c.RedisURL = get("MARKET_REDIS_URL")
	if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return c, fmt.Errorf("MARKET_REDIS_URL: must be a redis:// or rediss:// URL")
	}
	if c.SandboxRedisURL = get("MARKET_SANDBOX_REDIS_URL"); c.SandboxRedisURL != "" {
		if u, err := url.Parse(c.SandboxRedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			return c, fmt.Errorf("MARKET_SANDBOX_REDIS_URL: must be a redis:// or rediss:// URL")
		}
		if c.SandboxRedisURL == c.RedisURL {
			return c, fmt.Errorf("MARKET_SANDBOX_REDIS_URL: must not be MARKET_REDIS_URL (the sandbox's queues are kept apart; use another database)")
		}
	}
	c.HTTPAddr = get("MARKET_HTTP_ADDR")
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return c, fmt.Errorf("MARKET_HTTP_ADDR: must be host:port (e.g. :8080): %v", err)
	}
	c.OpsAddr = get("MARKET_OPS_ADDR")
	if _, _, err := net.SplitHostPort(c.OpsAddr); err != nil {
		return c, fmt.Errorf("MARKET_OPS_ADDR: must be host:port (e.g. 127.0.0.1:8081): %v", err)
	}
	c.Region = strings.ToLower(get("MARKET_REGION"))
	if !domain.ValidRegion(c.Region) {
		return c, fmt.Errorf("MARKET_REGION: unknown region %q (known: %s)", c.Region, strings.Join(domain.Regions, ", "))
	}
	if s := get("MARKET_SECRET_KEY"); s == DemoSecretKeyValue {
		k := sha256.Sum256([]byte("marketd public demo key: never protect real secrets with it"))
		c.SecretKey, c.DemoSecretKey = k[:], true
	} else if s != "" {
		key, err := decodeKey(s)
		if err != nil {
			return c, fmt.Errorf("MARKET_SECRET_KEY: %v", err)
		}
		c.SecretKey = key
	}
	if c.AsynqmonWritable, err = strconv.ParseBool(get("MARKET_ASYNQMON_WRITABLE")); err != nil {
		return c, fmt.Errorf("MARKET_ASYNQMON_WRITABLE: must be true or false")
	}
	c.AsynqmonToken = get("MARKET_ASYNQMON_TOKEN")
	if c.AsynqmonWritable && len(c.AsynqmonToken) < 16 {
		return c, fmt.Errorf("MARKET_ASYNQMON_TOKEN: a writable asynqmon (MARKET_ASYNQMON_WRITABLE=true) needs a token of at least 16 characters")
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("MARKET_LOG_LEVEL"))); err != nil {
		return c, fmt.Errorf("MARKET_LOG_LEVEL: must be debug, info, warn or error")
	}
	for _, f := range strings.Split(get("MARKET_FEEDS"), ",") {
		if f = strings.TrimSpace(strings.ToLower(f)); f != "" {
			c.Feeds = append(c.Feeds, f)
		}
	}
	if len(c.Feeds) == 0 {
		return c, fmt.Errorf("MARKET_FEEDS: at least one feed is required")
	}
	for _, f := range c.Feeds {
		if !slices.Contains(feeds.KnownNames(), f) {
			return c, fmt.Errorf("MARKET_FEEDS: unknown feed %q (known: %s)", f, strings.Join(feeds.KnownNames(), ", "))
		}
	}
	if c.FeedURLs, err = parseFeedURLs(get("MARKET_FEED_URLS")); err != nil {
		return c, err
	}
	if c.OandaEnvironment = strings.ToLower(get("MARKET_OANDA_ENVIRONMENT")); c.OandaEnvironment != feeds.OandaLive && c.OandaEnvironment != feeds.OandaPractice {
		return c, fmt.Errorf("MARKET_OANDA_ENVIRONMENT: must be live or practice")
	}
	c.OandaToken, c.AlpacaKeyID, c.AlpacaSecret = get("MARKET_OANDA_TOKEN"), get("MARKET_ALPACA_KEY_ID"), get("MARKET_ALPACA_SECRET")
	if slices.Contains(c.Feeds, feeds.NameOanda) && c.OandaToken == "" {
		return c, fmt.Errorf("MARKET_OANDA_TOKEN: required by the oanda feed")
	}
	if slices.Contains(c.Feeds, feeds.NameAlpaca) && (c.AlpacaKeyID == "" || c.AlpacaSecret == "") {
		return c, fmt.Errorf("MARKET_ALPACA_KEY_ID: the alpaca feed needs MARKET_ALPACA_KEY_ID and MARKET_ALPACA_SECRET")
	}
	seed, err := strconv.ParseInt(get("MARKET_SYNTHETIC_SEED"), 10, 64)
	if err != nil {
		return c, fmt.Errorf("MARKET_SYNTHETIC_SEED: must be an integer")
	}
	c.SyntheticSeed = seed
	if c.SyntheticAssets, err = strconv.Atoi(get("MARKET_SYNTHETIC_ASSETS")); err != nil || c.SyntheticAssets < 1 || c.SyntheticAssets > feeds.SyntheticMaxCryptoAssets {
		return c, fmt.Errorf("MARKET_SYNTHETIC_ASSETS: must be an integer from 1 to %d (default %d)", feeds.SyntheticMaxCryptoAssets, feeds.SyntheticDefaultCryptoAssets)
	}
	if c.TickerInterval, err = time.ParseDuration(get("MARKET_TICKER_INTERVAL")); err != nil || c.TickerInterval < time.Second {
		return c, fmt.Errorf("MARKET_TICKER_INTERVAL: must be a duration of at least 1s (e.g. 10s)")
	}
	if c.CandleInterval, err = time.ParseDuration(get("MARKET_CANDLE_INTERVAL")); err != nil || c.CandleInterval < time.Second {
		return c, fmt.Errorf("MARKET_CANDLE_INTERVAL: must be a duration of at least 1s (e.g. 1m)")
	}
	if c.ScoreInterval, err = time.ParseDuration(get("MARKET_SCORE_INTERVAL")); err != nil || c.ScoreInterval < time.Second {
		return c, fmt.Errorf("MARKET_SCORE_INTERVAL: must be a duration of at least 1s (e.g. 1m)")
	}
	if c.ScoreTrigger, err = strconv.ParseBool(get("MARKET_SCORE_TRIGGER")); err != nil {
		return c, fmt.Errorf("MARKET_SCORE_TRIGGER: must be true or false")
	}
	if c.FundamentalsInterval, err = time.ParseDuration(get("MARKET_FUNDAMENTALS_INTERVAL")); err != nil || c.FundamentalsInterval < time.Second {
		return c, fmt.Errorf("MARKET_FUNDAMENTALS_INTERVAL: must be a duration of at least 1s (e.g. 15m)")
	}
	if c.StatsInterval, err = time.ParseDuration(get("MARKET_STATS_INTERVAL")); err != nil || (c.StatsInterval < time.Second && c.StatsInterval != 0) {
		return c, fmt.Errorf("MARKET_STATS_INTERVAL: must be a duration of at least 1s (e.g. 15m), or 0 to disable the statistics job")
	}
	if c.WebhookInterval, err = time.ParseDuration(get("MARKET_WEBHOOK_INTERVAL")); err != nil || c.WebhookInterval < time.Second {
		return c, fmt.Errorf("MARKET_WEBHOOK_INTERVAL: must be a duration of at least 1s (e.g. 5s)")
	}
	if c.WebhookAllowPrivate, err = strconv.ParseBool(get("MARKET_WEBHOOK_ALLOW_PRIVATE")); err != nil {
		return c, fmt.Errorf("MARKET_WEBHOOK_ALLOW_PRIVATE: must be true or false")
	}
	if f := get("MARKET_WEBHOOK_CA_FILE"); f != "" {
		if c.WebhookCAPEM, err = os.ReadFile(f); err != nil {
			return c, fmt.Errorf("MARKET_WEBHOOK_CA_FILE: %v", err)
		}
	}
	if c.WebhookConcurrency, err = strconv.Atoi(get("MARKET_WEBHOOK_CONCURRENCY")); err != nil || c.WebhookConcurrency < 1 || c.WebhookConcurrency > 4096 {
		return c, fmt.Errorf("MARKET_WEBHOOK_CONCURRENCY: must be an integer from 1 to 4096 (e.g. 128)")
	}
	if c.RequestTimeout, err = time.ParseDuration(get("MARKET_REQUEST_TIMEOUT")); err != nil || c.RequestTimeout < 100*time.Millisecond || c.RequestTimeout > 5*time.Minute {
		return c, fmt.Errorf("MARKET_REQUEST_TIMEOUT: must be a duration from 100ms to 5m (e.g. 4s)")
	}
	if c.FeedHeadroom, err = strconv.ParseFloat(get("MARKET_FEED_HEADROOM"), 64); err != nil || c.FeedHeadroom < 0.1 || c.FeedHeadroom > 1 {
		return c, fmt.Errorf("MARKET_FEED_HEADROOM: must be a fraction from 0.1 to 1 (e.g. 0.8)")
	}
	if c.StreamDBConns, err = strconv.Atoi(get("MARKET_STREAM_DB_CONNS")); err != nil || c.StreamDBConns < 2 || c.StreamDBConns > 64 {
		return c, fmt.Errorf("MARKET_STREAM_DB_CONNS: must be an integer from 2 to 64 (e.g. 4)")
	}
	if c.CandleRetention, err = parseCandleRetention(get("MARKET_CANDLE_RETENTION")); err != nil {
		return c, err
	}
	if v := strings.ToLower(get("MARKET_MAX_CANDLE_SYMBOLS")); v != "all" {
		if c.MaxCandleSymbols, err = strconv.Atoi(v); err != nil || c.MaxCandleSymbols < 0 {
			return c, fmt.Errorf("MARKET_MAX_CANDLE_SYMBOLS: must be all or a non-negative integer (0 = all)")
		}
	}
	return c, nil
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
			return nil, fmt.Errorf("MARKET_CANDLE_RETENTION: entry %q: must be timeframe=age with a timeframe of %s", entry, timeframeList())
		}
		if seen[tf] {
			return nil, fmt.Errorf("MARKET_CANDLE_RETENTION: entry %q: %s is given twice", entry, tf)
		}
		seen[tf] = true
		raw = strings.ToLower(strings.TrimSpace(raw))
		if raw == "forever" {
			delete(out, tf)
			continue
		}
		keep, err := parseAge(raw)
		if err != nil {
			return nil, fmt.Errorf("MARKET_CANDLE_RETENTION: entry %q: age must be like 14d, 2w, 36h or forever", entry)
		}
		if least := api.MaxCandleLimit * tf.Duration(); keep < least {
			return nil, fmt.Errorf("MARKET_CANDLE_RETENTION: entry %q: keeps fewer than the %d candles GET /ohlcv serves: at least %s",
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
			return nil, fmt.Errorf("MARKET_FEED_URLS: entry %q: must be name=url", entry)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("MARKET_FEED_URLS: entry %q: %s is given twice", entry, name)
		}
		if err := feeds.ValidateBaseURL(name, raw); err != nil {
			return nil, fmt.Errorf("MARKET_FEED_URLS: entry %q: %v", entry, err)
		}
		out[name] = raw
	}
	return out, nil
}

// feedsConfig is the feeds' configuration of the process: every provider
// request is booked in its host's budget, shared through rdb by every
// process of the deployment (they share its IP).
func (c Config) feedsConfig(rdb *redis.Client, logger *slog.Logger) feeds.Config {
	budget := hostbudget.New(hostbudget.Options{Redis: rdb, Headroom: c.FeedHeadroom, Logger: logger})
	return feeds.Config{Names: c.Feeds, OandaToken: c.OandaToken, OandaEnvironment: c.OandaEnvironment,
		AlpacaKeyID: c.AlpacaKeyID, AlpacaSecret: c.AlpacaSecret, BaseURLs: c.FeedURLs,
		Logger: logger, Seed: c.SyntheticSeed, SyntheticCryptoAssets: c.SyntheticAssets, Budget: budget}
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

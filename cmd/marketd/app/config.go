package app

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/marketscreener/market/domain"
)

// Config is every setting of the process, read from MARKET_* environment
// variables in one place and checked by Validate.
type Config struct {
	DatabaseURL string
	RedisURL    string
	HTTPAddr    string
	OpsAddr     string
	Region      string
	SecretKey   []byte // 32 bytes, for encrypting webhook secrets
	LogLevel    slog.Level
	Feeds       []string
}

// envVar documents one variable: the README's config table is this list.
type envVar struct {
	Name, Default, Doc string
}

// EnvVars lists every variable the process reads.
var EnvVars = []envVar{
	{"MARKET_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres URL (pgx format; `search_path` may be set as a query parameter)."},
	{"MARKET_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL for queues, rate-limit windows and cache invalidation."},
	{"MARKET_HTTP_ADDR", ":8080", "Public API listener (base path /api/v1/public, docs at /docs)."},
	{"MARKET_OPS_ADDR", "127.0.0.1:8081", "Operator listener: /healthz, /readyz, /metrics, /asynqmon/."},
	{"MARKET_REGION", domain.DefaultRegion, "Deployment region: picks the catalogue of exchanges (" + strings.Join(domain.Regions, ", ") + ")."},
	{"MARKET_SECRET_KEY", "", "32-byte key (64 hex chars or base64) encrypting webhook secrets at rest. Required by api/worker/all."},
	{"MARKET_LOG_LEVEL", "info", "debug, info, warn or error. Logs are JSON on stderr."},
	{"MARKET_FEEDS", "synthetic", "Comma-separated market-data feeds for the worker."},
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
	c.RedisURL = get("MARKET_REDIS_URL")
	if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return c, fmt.Errorf("MARKET_REDIS_URL: must be a redis:// or rediss:// URL")
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
	if s := get("MARKET_SECRET_KEY"); s != "" {
		key, err := decodeKey(s)
		if err != nil {
			return c, fmt.Errorf("MARKET_SECRET_KEY: %v", err)
		}
		c.SecretKey = key
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
	return c, nil
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

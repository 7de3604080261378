package admission

import (
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions parses a redis:// URL and applies the time-outs the gate
// needs: a dead or unreachable Redis must fail a request within ~200 ms
// (the fallback limiter then answers) instead of stalling it for the
// go-redis defaults of seconds, and a failed script is not retried, since a
// retry after a lost reply could record the request twice.
func RedisOptions(url string) (*redis.Options, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("admission: parse redis url: %w", err)
	}
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = 150 * time.Millisecond
	opts.WriteTimeout = 150 * time.Millisecond
	// Waiting for a pooled connection is load, not an outage: a large pool
	// and a long wait keep a burst from being mistaken for a dead Redis
	// (which would loosen the limit to per replica).
	opts.PoolSize = max(64, 10*runtime.GOMAXPROCS(0))
	opts.PoolTimeout = 2 * time.Second
	opts.MaxRetries = -1
	return opts, nil
}

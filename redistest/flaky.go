package redistest

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ErrDown is what a Flaky client's calls fail with while it is down.
var ErrDown = errors.New("redistest: redis is down")

// Flaky is a client of the test Redis that cannot reach it while down is
// set: its dials and its writes on open connections fail, as with a Redis
// that went away, and it retries nothing. Closed when the test ends.
func Flaky(tb testing.TB, down *atomic.Bool) *redis.Client {
	tb.Helper()
	opts := Options(tb)
	opts.MaxRetries = -1
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, ErrDown
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &flakyConn{Conn: c, down: down}, nil
	}
	rdb := redis.NewClient(opts)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// flakyConn fails every write while down is set.
type flakyConn struct {
	net.Conn
	down *atomic.Bool
}

func (c *flakyConn) Write(p []byte) (int, error) {
	if c.down.Load() {
		return 0, ErrDown
	}
	return c.Conn.Write(p)
}

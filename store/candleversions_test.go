package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marketscreener/market/store/storetest"
)

// TestVersionLockPerTimeframe: a writer of a scored timeframe's candles
// waits for an uncommitted writer of the same market, exchange and
// timeframe (the versions are judged in commit order, migration 00023),
// not for one of another timeframe or exchange (migration 00036: the lock
// had been one per schema).
func TestVersionLockPerTimeframe(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	write := func(lockTimeout, exchange, symbol, tf string) (rollback func(), err error) {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rollback = func() { _ = tx.Rollback(ctx) }
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, lockTimeout); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO candles (market, exchange, symbol, timeframe, open_time, open, high, low, close, volume)
			VALUES ('crypto', $1, $2, $3, '2026-11-20T00:00:00Z', 1, 1, 1, 1, 1)`, exchange, symbol, tf)
		return rollback, err
	}
	first, err := write("0", "binance", "BTC_USDT", "15m")
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	for _, w := range []struct{ exchange, tf string }{{"binance", "1h"}, {"okx", "15m"}} {
		rb, err := write("10s", w.exchange, "ETH_USDT", w.tf)
		rb()
		if err != nil {
			t.Fatalf("%s %s waited for a writer of binance 15m: %v", w.exchange, w.tf, err)
		}
	}
	rb, err := write("50ms", "binance", "ETH_USDT", "15m")
	rb()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("a second writer of binance 15m: %v, want it to wait for the first (lock_timeout, 55P03)", err)
	}
}

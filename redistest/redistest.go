// Package redistest gives tests a real Redis without letting them step on
// each other: every test works under a key prefix of its own, deleted when
// the test ends, so tests of every package run in parallel on one shared
// database. A test that really needs a whole database (FLUSHDB semantics)
// takes the isolated database with IsolatedDB, which one test holds at a time.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// IsolatedDBNumber is the Redis database handed to one test at a time by
// IsolatedDB. Nothing else may use it.
const IsolatedDBNumber = 14

// URL is the test Redis: MARKET_TEST_REDIS_URL or the local default, DB 15.
func URL() string {
	if u := os.Getenv("MARKET_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/15"
}

// Options parses URL, failing the test when it is malformed.
func Options(tb testing.TB) *redis.Options {
	tb.Helper()
	opts, err := redis.ParseURL(URL())
	if err != nil {
		tb.Fatalf("redistest: parse %s: %v", URL(), err)
	}
	return opts
}

// Client returns a client of the test Redis, closed at cleanup. It fails
// the test at once when Redis does not answer, rather than letting every
// assertion time out.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return connect(tb, Options(tb))
}

func connect(tb testing.TB, opts *redis.Options) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(opts)
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redistest: ping %s: %v", opts.Addr, err)
	}
	return rdb
}

// Prefix returns a key prefix no other test uses ("test:<random>:"). Every
// key under it is deleted (SCAN + DEL) when the test ends, so the shared
// database never needs a FLUSHALL.
func Prefix(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "test:" + hex.EncodeToString(b[:]) + ":"
	opts := Options(tb)
	tb.Cleanup(func() {
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		if err := DeletePrefix(context.Background(), rdb, prefix); err != nil {
			tb.Logf("redistest: clean up %s*: %v", prefix, err)
		}
	})
	return prefix
}

// DeletePrefix deletes every key starting with prefix.
func DeletePrefix(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := rdb.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return rdb.Del(ctx, batch...).Err()
	}
	return nil
}

// IsolatedDB returns a client of database IsolatedDBNumber, flushed, for
// the rare test that needs whole-database semantics (FLUSHDB, SCRIPT FLUSH,
// DBSIZE). Test processes of several packages may run at once, so the
// database is guarded by a lock key in the shared test database: the
// caller waits until no other test holds it, and releases it at cleanup.
func IsolatedDB(tb testing.TB) *redis.Client {
	tb.Helper()
	shared := Client(tb)
	ctx := context.Background()
	lockKey := "redistest:isolated-db-lock"
	var b [8]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, err := shared.SetNX(ctx, lockKey, token, 2*time.Minute).Result()
		if err != nil {
			tb.Fatalf("redistest: lock isolated db: %v", err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: isolated db %d still locked after 2 minutes", IsolatedDBNumber)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Cleanup(func() {
		// Release only our own lock (compare and delete in one step).
		const release = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
		if err := shared.Eval(context.Background(), release, []string{lockKey}, token).Err(); err != nil {
			tb.Logf("redistest: release isolated db: %v", err)
		}
	})
	opts := Options(tb)
	opts.DB = IsolatedDBNumber
	rdb := connect(tb, opts)
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		tb.Fatalf("redistest: flush isolated db: %v", err)
	}
	return rdb
}

// Leased databases: tests that run code with fixed Redis keys (asynq's
// queues, a whole marketd) need a database of their own. LeaseDB hands out
// one of these, flushed, to one test at a time across test processes.
const (
	firstLeasedDB = 1
	lastLeasedDB  = 12
)

// LeaseDB returns the URL of a flushed Redis database that no other test
// uses until this test ends.
func LeaseDB(tb testing.TB) string {
	tb.Helper()
	shared := Client(tb)
	ctx := context.Background()
	var b [8]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for n := firstLeasedDB; n <= lastLeasedDB; n++ {
			lockKey := fmt.Sprintf("redistest:db-lease:%d", n)
			ok, err := shared.SetNX(ctx, lockKey, token, 10*time.Minute).Result()
			if err != nil {
				tb.Fatalf("redistest: lease db: %v", err)
			}
			if !ok {
				continue
			}
			opts := Options(tb)
			opts.DB = n
			rdb := connect(tb, opts)
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				tb.Fatalf("redistest: flush leased db %d: %v", n, err)
			}
			tb.Cleanup(func() {
				_ = rdb.FlushDB(context.Background()).Err()
				const release = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
				_ = shared.Eval(context.Background(), release, []string{lockKey}, token).Err()
			})
			u := *opts
			return fmt.Sprintf("redis://%s/%d", u.Addr, n)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: no Redis database free after 3 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

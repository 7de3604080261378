package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/rediskeys"
)

// benchEnv is one prepared schema with its paying client.
type benchEnv struct {
	vars     map[string]string // the MARKET_* environment of the api
	schema   string
	clientID string
	key      string
}

// prepare creates the database when missing, a schema of its own, migrates
// and seeds it, and creates the paying client. cleanup drops it all.
func prepare(ctx context.Context, o options) (*benchEnv, func() error, error) {
	if err := ensureDatabase(ctx, o.databaseURL); err != nil {
		return nil, nil, err
	}
	e := &benchEnv{schema: "loadtest_" + randomHex(6)}
	if err := execSQL(ctx, o.databaseURL, "CREATE SCHEMA "+e.schema); err != nil {
		return nil, nil, fmt.Errorf("create schema: %w", err)
	}
	cleanup := func() error {
		forgetWindow(o.redisURL, e.clientID)
		if err := execSQL(context.Background(), o.databaseURL, "DROP SCHEMA "+e.schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", e.schema, err)
		}
		return nil
	}
	fail := func(err error) (*benchEnv, func() error, error) {
		return nil, nil, errors.Join(err, cleanup())
	}
	dbURL, err := withSearchPath(o.databaseURL, e.schema)
	if err != nil {
		return fail(err)
	}
	e.vars = map[string]string{
		"MARKET_DATABASE_URL": dbURL,
		"MARKET_REDIS_URL":    o.redisURL,
		"MARKET_LOG_LEVEL":    o.logLevel,
		"MARKET_SECRET_KEY":   randomHex(32),
	}
	if _, err := cli(ctx, e.vars, "migrate"); err != nil {
		return fail(err)
	}
	if err := seed(ctx, dbURL); err != nil {
		return fail(err)
	}
	if slices.Contains(o.paths, queryPath) {
		if err := seedScreen(ctx, dbURL, o.queryAssets); err != nil {
			return fail(err)
		}
	}
	if e.clientID, err = cli(ctx, e.vars, "clients", "create", "--org", "loadtest", "--tier", "enterprise", "--rate-limit", "100000000"); err != nil {
		return fail(err)
	}
	if e.key, err = cli(ctx, e.vars, "keys", "issue", "--client", e.clientID); err != nil {
		return fail(err)
	}
	return e, cleanup, nil
}

// ensureDatabase creates the database of databaseURL when it does not exist
// (through the postgres maintenance database of the same server).
func ensureDatabase(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.ContainsAny(name, `"`) {
		return fmt.Errorf("-database-url: no usable database name in %q", databaseURL)
	}
	maint := *u
	maint.Path = "/postgres"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, maint.String())
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE "`+name+`"`)
	return err
}

// cli runs one marketd command in-process and returns its trimmed stdout.
func cli(ctx context.Context, env map[string]string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: &stdout, Stderr: &stderr}
	if code := m.Run(ctx, args); code != 0 {
		return "", fmt.Errorf("marketd %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func execSQL(ctx context.Context, databaseURL, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// xactCount is the committed plus rolled-back transactions of the database
// so far (pg_stat_database, as the statistics collector last saw them).
func xactCount(ctx context.Context, databaseURL string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

func withSearchPath(databaseURL, schema string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("-database-url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// forgetWindow deletes the client's rate-limit log (it would expire by
// itself a minute later).
func forgetWindow(redisURL, clientID string) {
	if clientID == "" {
		return
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	k := rediskeys.Space("").RateLimit(clientID)
	_ = rdb.Del(ctx, k, k+":leases", k+":weights").Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

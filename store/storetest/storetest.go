// Package storetest gives each test a migrated Postgres schema of its own,
// dropped when the test ends, so store tests run in parallel and never
// depend on order.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/store"
)

// DatabaseURL is the test database: MARKET_TEST_DATABASE_URL or the local default.
func DatabaseURL() string {
	if u := os.Getenv("MARKET_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// NewSchemaName returns a fresh random schema name.
func NewSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t_" + hex.EncodeToString(b[:])
}

// CreateSchema creates an empty schema and drops it (cascade) at cleanup.
func CreateSchema(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	name := NewSchemaName()
	conn, err := pgx.Connect(ctx, DatabaseURL())
	if err != nil {
		tb.Fatalf("storetest: connect %s: %v", DatabaseURL(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("storetest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), DatabaseURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	})
	return name
}

// URLWithSchema returns DatabaseURL with search_path set to schema, for
// code (such as the real binary) that takes only a URL.
func URLWithSchema(schema string) string {
	u := DatabaseURL()
	sep := "?"
	for i := 0; i < len(u); i++ {
		if u[i] == '?' {
			sep = "&"
		}
	}
	return u + sep + "search_path=" + schema
}

// New returns a DB on a fresh migrated schema of its own.
func New(tb testing.TB) *store.DB {
	tb.Helper()
	return Open(tb, CreateSchema(tb))
}

// Open returns another handle (another process's, as far as the store's
// in-process caches go) on schema, migrated, closed when the test ends.
func Open(tb testing.TB, schema string) *store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), DatabaseURL(), store.Options{Schema: schema, MaxConns: 8})
	if err != nil {
		tb.Fatalf("storetest: open: %v", err)
	}
	tb.Cleanup(db.Close)
	if _, err := db.Migrate(context.Background()); err != nil {
		tb.Fatalf("storetest: migrate: %v", err)
	}
	return db
}

package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// A process warns at start when the server runs without autovacuum (this
// project's CI server does; a deployment must not), and says nothing when
// it runs with it.
func TestWarnWithoutAutovacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var on string
	if err := storetest.New(t).Pool.QueryRow(ctx, "SHOW autovacuum").Scan(&on); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.WarnWithoutAutovacuum(ctx)
	if warned := strings.Contains(buf.String(), "autovacuum off"); warned != (on == "off") {
		t.Errorf("server autovacuum = %s, warned = %v: %q", on, warned, buf.String())
	}
}

// Likewise for a shared_buffers under 1 GiB (Postgres's default is 128 MB).
func TestWarnSmallSharedBuffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	size, err := storetest.New(t).SharedBuffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if size < 16<<20 {
		t.Fatalf("shared_buffers read as %d bytes: the units were not applied", size)
	}
	var buf bytes.Buffer
	db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.WarnSmallSharedBuffers(ctx)
	if warned := strings.Contains(buf.String(), "small shared_buffers"); warned != (size < 1<<30) {
		t.Errorf("server shared_buffers = %d MB, warned = %v: %q", size>>20, warned, buf.String())
	}
}

package stream_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/stream"
)

// heldXidFor is how long the test's outside transactions hold their xids:
// many hub polls (200 ms) and commits (100 ms).
const heldXidFor = 3 * time.Second

// A write transaction in another database on the same server and an idle
// session in a transaction of this one, both holding an xid, hold no
// stream back: the events committed meanwhile all reach a subscriber
// while both are still open.
func TestHubStreamsWhileOtherTransactionsHoldXids(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()

	other := otherDatabase(t)
	otherTx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer otherTx.Rollback(ctx) //nolint:errcheck
	if _, err := otherTx.Exec(ctx, `CREATE TABLE held (x int); INSERT INTO held VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	idle, err := pgx.Connect(ctx, storetest.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)
	idleTx, err := idle.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idleTx.Rollback(ctx) //nolint:errcheck
	if _, err := idleTx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}

	hub := runHub(t, stream.HubConfig{Source: db, Poll: 200 * time.Millisecond})
	sub, err := hub.Subscribe(ctx, func(domain.StreamEvent) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	committed := make(chan int, 1)
	go func() {
		n := 0
		for end := time.Now().Add(heldXidFor); time.Now().Before(end); n++ {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
				VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp())`, fmt.Sprintf("E%d", n)); err != nil {
				t.Error(err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		committed <- n
	}()
	want, got := -1, 0
	var maxGap time.Duration
	last := time.Now()
	for want < 0 || got < want {
		select {
		case n := <-committed:
			want = n
		case e := <-sub.C:
			if e.Verdict == nil || e.Verdict.Symbol != fmt.Sprintf("E%d", got) {
				t.Fatalf("event %d: %+v", got, e.Verdict)
			}
			got++
			maxGap, last = max(maxGap, time.Since(last)), time.Now()
		case <-time.After(heldXidFor + 10*time.Second):
			t.Fatalf("%d of the events committed while other transactions held xids reached the subscriber (want %d)", got, want)
		}
	}
	// Both outside transactions are still open: nothing waited for them.
	for name, tx := range map[string]pgx.Tx{"another database's": otherTx, "this database's idle": idleTx} {
		var xid string
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil || xid == "" {
			t.Fatalf("%s transaction ended early (%v)", name, err)
		}
	}
	t.Logf("%d events while two outside transactions held xids; longest gap between two %s (one commit every 100 ms)", got, maxGap)
}

// otherDatabase creates a database of its own on the test server, dropped
// at cleanup, and returns a connection to it.
func otherDatabase(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "market_test_other_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, storetest.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(storetest.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close(context.Background())
		c, err := pgx.Connect(context.Background(), storetest.DatabaseURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return conn
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// runHold streams screener refreshes while a write transaction in another
// database and an idle session in a transaction of this one hold xids,
// and prints the longest gap between two events received meanwhile.
func runHold(ctx context.Context, b *bench, hold, every time.Duration) {
	key := b.client(ctx, "holder")
	p := b.api(0)
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	waitReady("http://127.0.0.1:19420/readyz")

	var mu sync.Mutex
	var received []time.Time
	opened := make(chan struct{})
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:19410/api/v1/public/stream?market=crypto&events=screener", nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			check(fmt.Errorf("open the stream: %v %v", resp, err))
		}
		close(opened)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: screener") {
				mu.Lock()
				received = append(received, time.Now())
				mu.Unlock()
			}
		}
	}()
	<-opened
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	var committed []time.Time
	refresh := func() {
		check(b.db.ReplaceTickers(ctx, spot, []domain.Ticker{{Symbol: "BTC_USDT", Price: 1, Volume: 1, UpdatedAt: time.Now()}}))
		committed = append(committed, time.Now())
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(every) {
		refresh()
	}

	other := fmt.Sprintf("streambench_other_%d", time.Now().UnixNano())
	_, err := b.admin.Exec(ctx, "CREATE DATABASE "+other+" TEMPLATE template0")
	check(err)
	defer b.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+other+" WITH (FORCE)") //nolint:errcheck
	cfg, err := pgx.ParseConfig(b.dbURL)
	check(err)
	cfg.Database = other
	oc, err := pgx.ConnectConfig(ctx, cfg)
	check(err)
	defer oc.Close(context.Background())
	otx, err := oc.Begin(ctx)
	check(err)
	_, err = otx.Exec(ctx, `CREATE TABLE held (x int); INSERT INTO held VALUES (1)`)
	check(err)
	idle, err := pgx.Connect(ctx, b.dbURL)
	check(err)
	defer idle.Close(context.Background())
	itx, err := idle.Begin(ctx)
	check(err)
	_, err = itx.Exec(ctx, `SELECT pg_current_xact_id()`)
	check(err)

	from := time.Now()
	n0 := len(committed)
	for end := from.Add(hold); time.Now().Before(end); time.Sleep(every) {
		refresh()
	}
	to := time.Now()
	time.Sleep(every) // the last refresh's event
	_ = otx.Rollback(ctx)
	_ = itx.Rollback(ctx)

	mu.Lock()
	defer mu.Unlock()
	var maxGap time.Duration
	last, got := from, 0
	for _, at := range received {
		if at.Before(from) || at.After(to.Add(every)) {
			continue
		}
		got++
		maxGap = max(maxGap, at.Sub(last))
		last = at
	}
	maxGap = max(maxGap, to.Sub(last))
	fmt.Printf("held %s: a write transaction in another database and an idle-in-transaction session here\n", hold)
	fmt.Printf("screener refreshes committed every %s meanwhile: %d; received on the live stream: %d; longest gap %s\n",
		every, len(committed)-n0, got, maxGap.Round(time.Millisecond))
}

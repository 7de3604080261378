package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// runReplay fills a 48 h log, replays it on streams of one key from its
// oldest id, and measures another client's GET /usage meanwhile.
func runReplay(ctx context.Context, b *bench, streams, verdicts, screener, usageRate int, usageFor time.Duration) {
	replayer, other := b.client(ctx, "replayer"), b.client(ctx, "other")
	start := time.Now()
	combos := fillLog(ctx, b, verdicts, screener)
	var oldest int64
	var rows, want int
	check(b.db.Pool.QueryRow(ctx, `SELECT o.id, (SELECT count(*) FROM stream_events),
			(SELECT count(*) FROM stream_events WHERE kind = 'verdict_changed' AND seq > o.seq)
		FROM (SELECT id, seq FROM stream_events ORDER BY seq LIMIT 1) o`).Scan(&oldest, &rows, &want))
	fmt.Printf("log: %d rows (%d verdict changes, %d screener events over %d combinations, 48 h), filled in %s\n",
		rows, verdicts, screener, combos, time.Since(start).Round(time.Second))

	p := b.api(0)
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	waitReady("http://127.0.0.1:19420/readyz")
	base := "http://127.0.0.1:19410/api/v1/public"

	type replay struct {
		took               time.Duration
		verdicts, screener int
		err                error
	}
	results := make([]replay, streams)
	var wg sync.WaitGroup
	replayStart := time.Now()
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, s, err := readReplay(base+"/stream", replayer, oldest, want, combos, 5*time.Minute)
			results[i] = replay{took: time.Since(replayStart), verdicts: v, screener: s, err: err}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var lat []time.Duration
	statuses := map[int]int{}
	tick := time.NewTicker(time.Second / time.Duration(usageRate))
	defer tick.Stop()
	until := time.Now().Add(usageFor)
	for replaying := true; replaying || time.Now().Before(until); {
		select {
		case <-done:
			replaying = false
			done = nil
		case <-tick.C:
			req, _ := http.NewRequest(http.MethodGet, base+"/usage", nil)
			req.Header.Set("X-API-Key", other)
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses[-1]++
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
			statuses[resp.StatusCode]++
		}
	}
	fmt.Printf("%d streams of one enterprise key resuming from the oldest id (%d)\n", streams, oldest)
	var took []time.Duration
	for i, r := range results {
		if r.err != nil || r.verdicts != want || r.screener != combos {
			fmt.Printf("  stream %d: %d verdict changes, %d screener events in %s: %v\n", i, r.verdicts, r.screener, r.took.Round(time.Millisecond), r.err)
		}
		took = append(took, r.took)
	}
	slices.Sort(took)
	fmt.Printf("  replays complete (%d verdict changes + %d screener events each): fastest %s, slowest %s\n",
		want, combos, took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	slices.Sort(lat)
	non200 := 0
	for code, n := range statuses {
		if code != http.StatusOK {
			non200 += n
		}
	}
	if len(lat) > 0 {
		fmt.Printf("other client's GET /usage: %d requests, p50 %s  p99 %s  max %s, non-200 %d %v\n", len(lat)+statuses[-1],
			lat[len(lat)/2].Round(time.Millisecond/10), lat[len(lat)*99/100].Round(time.Millisecond/10), lat[len(lat)-1].Round(time.Millisecond/10), non200, statuses)
	}
	reportStreamQueries("http://127.0.0.1:19420/metrics")
}

// fillLog writes a 48 h log straight into the schema: verdict changes and
// screener events interleaved by time, numbered in that order, as the
// log's triggers would have (they are off for the fill: one statement
// instead of 175,000 commits). It returns the number of combinations.
func fillLog(ctx context.Context, b *bench, verdicts, screener int) int {
	combos := domain.Catalogue("global")
	tx, err := b.db.Pool.Begin(ctx)
	check(err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`)
	check(err)
	_, err = tx.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		SELECT (ARRAY['crypto','forex','stocks'])[1 + i % 3], 'S' || (i % 300) || '_USDT', 'neutral', 'growth', 25,
			now() - interval '48 hours' + (i * 172800.0 / $1) * interval '1 second'
		FROM generate_series(1, $1) i`, verdicts)
	check(err)
	var markets, exchanges, instruments []string
	for _, c := range combos {
		markets, exchanges, instruments = append(markets, string(c.Market)), append(exchanges, c.Exchange), append(instruments, c.Instrument)
	}
	per := screener / len(combos)
	_, err = tx.Exec(ctx, `INSERT INTO stream_events (kind, market, exchange, instrument, verdict_event_id, at, seq)
		SELECT kind, market, exchange, instrument, vid, at, nextval('stream_event_seqs') FROM (
			SELECT 'screener' AS kind, c.market, c.exchange, c.instrument, NULL::bigint AS vid,
				now() - interval '48 hours' + (k * 172800.0 / $4) * interval '1 second' AS at
			FROM unnest($1::text[], $2::text[], $3::text[]) c (market, exchange, instrument), generate_series(1, $4) k
			UNION ALL
			SELECT 'verdict_changed', e.market, NULL, NULL, e.id, e.at FROM verdict_events e
			ORDER BY at) x`, markets, exchanges, instruments, per)
	check(err)
	_, err = tx.Exec(ctx, `INSERT INTO stream_screener_latest (market, exchange, instrument, event_id, seq)
		SELECT DISTINCT ON (market, exchange, instrument) market, exchange, instrument, id, seq
		FROM stream_events WHERE kind = 'screener' ORDER BY market, exchange, instrument, seq DESC`)
	check(err)
	check(tx.Commit(ctx))
	_, err = b.db.Pool.Exec(ctx, `ANALYZE stream_events`)
	check(err)
	// Screener rows to render (each refresh is a real one: it adds the
	// combination's newest event).
	for _, c := range combos {
		var rows []domain.Ticker
		for i := range 100 {
			rows = append(rows, domain.Ticker{Symbol: fmt.Sprintf("S%d_USDT", i), Price: 100 + float64(i), Volume: 1e6, UpdatedAt: time.Now()})
		}
		check(b.db.ReplaceTickers(ctx, c, rows))
	}
	return len(combos)
}

// readReplay opens a stream resuming after id and reads until it has
// every verdict change and a screener event per combination, or until
// the deadline.
func readReplay(url, key string, after int64, verdicts, combos int, within time.Duration) (v, s int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		switch sc.Text() {
		case "event: verdict_changed":
			v++
		case "event: screener":
			s++
		case "event: resync", "event: closed":
			return v, s, fmt.Errorf("%s", sc.Text())
		}
		if v >= verdicts && s >= combos {
			return v, s, nil
		}
	}
	return v, s, fmt.Errorf("the stream ended: %v", sc.Err())
}

// reportStreamQueries prints the api's stream query durations from its
// metrics, by query: how many, how many over 1 s and over 2 s, and the
// smallest bucket holding them all (the maximum's upper bound).
func reportStreamQueries(metricsURL string) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		log.Printf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	type bucket struct {
		le string
		n  float64
	}
	byQuery := map[string][]bucket{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "marketd_stream_query_duration_seconds_bucket{") {
			continue
		}
		var query, le string
		for _, kv := range strings.Split(line[strings.IndexByte(line, '{')+1:strings.IndexByte(line, '}')], ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "query":
				query = v
			case "le":
				le = v
			}
		}
		n, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		byQuery[query] = append(byQuery[query], bucket{le, n})
	}
	fmt.Println("stream queries (marketd_stream_query_duration_seconds):")
	for _, q := range []string{"replay", "position", "last", "hub"} {
		bs := byQuery[q]
		if len(bs) == 0 {
			continue
		}
		total := bs[len(bs)-1].n
		var le1, le2 float64
		bound := "+Inf"
		for i := len(bs) - 1; i >= 0; i-- {
			switch bs[i].le {
			case "1":
				le1 = bs[i].n
			case "2":
				le2 = bs[i].n
			}
			if bs[i].n == total {
				bound = bs[i].le
			}
		}
		fmt.Printf("  %-8s %6.0f queries, %3.0f over 1 s, %3.0f over 2 s, max <= %s s\n", q, total, total-le1, total-le2, bound)
	}
}

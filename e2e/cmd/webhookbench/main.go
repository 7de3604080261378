// Command webhookbench measures the webhook dispatcher: how long until one
// verdict change reaches N subscriptions over https, and the dispatcher's
// CPU per delivery, against a baseline of the same signed POSTs sent by a
// bare loop (same client, same concurrency, no Postgres), in one run:
//
//  1. it starts the receiver as a child process (this program with
//     -receiver): an https server on 127.0.0.1 with a throw-away
//     certificate, answering 204 at once, except under /hang/ where it
//     never answers (the dispatcher's 10 s time-out ends those);
//  2. baseline: N signed POSTs with -concurrency in flight;
//  3. it creates a fresh schema in the test database, N/10 clients with 10
//     subscriptions each, and for each scenario (all healthy; -hang of the
//     receivers hanging) inserts one crypto verdict change and runs one
//     dispatcher pass (fan-out, claims, sends, records) in this process;
//  4. it prints, per scenario, the time until every healthy subscription's
//     delivery was recorded as delivered, the time until the pass ended
//     (hanging ones time out), and this process's CPU (user+system) per
//     delivery; then drops the schema.
//
// Postgres runs in its own processes: its CPU is not in the per-delivery
// figure.
//
//	go run ./e2e/cmd/webhookbench [-subs 1000] [-hang 0.1] [-concurrency 128]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/webhook"
	"github.com/marketscreener/market/worker"
)

func main() {
	receiver := flag.Bool("receiver", false, "run as the https receiver (internal)")
	subs := flag.Int("subs", 1000, "subscriptions (10 per client)")
	hang := flag.Float64("hang", 0.1, "fraction of receivers that never answer, in the second scenario")
	concurrency := flag.Int("concurrency", worker.DefaultDeliveryConcurrency, "dispatcher sends in flight")
	dbURL := flag.String("database-url", defaultDB(), "Postgres database in which a temporary schema is created")
	flag.Parse()
	if *receiver {
		runReceiver()
		return
	}
	if err := run(*subs, *hang, *concurrency, *dbURL); err != nil {
		fmt.Fprintln(os.Stderr, "webhookbench:", err)
		os.Exit(1)
	}
}

func defaultDB() string {
	if u := os.Getenv("MARKET_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// runReceiver serves until stdin closes; it prints its URL and its
// certificate (base64 PEM) on the first line of stdout.
func runReceiver() {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.URL.Path, "/hang/") {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	// Dials the client abandons (it found an idle connection first) end
	// in handshake EOFs: not worth a line each.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	fmt.Printf("%s %s\n", srv.URL, base64.StdEncoding.EncodeToString(ca))
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(subs int, hang float64, concurrency int, dbURL string) (err error) {
	ctx := context.Background()
	// 1. The receiver, in its own process.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "-receiver")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return fmt.Errorf("receiver said %q", line)
	}
	base := fields[0]
	ca, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return err
	}
	client := webhook.NewClient(webhook.ClientConfig{AllowPrivate: true, ExtraRootsPEM: ca})

	// 2. Baseline: the same signed POSTs from a bare loop.
	secret, _ := domain.NewWebhookSecret()
	body := webhook.VerdictBody(1, domain.Crypto, "BTC_USDT", "neutral", "growth", 42, time.Now(), analytics.CurrentVersion().Name)
	sender := webhook.Sender{Client: client}
	cpu0, t0 := cpu(), time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	var failed int
	var mu sync.Mutex
	for i := range subs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res := sender.Send(ctx, fmt.Sprintf("%s/ok/%d", base, i), webhook.Message{ID: "1", Body: body, Secret: secret})
			if !res.Err.OK() {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	baseWall, baseCPU := time.Since(t0), cpu()-cpu0
	if failed > 0 {
		return fmt.Errorf("baseline: %d of %d sends failed: the run is invalid", failed, subs)
	}
	client.CloseIdleConnections()

	// 3. A schema of our own, dropped whatever happens.
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "webhookbench_" + hex.EncodeToString(b[:])
	if err := execSQL(ctx, dbURL, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		if derr := execSQL(context.Background(), dbURL, "DROP SCHEMA "+schema+" CASCADE"); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	db, err := store.Open(ctx, dbURL, store.Options{Schema: schema, MaxConns: 16})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	box, _ := domain.NewSecretBox(bytes.Repeat([]byte{7}, 32))
	hanging := map[string]bool{}
	nHang := int(float64(subs) * hang)
	for i := 0; i < subs; i += domain.MaxWebhooksPerClient {
		c := &domain.Client{OrgName: fmt.Sprintf("bench %d", i), Tier: domain.Enterprise, Markets: domain.Markets}
		if err := db.CreateClient(ctx, c); err != nil {
			return err
		}
		for j := i; j < min(i+domain.MaxWebhooksPerClient, subs); j++ {
			// Every 1/hang-th subscription (spread over clients) may hang.
			path := fmt.Sprintf("/ok/%d", j)
			if nHang > 0 && j%(subs/nHang) == 0 && len(hanging) < nHang {
				path = fmt.Sprintf("/hang/%d", j)
			}
			w, _, err := db.CreateWebhook(ctx, box, c.ID, base+path, nil)
			if err != nil {
				return err
			}
			if strings.Contains(path, "/hang/") {
				hanging[w.ID] = true
			}
		}
	}
	// The hanging receivers take part only in the second scenario.
	setHang := func(on bool) error {
		for id := range hanging {
			path := "/ok/"
			if on {
				path = "/hang/"
			}
			if _, err := db.Pool.Exec(ctx, `UPDATE webhooks SET callback_url = $2 || $3 || id::text WHERE id = $1`, id, base, path); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Printf("webhookbench: %d subscriptions (%d clients), dispatcher concurrency %d, receiver in a separate process on %s\n",
		subs, (subs+9)/10, concurrency, base)
	fmt.Printf("%-34s %12s %12s %14s %12s\n", "scenario", "healthy done", "pass done", "CPU/delivery", "deliveries")
	fmt.Printf("%-34s %12s %12s %14s %12d\n", "baseline: bare signed POST loop", ms(baseWall), ms(baseWall),
		us(baseCPU/time.Duration(subs)), subs)
	for _, sc := range []struct {
		name string
		hang bool
	}{{"dispatcher, all healthy", false}, {fmt.Sprintf("dispatcher, %d%% hanging", int(hang*100)), true}} {
		if sc.hang && nHang == 0 {
			continue
		}
		if err := setHang(sc.hang); err != nil {
			return err
		}
		healthy := subs
		if sc.hang {
			healthy -= len(hanging)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
			VALUES ('crypto', 'BTC_USDT', 'neutral', 'growth', 42, clock_timestamp())`); err != nil {
			return err
		}
		var start time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&start); err != nil {
			return err
		}
		d := &worker.Dispatcher{Store: db, Box: box, Client: client, Concurrency: concurrency,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		cpu0, t0 := cpu(), time.Now()
		done := make(chan error, 1)
		var sent int
		go func() {
			n, err := d.Dispatch(ctx)
			sent = n
			done <- err
		}()
		var healthyAt time.Duration
		giveUp := time.Now().Add(time.Minute)
		for healthyAt == 0 {
			if time.Now().After(giveUp) {
				return fmt.Errorf("%s: not every healthy subscription was delivered within a minute: the run is invalid", sc.name)
			}
			var n int
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered' AND delivered_at >= $1`,
				start).Scan(&n); err != nil {
				return err
			}
			if n >= healthy {
				healthyAt = time.Since(t0)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := <-done; err != nil {
			return err
		}
		wall, used := time.Since(t0), cpu()-cpu0
		fmt.Printf("%-34s %12s %12s %14s %12d\n", sc.name, ms(healthyAt), ms(wall), us(used/time.Duration(max(sent, 1))), sent)
		client.CloseIdleConnections()
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }

func execSQL(ctx context.Context, databaseURL, sql string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

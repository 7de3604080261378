package app_test

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/ops"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/worker"
)

// scrape reads a /metrics page.
func scrape(t *testing.T, opsAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + opsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sum adds the values of a family's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	f := fams[name]
	if f == nil {
		return 0
	}
series:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// TestMetricsOfARunningDeployment scrapes /metrics of a running
// `marketd all` (synthetic feed) and checks that every family the README
// documents is there, that the series move with the work (ingest rows,
// scoring, a webhook delivered to a local receiver, the gate's decisions),
// and that no label carries a symbol, a client, a key or a URL.
func TestMetricsOfARunningDeployment(t *testing.T) {
	t.Parallel()
	var received atomic.Int64
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	for k, v := range map[string]string{
		"MARKET_REDIS_URL":             redistest.LeaseDB(t), // asynq queues of its own
		"MARKET_FEEDS":                 "synthetic",
		"MARKET_SECRET_KEY":            strings.Repeat("cd", 32),
		"MARKET_TICKER_INTERVAL":       "1s",
		"MARKET_CANDLE_INTERVAL":       "2s",
		"MARKET_SCORE_INTERVAL":        "2s",
		"MARKET_STATS_INTERVAL":        "2s",
		"MARKET_WEBHOOK_INTERVAL":      "1s",
		"MARKET_WEBHOOK_ALLOW_PRIVATE": "true",
		"MARKET_WEBHOOK_CA_FILE":       ca,
		"MARKET_MAX_CANDLE_SYMBOLS":    "5",
	} {
		env[k] = v
	}
	mustRun(t, env, "migrate")
	key := mustRun(t, env, "demo-key")
	srv := startServer(t, env, "all")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"

	// The gate decides: one admitted, one refused.
	if r := get(t, base+"/usage", key); r.status != http.StatusOK {
		t.Fatalf("usage: %d %v", r.status, r.body)
	}
	if r := get(t, base+"/usage", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("usage without a key: %d", r.status)
	}
	// An event stream opened and closed: its first subscription reads where
	// the log ends (marketd_stream_query_duration_seconds{query="last"}).
	sctx, stopStream := context.WithTimeout(context.Background(), 10*time.Second)
	sreq, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/stream", nil)
	sreq.Header.Set("X-API-Key", key)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	if sresp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", sresp.StatusCode)
	}
	sresp.Body.Close()
	stopStream()
	// A subscription to a local receiver, and a verdict change for it.
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks", strings.NewReader(`{"callback_url":"`+rcv.URL+`/hook","market":"crypto"}`))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("subscribe: %d", resp.StatusCode)
	}
	db, err := store.Open(context.Background(), env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', 'BTC_USDT', 'neutral', 'decline', -27, now())`); err != nil {
		t.Fatal(err)
	}
	// An ingest task for a combination no feed serves: an ingest error.
	opt, err := asynq.ParseRedisURI(env["MARKET_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	qc := asynq.NewClient(opt)
	defer qc.Close()
	bad := domain.Combination{Market: domain.Crypto, Exchange: "nowhere", Instrument: "spot"}
	if _, err := qc.Enqueue(worker.NewIngestTickersTask(bad, time.Now()), asynq.Queue(worker.QueueLive), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}

	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := ops.DocumentedFamilies(readme)
	var (
		fams      map[string]*dto.MetricFamily
		firstRows = -1.0
		missing   string
	)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		fams = scrape(t, srv.OpsAddr())
		missing = ""
		for _, name := range documented {
			if fams[name] == nil {
				missing += " " + name
			}
		}
		rows := sum(fams, "marketd_ingest_rows_stored_total", nil)
		if firstRows < 0 && rows > 0 {
			firstRows = rows
		}
		checks := map[string]bool{
			"every documented family": missing == "",
			"ingest rows grow":        firstRows > 0 && rows > firstRows,
			"ingest runs":             sum(fams, "marketd_ingest_runs_total", map[string]string{"outcome": "success"}) > 0,
			"an ingest error":         sum(fams, "marketd_ingest_errors_total", map[string]string{"exchange": "nowhere", "category": "other"}) > 0,
			"feed freshness":          sum(fams, "marketd_feed_last_success_timestamp_seconds", map[string]string{"kind": "tickers"}) > 0,
			"scoring runs":            sum(fams, "marketd_scoring_runs_total", map[string]string{"outcome": "success"}) > 0,
			"statistics runs":         sum(fams, "marketd_statistics_runs_total", nil) > 0,
			"a delivery succeeded":    sum(fams, "marketd_webhook_deliveries_total", map[string]string{"outcome": "success"}) >= 1,
			"delivery latency":        sum(fams, "marketd_webhook_delivery_latency_seconds", nil) >= 1,
			"admitted":                sum(fams, "marketd_admission_requests_total", map[string]string{"decision": "admitted"}) >= 1,
			"refused, missing key":    sum(fams, "marketd_admission_requests_total", map[string]string{"reason": "missing_key"}) >= 1,
			"key cache lookups":       sum(fams, "marketd_admission_key_cache_lookups_total", nil) >= 1,
			"postgres up":             sum(fams, "marketd_dependency_up", map[string]string{"dependency": "postgres"}) == 1,
			"redis up":                sum(fams, "marketd_dependency_up", map[string]string{"dependency": "redis"}) == 1,
			"asynq processed tasks":   sum(fams, "asynq_tasks_processed_total", nil) > 0,
			"asynq knows every queue": len(fams["asynq_queue_size"].GetMetric()) >= len(worker.Queues),
		}
		var failing []string
		for name, ok := range checks {
			if !ok {
				failing = append(failing, name)
			}
		}
		if len(failing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s, not yet: %v (missing families:%s; %d deliveries received)", failing, missing, received.Load())
		}
	}

	// Bounded cardinality: no label names a symbol, a client, a key or a
	// URL, and no value looks like one.
	series := 0
	for name, f := range fams {
		if !strings.HasPrefix(name, "marketd_") && !strings.HasPrefix(name, "asynq_") {
			continue
		}
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "symbol", "client", "client_id", "key", "url", "callback_url", "webhook_id":
					t.Errorf("%s has a %s label", name, l.GetName())
				}
				if v := l.GetValue(); strings.Contains(v, "_USDT") || strings.Contains(v, "://") || strings.HasPrefix(v, "msk_") {
					t.Errorf("%s{%s=%q}: a symbol, URL or key in a label", name, l.GetName(), v)
				}
			}
		}
	}
	if series > 5000 {
		t.Errorf("%d marketd/asynq series: cardinality is not bounded", series)
	}
	t.Logf("%d documented families, %d series, %d deliveries received", len(documented), series, received.Load())

	// A role without the api serves the shared series too.
	sched := startServer(t, env, "scheduler")
	waitReady(t, sched)
	fams = scrape(t, sched.OpsAddr())
	for _, name := range []string{"marketd_feed_last_success_age_seconds", "marketd_webhook_pending_deliveries",
		"asynq_queue_latency_seconds", "marketd_dependency_up", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("the scheduler's /metrics lacks %s", name)
		}
	}
}

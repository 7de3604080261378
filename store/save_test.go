package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// dumpSaved reads what SaveAnalytics writes, every column, in a stable order.
func dumpSaved(t *testing.T, db *store.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT concat_ws('|', market, style, symbol, exchange, overall_score, verdict, price, change_pct, sparkline, candle_time,
			candle_close, updated_at, candles_used, instrument, fundamentals_at, result::text) FROM analytics_reports ORDER BY 1`,
		`SELECT concat_ws('|', market, style, symbol, published_at, exchange, instrument, overall_score, verdict, price, change_pct,
			candle_time, candle_close, candles_used, daily, result::text) FROM analytics_report_archive ORDER BY 1`,
		`SELECT concat_ws('|', market, style, symbol, at, overall_score, technical_score, fundamental_score, verdict, price, model_version)
			FROM analytics_snapshots ORDER BY 1`,
		`SELECT concat_ws('|', market, symbol, old_verdict, new_verdict, overall_score, at, model_version) FROM verdict_events ORDER BY 1`,
	} {
		rows, err := db.Pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		rows.Close()
	}
	return out
}

// SaveAnalytics saves a batch in one statement; it stores exactly what
// the statement per record stored (reports, archive, snapshots, events,
// and the events counted), over random runs: new assets, rescored ones,
// stale prev (a racing run saved first), older candles, verdict changes in
// the default style and others, sparklines of any length, with and
// without fundamentals, results whose texts hold control characters (the
// record separator between the batch's results among them).
func TestSaveAnalyticsSetMatchesPerRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set, perRecord := storetest.New(t), storetest.New(t)
	rng := rand.New(rand.NewPCG(3, 5))
	verdicts := []analytics.Verdict{analytics.VerdictGrowth, analytics.VerdictNeutral, analytics.VerdictDecline}
	syms := make([]string, 12)
	for i := range syms {
		syms[i] = fmt.Sprintf("S%02d_USDT", i)
	}
	stored := map[analytics.Style]map[string]store.AnalyticsRecord{}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for run := range 40 {
		at = at.Add(time.Duration(1+rng.IntN(600)) * time.Minute)
		style := []analytics.Style{analytics.Swing, analytics.Scalp}[rng.IntN(2)]
		if stored[style] == nil {
			stored[style] = map[string]store.AnalyticsRecord{}
		}
		prev := map[string]store.AnalyticsRecord{}
		var recs []store.AnalyticsRecord
		for _, sym := range syms {
			if rng.IntN(4) == 0 {
				continue
			}
			if p, ok := stored[style][sym]; ok {
				if rng.IntN(8) == 0 {
					p.UpdatedAt = p.UpdatedAt.Add(-time.Second) // a racing run saved first
				}
				prev[sym] = p
			}
			score := rng.IntN(201) - 100
			v := verdicts[rng.IntN(3)]
			res := analytics.Result{TechnicalScore: score, OverallScore: score, Verdict: v, ModelVersion: []string{"", "v1-test"}[rng.IntN(2)]}
			if rng.IntN(2) == 0 {
				f := rng.IntN(100)
				res.FundamentalScore = &f
			}
			if rng.IntN(3) == 0 { // texts with what the results' separator and JSON escape
				res.Summary = analytics.Message{Key: "summary", Args: analytics.Args{{Name: "symbol", Value: "A\x1eB \"é\" \u2028 \x00\\"}}}
			}
			spark := make([]float64, rng.IntN(31))
			for i := range spark {
				spark[i] = 100 + rng.NormFloat64()
			}
			ct := at.Truncate(4 * time.Hour)
			if rng.IntN(10) == 0 {
				ct = ct.Add(-48 * time.Hour) // an older candle than the stored report's
			}
			rec := store.AnalyticsRecord{Market: domain.Crypto, Style: style, Symbol: sym, Exchange: "binance", Result: &res,
				OverallScore: score, Verdict: v, Price: 100 + rng.Float64(), ChangePct: rng.NormFloat64(), Sparkline: spark,
				CandleTime: ct, CandleClose: 100 + rng.Float64(), UpdatedAt: at, CandlesUsed: 500, Instrument: "spot"}
			if rng.IntN(2) == 0 {
				fa := at.Add(-time.Hour)
				rec.FundamentalsAt = &fa
			}
			recs = append(recs, rec)
		}
		nSet, err := set.SaveAnalytics(ctx, recs, prev)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		nRec, err := store.SaveAnalyticsPerRecord(perRecord, ctx, recs, prev)
		if err != nil {
			t.Fatalf("run %d (per record): %v", run, err)
		}
		if nSet != nRec {
			t.Fatalf("run %d: %d events counted, the statement per record counted %d", run, nSet, nRec)
		}
		list, err := set.AnalyticsList(ctx, domain.Crypto, style)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			stored[style][r.Symbol] = r
		}
	}
	got, want := dumpSaved(t, set), dumpSaved(t, perRecord)
	if len(want) < 100 {
		t.Fatalf("only %d rows saved: the runs test too little", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("one statement a batch stored other rows than a statement a record (-per record +batch):\n%s", diff)
	}
}

// Saves work with default_query_exec_mode=exec (the README's setting for
// pgbouncer before 1.21), where pgx types each parameter by its Go type
// instead of asking Postgres: the reports and their results read back.
func TestSaveAnalyticsInExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storetest.CreateSchema(t)
	storetest.Open(t, schema) // migrated
	u := storetest.DatabaseURL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	db, err := store.Open(ctx, u+sep+"default_query_exec_mode=exec", store.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var recs []store.AnalyticsRecord
	for i, sym := range []string{"A_USDT", "B_USDT", "C_USDT"} {
		res := analytics.Result{TechnicalScore: 10 * i, OverallScore: 10 * i, Verdict: analytics.VerdictNeutral,
			Summary: analytics.Message{Key: "summary", Args: analytics.Args{{Name: "symbol", Value: sym + "\x1e"}}}}
		recs = append(recs, store.AnalyticsRecord{Market: domain.Crypto, Style: analytics.Swing, Symbol: sym, Exchange: "binance",
			Result: &res, OverallScore: res.OverallScore, Verdict: res.Verdict, Price: 100, Sparkline: []float64{1, 2},
			CandleTime: at, CandleClose: 100, UpdatedAt: at, CandlesUsed: 500, Instrument: "spot"})
	}
	if _, err := db.SaveAnalytics(ctx, recs, nil); err != nil {
		t.Fatalf("save in exec mode: %v", err)
	}
	for _, r := range recs {
		got, err := db.AnalyticsReport(ctx, domain.Crypto, r.Symbol, analytics.Swing)
		if err != nil {
			t.Fatal(err)
		}
		if got.Result == nil || got.Result.Summary.Args.Value("symbol") != r.Symbol+"\x1e" || got.OverallScore != r.OverallScore {
			t.Fatalf("%s read back as %+v", r.Symbol, got)
		}
	}
}

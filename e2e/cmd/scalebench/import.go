package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/e2e/benchkit"
)

// importRun is `marketd import` run during the steady window (-import):
// from the simulator's archive (-import-symbols spot pairs, -import-months
// months of 1d, 4h and 1h before the current one), under nice -n 10 (the
// operator's way to run it beside the live roles), while the 1m closes
// are timed.
type importRun struct {
	mu         sync.Mutex
	start, end time.Time
	done       bool
	err        error
	report     struct {
		Files, Skipped int
		Candles        int64
		Written        int64
		Refused, Gaps  map[string]json.RawMessage
		Delisted       []string
		ElapsedSeconds float64 `json:"elapsed_seconds"`
		SeriesDone     int     `json:"series_done"`
		Series         int
	}
	candlesBytes0, candlesBytes1 int64
	during, before               []time.Duration // 1m close → visible, closes while it ran and before it started
	missingDuring, missingBefore int
}

// importFeedURL adds the simulator's archive to marketd's feeds.
func importFeedURL(o options, env map[string]string, host string) {
	if o.importMonths == 0 {
		return
	}
	env["MARKET_FEED_URLS"] += ",binance-archive=http://" + host + "/archive"
	// Years of 1h and 4h are kept (the default retention would drop them).
	env["MARKET_CANDLE_RETENTION"] = "1h=forever,4h=forever"
}

// simArchiveArgs are the simulator's flags serving the archive.
func simArchiveArgs(o options) []string {
	if o.importMonths == 0 {
		return nil
	}
	return []string{"-archive-months", fmt.Sprint(o.importMonths), "-archive-symbols", fmt.Sprint(o.importSymbols)}
}

// startImport runs the import in the background.
func (d *deployment) startImport(o options, imp *importRun) {
	bytes0 := d.candlesBytes()
	imp.mu.Lock()
	defer imp.mu.Unlock()
	imp.candlesBytes0 = bytes0
	from := now().UTC().AddDate(0, -o.importMonths, 0).Format("2006-01")
	args := []string{"-n", "10", o.bin, "import", "--source", "binance-archive", "--market", "crypto", "--instrument", "spot",
		"--timeframes", "1d,4h,1h", "--from", from, "--concurrency", fmt.Sprint(o.importConcurrency), "--json"}
	logFile, err := os.CreateTemp("", "scalebench-import-*.log")
	if err != nil {
		imp.err, imp.done, imp.start = err, true, now()
		return
	}
	cmd := exec.Command("nice", args...)
	cmd.Env = benchkit.Environ(d.vars)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, logFile
	imp.start = now()
	log.Printf("import: nice %s", strings.Join(args, " "))
	go func() {
		err := cmd.Run()
		logFile.Close()
		end := now()
		bytes1 := d.candlesBytes()
		imp.mu.Lock()
		defer imp.mu.Unlock()
		imp.end, imp.done, imp.candlesBytes1 = end, true, bytes1
		if jerr := json.Unmarshal([]byte(out.String()), &imp.report); jerr != nil {
			imp.err = fmt.Errorf("import: %v (%v); log %s", err, jerr, logFile.Name())
		}
		log.Printf("import: done in %s, %d candles, %d written; log %s", end.Sub(imp.start).Round(time.Second), imp.report.Candles, imp.report.Written, logFile.Name())
	}()
}

func (imp *importRun) started() bool {
	if imp == nil {
		return false
	}
	imp.mu.Lock()
	defer imp.mu.Unlock()
	return !imp.start.IsZero()
}

// running reports whether the import runs at t (a 1m close).
func (imp *importRun) running(t time.Time) bool {
	if imp == nil {
		return false
	}
	imp.mu.Lock()
	defer imp.mu.Unlock()
	return !imp.start.IsZero() && !t.Before(imp.start) && !imp.done
}

func (imp *importRun) finished() bool {
	if imp == nil {
		return true
	}
	imp.mu.Lock()
	defer imp.mu.Unlock()
	return imp.done
}

// sample records a 1m close's latency taken while the import ran, or
// before it started (the baseline).
func (imp *importRun) sample(lat time.Duration, ok, during bool) {
	imp.mu.Lock()
	defer imp.mu.Unlock()
	switch {
	case during && ok:
		imp.during = append(imp.during, lat)
	case during:
		imp.missingDuring++
	case ok:
		imp.before = append(imp.before, lat)
	default:
		imp.missingBefore++
	}
}

// candlesBytes is the candles table's size with its indexes and TOAST.
func (d *deployment) candlesBytes() int64 {
	var n int64
	if err := d.db.QueryRow(context.Background(), `SELECT pg_total_relation_size(to_regclass($1))`, d.schema+".candles").Scan(&n); err != nil {
		log.Printf("candles size: %v", err)
	}
	return n
}

// importRows are the report's rows of the import.
func importRows(row func(string, string, func(*result) string)) {
	row("`marketd import` during the window (nice -n 10): series, files, candles read / rows written, time, candles a second", "", func(r *result) string {
		imp := r.imp
		if imp == nil {
			return "—"
		}
		if imp.err != nil {
			return imp.err.Error()
		}
		rep := imp.report
		took := imp.end.Sub(imp.start)
		return fmt.Sprintf("%d series, %d files, %d / %d in %s: %.0f candles/s; %d refused, %d series with gaps, %d delisted",
			rep.SeriesDone, rep.Files, rep.Candles, rep.Written, took.Round(time.Second), float64(rep.Candles)/took.Seconds(),
			len(rep.Refused), len(rep.Gaps), len(rep.Delisted))
	})
	row("candles table growth a candle imported (pg_total_relation_size, indexes included)", "", func(r *result) string {
		imp := r.imp
		if imp == nil || imp.report.Written == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f bytes (%.2f GB for %d rows)", float64(imp.candlesBytes1-imp.candlesBytes0)/float64(imp.report.Written),
			float64(imp.candlesBytes1-imp.candlesBytes0)/1e9, imp.report.Written)
	})
	row("closed 1m candle → visible in GET /ohlcv before the import (the baseline, -window), p50 / p95 / max", "", func(r *result) string {
		imp := r.imp
		if imp == nil {
			return "—"
		}
		return fmt.Sprintf("%s; %d not within 90 s", benchkit.Dist(imp.before), imp.missingBefore)
	})
	row("closed 1m candle → visible in GET /ohlcv while the import ran, p50 / p95 / max", "p95 < 3 s", func(r *result) string {
		imp := r.imp
		if imp == nil {
			return "—"
		}
		return fmt.Sprintf("%s; %d not within 90 s %s", benchkit.Dist(imp.during), imp.missingDuring,
			verdict(len(imp.during) > 0 && imp.missingDuring == 0 && benchkit.Pct(imp.during, 0.95) < 3*time.Second))
	})
}

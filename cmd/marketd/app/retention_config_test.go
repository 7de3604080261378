package app_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/worker"
)

const day = 24 * time.Hour

// TestCandleRetentionSetting: unset, MARKET_CANDLE_RETENTION is the
// worker's default; entries override their timeframe only, forever keeps
// a timeframe for good, and days, weeks and Go durations are read.
func TestCandleRetentionSetting(t *testing.T) {
	t.Parallel()
	def, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(def.CandleRetention, worker.DefaultCandleRetention()) {
		t.Errorf("default retention %v, want the worker's %v", def.CandleRetention, worker.DefaultCandleRetention())
	}
	if _, ok := def.CandleRetention[domain.TF1d]; ok {
		t.Error("daily candles have a default retention; want them kept forever")
	}
	cfg, err := loadConfig(map[string]string{"MARKET_CANDLE_RETENTION": " 1m=7d, 1h=6w,4h=forever ,1d=3000d,5m=96h"})
	if err != nil {
		t.Fatal(err)
	}
	want := worker.DefaultCandleRetention()
	want[domain.TF1m], want[domain.TF1h], want[domain.TF1d], want[domain.TF5m] = 7*day, 42*day, 3000*day, 96*time.Hour
	delete(want, domain.TF4h)
	if !maps.Equal(cfg.CandleRetention, want) {
		t.Errorf("retention %v, want %v", cfg.CandleRetention, want)
	}
}

// TestCandleRetentionErrors: a bad entry is a one-line error naming the
// variable and the entry; a retention shorter than the 1,000 candles GET
// /ohlcv serves is refused with the least accepted.
func TestCandleRetentionErrors(t *testing.T) {
	t.Parallel()
	for value, wantText := range map[string]string{
		"2h=30d":          `"2h=30d"`,
		"1m":              `"1m"`,
		"1m=":             `"1m="`,
		"1m=soon":         `"1m=soon"`,
		"1m=-3d":          `"1m=-3d"`,
		"1m=0d":           `"1m=0d"`,
		"1m=3d,1m=4d":     "given twice",
		"1m=12h":          "at least 16h40m0s",
		"1d=365d":         "at least 1000d",
		"5m=3d,15m=1w":    "at least 4d",
		"1h=2w":           "at least 42d",
		"1w=forever,x=1d": `"x=1d"`,
	} {
		_, err := loadConfig(map[string]string{"MARKET_CANDLE_RETENTION": value})
		if err == nil || !strings.HasPrefix(err.Error(), "MARKET_CANDLE_RETENTION: ") || !strings.Contains(err.Error(), wantText) || strings.Contains(err.Error(), "\n") {
			t.Errorf("MARKET_CANDLE_RETENTION=%s: %v, want one line naming the variable and %s", value, err, wantText)
		}
	}
}
